package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// RedisThreads is a thread store in Redis, shared by every replica: one hash per thread, expiring
// (keys under the store's namespace):
//
//	thread-epoch         the epoch (INCR by Bump)
//	thread-entries       sorted set of the entries' keys by when they were begun (ms of Redis's clock)
//	thread:<key>         hash: epoch, gen, root, from, done, left, bytes; m:<ts> a message's body,
//	                     k:<ts> its mark, d:<ts> a deleted message
//
// Every change is one Lua script, so that no other replica's change comes between its checks and its
// writes. Safe for concurrent use.
type RedisThreads struct {
	r   *Redis
	lim ThreadLimits
	s   threadScripts
}

type threadScripts struct{ begin, fill, apply *redis.Script }

// Threads returns the thread store of r with the limits lim.
func (r *Redis) Threads(lim ThreadLimits) (*RedisThreads, error) {
	if err := checkThreadLimits(lim); err != nil {
		return nil, err
	}
	return &RedisThreads{r: r, lim: lim, s: threadScripts{
		begin: redis.NewScript(threadBeginLua),
		fill:  redis.NewScript(threadTrimLua + threadFillLua),
		apply: redis.NewScript(threadTrimLua + threadApplyLua),
	}}, nil
}

func (t *RedisThreads) epochKey() string        { return t.r.ns + "thread-epoch" }
func (t *RedisThreads) entriesKey() string      { return t.r.ns + "thread-entries" }
func (t *RedisThreads) entry(key string) string { return t.r.ns + "thread:" + key }

// Bump makes every entry begun before it stale, for every replica, and returns the new epoch.
func (t *RedisThreads) Bump(ctx context.Context) (int64, error) {
	n, err := t.r.c.Incr(ctx, t.epochKey()).Result()
	if err != nil {
		return 0, fmt.Errorf("thread bump: %w", err)
	}
	return n, nil
}

// Begin starts entry key afresh (what it held is dropped), with root kept whatever its age, as gen's
// to fill, and returns the epoch it is of.
func (t *RedisThreads) Begin(ctx context.Context, key, root, gen string) (int64, error) {
	n, err := t.s.begin.Run(ctx, t.r.c, []string{t.entry(key), t.epochKey(), t.entriesKey()},
		root, gen, t.lim.TTL.Milliseconds(), t.lim.Entries).Int64()
	if err != nil {
		return 0, fmt.Errorf("thread begin: %w", err)
	}
	return n, nil
}

// Fill puts msgs into entry key if gen began it last (else it returns false); see MemoryThreads.Fill.
func (t *RedisThreads) Fill(ctx context.Context, key, gen string, leftOut int, msgs []ThreadMessage) (bool, error) {
	args := []any{gen, leftOut, t.lim.TTL.Milliseconds(), t.lim.Bytes}
	for _, m := range msgs {
		args = append(args, m.TS, m.Body, m.Mark)
	}
	n, err := t.s.fill.Run(ctx, t.r.c, []string{t.entry(key)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("thread fill: %w", err)
	}
	return n == 1, nil
}

// Apply makes ops in entry key, in order, if it is held; a thread not held is left alone.
func (t *RedisThreads) Apply(ctx context.Context, key string, ops []ThreadOp) error {
	args := []any{t.lim.TTL.Milliseconds(), t.lim.Bytes}
	for _, op := range ops {
		args = append(args, string(op.Kind), op.TS, op.Body, op.Mark)
	}
	if err := t.s.apply.Run(ctx, t.r.c, []string{t.entry(key)}, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("thread apply: %w", err)
	}
	return nil
}

// Load returns entry key (false: not held), with the store's epoch now.
func (t *RedisThreads) Load(ctx context.Context, key string) (ThreadEntry, bool, error) {
	var fields *redis.MapStringStringCmd
	var epoch *redis.StringCmd
	_, err := t.r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, t.entry(key))
		epoch = p.Get(ctx, t.epochKey())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return ThreadEntry{}, false, fmt.Errorf("thread load: %w", err)
	}
	h := fields.Val()
	if len(h) == 0 {
		return ThreadEntry{}, false, nil
	}
	e := ThreadEntry{Done: h["done"] == "1"}
	e.Current, _ = strconv.ParseInt(epoch.Val(), 10, 64) // none yet: 0
	e.Epoch, _ = strconv.ParseInt(h["epoch"], 10, 64)
	e.LeftOut, _ = strconv.Atoi(h["left"])
	for f, v := range h {
		if ts, ok := strings.CutPrefix(f, "m:"); ok {
			e.Messages = append(e.Messages, ThreadMessage{TS: ts, Body: []byte(v), Mark: []byte(h["k:"+ts])})
		}
	}
	sortThread(e.Messages)
	return e, true, nil
}

// threadBeginLua: KEYS[1] the entry, KEYS[2] the epoch, KEYS[3] the entries by begin time; ARGV root,
// gen, ttl ms, most entries. Drops what the entry held, begins it of the epoch now, and drops the
// least recently begun entries past the most (and forgets those begun a ttl ago: expired).
const threadBeginLua = `
local epoch = tonumber(redis.call('GET', KEYS[2]) or '0')
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'epoch', epoch, 'gen', ARGV[2], 'root', ARGV[1], 'from', '', 'done', '0', 'left', '0', 'bytes', '0')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[3], KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%.0f', now - tonumber(ARGV[3])))
local over = redis.call('ZCARD', KEYS[3]) + 1 - tonumber(ARGV[4])
if over > 0 then
	local old = redis.call('ZPOPMIN', KEYS[3], over)
	for i = 1, #old, 2 do
		redis.call('DEL', old[i])
	end
end
redis.call('ZADD', KEYS[3], string.format('%.0f', now), KEYS[1])
redis.call('PEXPIRE', KEYS[3], ARGV[3])
return epoch
`

// threadTrimLua: the functions the fill and apply scripts share. before orders Slack timestamps as
// tsBefore does; trim drops the oldest messages after the root until the entry holds at most bound
// bytes (the newest always kept), counting them as left out, and makes the entry start after them.
const threadTrimLua = `
local function before(a, b)
	if #a ~= #b then
		return #a < #b
	end
	return a < b
end

local function size(k, ts)
	return redis.call('HSTRLEN', k, 'm:' .. ts) + redis.call('HSTRLEN', k, 'k:' .. ts)
end

local function trim(k, bytes, bound)
	if bytes <= bound then
		return bytes
	end
	local root = redis.call('HGET', k, 'root') or ''
	local order = {}
	for _, f in ipairs(redis.call('HKEYS', k)) do
		if string.sub(f, 1, 2) == 'm:' and string.sub(f, 3) ~= root then
			table.insert(order, string.sub(f, 3))
		end
	end
	table.sort(order, before)
	local dropped = 0
	local i = 1
	while i < #order and bytes > bound do
		bytes = bytes - size(k, order[i])
		redis.call('HDEL', k, 'm:' .. order[i], 'k:' .. order[i])
		dropped = dropped + 1
		i = i + 1
	end
	if dropped > 0 then
		redis.call('HSET', k, 'from', order[i])
		redis.call('HINCRBY', k, 'left', dropped)
	end
	return bytes
end

local function outside(k, ts)
	local root = redis.call('HGET', k, 'root') or ''
	local from = redis.call('HGET', k, 'from') or ''
	return ts ~= root and from ~= '' and before(ts, from)
end
`

// threadFillLua: KEYS[1] the entry; ARGV gen, left out, ttl ms, bound, then ts, body, mark of each
// message. Returns 0 when another Begin came since gen's.
const threadFillLua = `
local k = KEYS[1]
if redis.call('HGET', k, 'gen') ~= ARGV[1] then
	return 0
end
local root = redis.call('HGET', k, 'root') or ''
local bytes = tonumber(redis.call('HGET', k, 'bytes') or '0')
local oldest = ''
for i = 5, #ARGV, 3 do
	local ts = ARGV[i]
	if redis.call('HEXISTS', k, 'm:' .. ts) == 0 and redis.call('HEXISTS', k, 'd:' .. ts) == 0 then
		redis.call('HSET', k, 'm:' .. ts, ARGV[i + 1])
		bytes = bytes + #ARGV[i + 1]
		if ARGV[i + 2] ~= '' then
			redis.call('HSET', k, 'k:' .. ts, ARGV[i + 2])
			bytes = bytes + #ARGV[i + 2]
		end
	end
	if ts ~= root and (oldest == '' or before(ts, oldest)) then
		oldest = ts
	end
end
if tonumber(ARGV[2]) > 0 and oldest ~= '' then
	redis.call('HSET', k, 'from', oldest)
	for _, f in ipairs(redis.call('HKEYS', k)) do
		if string.sub(f, 1, 2) == 'm:' and outside(k, string.sub(f, 3)) then
			bytes = bytes - size(k, string.sub(f, 3))
			redis.call('HDEL', k, f, 'k:' .. string.sub(f, 3))
		end
	end
end
redis.call('HINCRBY', k, 'left', ARGV[2])
bytes = trim(k, bytes, tonumber(ARGV[4]))
redis.call('HSET', k, 'done', '1', 'bytes', bytes)
redis.call('PEXPIRE', k, ARGV[3])
return 1
`

// threadApplyLua: KEYS[1] the entry; ARGV ttl ms, bound, then kind, ts, body, mark of each op (see
// ThreadOpKind). Nothing when the entry is not held.
const threadApplyLua = `
local k = KEYS[1]
if redis.call('EXISTS', k) == 0 then
	return 0
end
local bytes = tonumber(redis.call('HGET', k, 'bytes') or '0')
for i = 3, #ARGV, 4 do
	local kind, ts, body, mark = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
	if outside(k, ts) then
	elseif kind == 'x' then
		bytes = bytes - size(k, ts)
		redis.call('HDEL', k, 'm:' .. ts, 'k:' .. ts)
		redis.call('HSET', k, 'd:' .. ts, '1')
	elseif redis.call('HEXISTS', k, 'd:' .. ts) == 0 then
		bytes = bytes - redis.call('HSTRLEN', k, 'm:' .. ts) + #body
		redis.call('HSET', k, 'm:' .. ts, body)
		if kind == 'w' or mark ~= '' then
			bytes = bytes - redis.call('HSTRLEN', k, 'k:' .. ts) + #mark
			if mark == '' then
				redis.call('HDEL', k, 'k:' .. ts)
			else
				redis.call('HSET', k, 'k:' .. ts, mark)
			end
		end
	end
end
bytes = trim(k, bytes, tonumber(ARGV[2]))
redis.call('HSET', k, 'bytes', bytes)
redis.call('PEXPIRE', k, ARGV[1])
return 1
`

// FallbackThreads is the thread store of a Fallback: Redis while it answers. While it does not,
// nothing is held (every Load is a miss and the bot reads Slack): another replica's events reach
// only Redis, so no copy of this process could be trusted. A change that did not reach Redis (a
// failed call, or one made while degraded) may be missing from its entries, so before Redis is
// trusted again this replica bumps its epoch there.
type FallbackThreads struct {
	f *Fallback
	t *RedisThreads
	// behind: a change did not reach Redis since the last Bump.
	behind atomic.Bool
}

// Threads returns the thread store of f with the limits lim.
func (f *Fallback) Threads(lim ThreadLimits) (*FallbackThreads, error) {
	t, err := f.primary.Threads(lim)
	if err != nil {
		return nil, err
	}
	return &FallbackThreads{f: f, t: t}, nil
}

// miss is the local side of every FallbackThreads call: the change is not held, so Redis must be
// caught up before it is trusted again.
func (ft *FallbackThreads) miss(context.Context) error {
	ft.behind.Store(true)
	return nil
}

// caughtUp bumps the epoch in Redis if a change missed it; false when that failed too.
func (ft *FallbackThreads) caughtUp(ctx context.Context) bool {
	if !ft.behind.Load() {
		return true
	}
	ft.behind.Store(false)
	if _, err := ft.t.Bump(ctx); err != nil {
		ft.behind.Store(true)
		return false
	}
	return true
}

// Bump makes every entry stale for every replica.
func (ft *FallbackThreads) Bump(ctx context.Context) (int64, error) {
	return call(ctx, ft.f, "thread_bump", func(c context.Context) (int64, error) {
		n, err := ft.t.Bump(c)
		if err == nil {
			ft.behind.Store(false)
		}
		return n, err
	}, func(c context.Context) (int64, error) { return 0, ft.miss(c) })
}

// Begin begins entry key in Redis; while Redis cannot be reached it returns -1: an entry nobody holds.
func (ft *FallbackThreads) Begin(ctx context.Context, key, root, gen string) (int64, error) {
	return call(ctx, ft.f, "thread_begin", func(c context.Context) (int64, error) {
		if !ft.caughtUp(c) {
			return 0, errors.New("thread begin: bump failed")
		}
		return ft.t.Begin(c, key, root, gen)
	}, func(c context.Context) (int64, error) { return -1, ft.miss(c) })
}

// Fill fills entry key in Redis (false while Redis cannot be reached).
func (ft *FallbackThreads) Fill(ctx context.Context, key, gen string, leftOut int, msgs []ThreadMessage) (bool, error) {
	return call(ctx, ft.f, "thread_fill", func(c context.Context) (bool, error) {
		return ft.t.Fill(c, key, gen, leftOut, msgs)
	}, func(c context.Context) (bool, error) { return false, ft.miss(c) })
}

// Apply makes ops in entry key in Redis; one that cannot reach it is remembered as missed.
func (ft *FallbackThreads) Apply(ctx context.Context, key string, ops []ThreadOp) error {
	return do(ctx, ft.f, "thread_apply", func(c context.Context) error { return ft.t.Apply(c, key, ops) }, ft.miss)
}

// Load returns entry key from Redis; while Redis cannot be reached, or a change missed it and the
// epoch could not be bumped since, nothing is held.
func (ft *FallbackThreads) Load(ctx context.Context, key string) (ThreadEntry, bool, error) {
	r, err := call(ctx, ft.f, "thread_load", func(c context.Context) (loaded, error) {
		if !ft.caughtUp(c) {
			return loaded{}, errors.New("thread load: bump failed")
		}
		e, ok, err := ft.t.Load(c, key)
		return loaded{e, ok}, err
	}, func(c context.Context) (loaded, error) { return loaded{}, ft.miss(c) })
	return r.e, r.ok, err
}

// loaded is Load's result, for call.
type loaded struct {
	e  ThreadEntry
	ok bool
}
