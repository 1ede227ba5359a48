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
//	thread-entries       sorted set of the entries' keys by their last change (ms of Redis's clock)
//	thread-sizes         hash: the bytes of each entry in thread-entries
//	thread-bytes         the sum of thread-sizes
//	thread:<key>         hash: epoch, gen, root, from, done, left, bytes; m:<ts> a message's body,
//	                     k:<ts> its mark, d:<ts> a deleted message
//
// Every change is one Lua script, so that no other replica's change comes between its checks and its
// writes; each keeps the accounts of the entries (their last change, their bytes) and drops the
// expired ones from them, then the least recently changed while there are more than Entries or they
// hold more than Total: Redis's memory is shared with the replicas' state, which must never find it
// full. Safe for concurrent use.
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
	if lim.Total <= 0 {
		lim.Total = lim.Entries * lim.Bytes
	}
	return &RedisThreads{r: r, lim: lim, s: threadScripts{
		begin: redis.NewScript(threadTrimLua + threadBeginLua),
		fill:  redis.NewScript(threadTrimLua + threadFillLua),
		apply: redis.NewScript(threadTrimLua + threadApplyLua),
	}}, nil
}

func (t *RedisThreads) epochKey() string { return t.r.ns + "thread-epoch" }

// keys are the keys of a script on entry key: the entry, its accounts, the epoch.
func (t *RedisThreads) keys(key string) []string {
	return []string{t.r.ns + "thread:" + key, t.r.ns + "thread-entries", t.r.ns + "thread-sizes", t.r.ns + "thread-bytes", t.epochKey()}
}

// limits are the first arguments of every script: ttl ms, bound of an entry, most entries, most bytes.
func (t *RedisThreads) limits() []any {
	return []any{t.lim.TTL.Milliseconds(), t.lim.Bytes, t.lim.Entries, t.lim.Total}
}

// Bump makes every entry begun before it stale, for every replica, and returns the new epoch.
func (t *RedisThreads) Bump(ctx context.Context) (int64, error) {
	n, err := t.r.c.Incr(ctx, t.epochKey()).Result()
	if err != nil {
		return 0, fmt.Errorf("thread bump: %w", err)
	}
	return n, nil
}

// Begin starts entry key afresh (what it held is dropped), with root kept whatever its age, as gen's
// to fill, of the epoch now. With onlyNew, an entry held is left as it is, and Begin reports false.
func (t *RedisThreads) Begin(ctx context.Context, key, root, gen string, onlyNew bool) (bool, error) {
	n, err := t.s.begin.Run(ctx, t.r.c, t.keys(key), append(t.limits(), root, gen, onlyNew)...).Int()
	if err != nil {
		return false, fmt.Errorf("thread begin: %w", err)
	}
	return n == 1, nil
}

// Fill puts msgs into entry key if gen began it last (else it returns false); see MemoryThreads.Fill.
func (t *RedisThreads) Fill(ctx context.Context, key, gen string, leftOut int, msgs []ThreadMessage) (bool, error) {
	args := append(t.limits(), gen, leftOut)
	for _, m := range msgs {
		args = append(args, m.TS, m.Body, m.Mark)
	}
	n, err := t.s.fill.Run(ctx, t.r.c, t.keys(key), args...).Int()
	if err != nil {
		return false, fmt.Errorf("thread fill: %w", err)
	}
	return n == 1, nil
}

// Apply makes ops in entry key, in order, if it is held; a thread not held is left alone.
func (t *RedisThreads) Apply(ctx context.Context, key string, ops []ThreadOp) error {
	args := t.limits()
	for _, op := range ops {
		args = append(args, string(op.Kind), op.TS, op.Body, op.Mark)
	}
	if err := t.s.apply.Run(ctx, t.r.c, t.keys(key), args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("thread apply: %w", err)
	}
	return nil
}

// Load returns entry key (false: not held), with the store's epoch now.
func (t *RedisThreads) Load(ctx context.Context, key string) (ThreadEntry, bool, error) {
	var fields *redis.MapStringStringCmd
	var epoch *redis.StringCmd
	_, err := t.r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, t.keys(key)[0])
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

// The scripts' KEYS are those of RedisThreads.keys (the entry, thread-entries, thread-sizes,
// thread-bytes, thread-epoch), and their first ARGV RedisThreads.limits (ttl ms, bound of an entry,
// most entries, most bytes).

// threadTrimLua: the functions the scripts share. before orders Slack timestamps as tsBefore does;
// trim drops the oldest messages after the root until the entry holds at most the bound (the newest
// always kept), counting them as left out, and makes the entry start after them; account records
// the entry's bytes and change, then drops what the limits do not keep.
const threadTrimLua = `
local ttl, bound, most, total = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])

local function before(a, b)
	if #a ~= #b then
		return #a < #b
	end
	return a < b
end

local function size(k, ts)
	return redis.call('HSTRLEN', k, 'm:' .. ts) + redis.call('HSTRLEN', k, 'k:' .. ts)
end

local function trim(k, bytes)
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

local function forget(e)
	redis.call('DECRBY', KEYS[4], tonumber(redis.call('HGET', KEYS[3], e) or '0'))
	redis.call('HDEL', KEYS[3], e)
	redis.call('ZREM', KEYS[2], e)
	redis.call('DEL', e)
end

local function account(k, bytes)
	redis.call('HSET', k, 'bytes', bytes)
	redis.call('PEXPIRE', k, ttl)
	local t = redis.call('TIME')
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	redis.call('INCRBY', KEYS[4], bytes - tonumber(redis.call('HGET', KEYS[3], k) or '0'))
	redis.call('HSET', KEYS[3], k, bytes)
	redis.call('ZADD', KEYS[2], string.format('%.0f', now), k)
	for _, e in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now - ttl))) do
		forget(e)
	end
	while redis.call('ZCARD', KEYS[2]) > 1 and (redis.call('ZCARD', KEYS[2]) > most or tonumber(redis.call('GET', KEYS[4]) or '0') > total) do
		local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
		if oldest == k then
			oldest = redis.call('ZRANGE', KEYS[2], 1, 1)[1]
		end
		forget(oldest)
	end
	for _, a in ipairs({KEYS[2], KEYS[3], KEYS[4]}) do
		redis.call('PEXPIRE', a, ttl)
	end
end
`

// threadBeginLua: ARGV[5] root, ARGV[6] gen, ARGV[7] only new ("1": not when the entry is held).
// Drops what the entry held and begins it of the epoch now; returns 1, or 0 when it left it.
const threadBeginLua = `
local k = KEYS[1]
if ARGV[7] == '1' and redis.call('EXISTS', k) == 1 then
	return 0
end
local epoch = tonumber(redis.call('GET', KEYS[5]) or '0')
redis.call('DEL', k)
redis.call('HSET', k, 'epoch', epoch, 'gen', ARGV[6], 'root', ARGV[5], 'from', '', 'done', '0', 'left', '0')
account(k, 0)
return 1
`

// threadFillLua: ARGV[5] gen, ARGV[6] left out, then ts, body, mark of each message. Returns 0 when
// another Begin came since gen's.
const threadFillLua = `
local k = KEYS[1]
if redis.call('HGET', k, 'gen') ~= ARGV[5] then
	return 0
end
local root = redis.call('HGET', k, 'root') or ''
local bytes = tonumber(redis.call('HGET', k, 'bytes') or '0')
local oldest = ''
for i = 7, #ARGV, 3 do
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
if tonumber(ARGV[6]) > 0 and oldest ~= '' then
	redis.call('HSET', k, 'from', oldest)
	for _, f in ipairs(redis.call('HKEYS', k)) do
		if string.sub(f, 1, 2) == 'm:' and outside(k, string.sub(f, 3)) then
			bytes = bytes - size(k, string.sub(f, 3))
			redis.call('HDEL', k, f, 'k:' .. string.sub(f, 3))
		end
	end
end
redis.call('HINCRBY', k, 'left', ARGV[6])
redis.call('HSET', k, 'done', '1')
account(k, trim(k, bytes))
return 1
`

// threadApplyLua: ARGV[5...] kind, ts, body, mark of each op (see ThreadOpKind). Nothing when the
// entry is not held.
const threadApplyLua = `
local k = KEYS[1]
if redis.call('EXISTS', k) == 0 then
	return 0
end
local bytes = tonumber(redis.call('HGET', k, 'bytes') or '0')
for i = 5, #ARGV, 4 do
	local kind, ts, body, mark = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
	if outside(k, ts) then
	elseif kind == 'x' then
		bytes = bytes - size(k, ts)
		redis.call('HDEL', k, 'm:' .. ts, 'k:' .. ts)
		redis.call('HSET', k, 'd:' .. ts, '1')
	elseif redis.call('HEXISTS', k, 'd:' .. ts) == 0 then
		bytes = bytes - redis.call('HSTRLEN', k, 'm:' .. ts) + #body
		redis.call('HSET', k, 'm:' .. ts, body)
		if mark ~= '' then
			bytes = bytes - redis.call('HSTRLEN', k, 'k:' .. ts) + #mark
			redis.call('HSET', k, 'k:' .. ts, mark)
		end
	end
end
account(k, trim(k, bytes))
return 1
`

// FallbackThreads is the thread store of a Fallback: Redis while it answers. While it does not,
// nothing is held (every Load is a miss and the bot reads Slack): another replica's events reach
// only Redis, so no copy of this process could be trusted. A change that did not reach Redis (a
// failed call, or one made while degraded) may be missing from its entries, so before Redis is
// trusted again this replica bumps its epoch there: when the Fallback's probe finds Redis back,
// before it serves from it again (or, after a single failed call, at the next call).
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
	ft := &FallbackThreads{f: f, t: t}
	f.threads.Store(ft)
	return ft, nil
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

// Begin begins entry key in Redis; while Redis cannot be reached it begins nothing (false).
func (ft *FallbackThreads) Begin(ctx context.Context, key, root, gen string, onlyNew bool) (bool, error) {
	return call(ctx, ft.f, "thread_begin", func(c context.Context) (bool, error) {
		if !ft.caughtUp(c) {
			return false, errors.New("thread begin: bump failed")
		}
		return ft.t.Begin(c, key, root, gen, onlyNew)
	}, func(c context.Context) (bool, error) { return false, ft.miss(c) })
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
