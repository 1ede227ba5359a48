package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// A long thread's summary (package threads makes it, signed) is kept beside the thread's entry, as
// the caller's bytes, with the thread stores' TTL: one per thread key, shared by the replicas in
// Redis. It has a key of its own (thread-summary:<key>), not a field of the entry's hash: a read
// begins the entry afresh, and the summary, which says itself what it stands for, outlives that.
// Reads are bounded: a summary over the bound the reader gives is not read at all (as if absent).
// At most MaxSummaries are held (with Redis: thread-summaries, a sorted set of their keys by when
// they were put, drops the oldest), so that at most MaxSummaries×MaxSummaryBytes (8 MB) of Redis's
// memory goes to them.

// ErrSummaryTooLarge is a summary put over MaxSummaryBytes.
var ErrSummaryTooLarge = fmt.Errorf("thread summary over its bound: %w", errInvalid)

// Bounds of the summaries a thread store keeps: the bytes of one (the caller's, signed and
// encoded), and how many.
const (
	MaxSummaryBytes = 16 << 10
	MaxSummaries    = 500
)

// memSummary is a summary held by MemoryThreads.
type memSummary struct {
	data    []byte
	expires time.Time
}

// PutSummary keeps data as the summary of thread key (replacing the one held) for the store's TTL.
func (m *MemoryThreads) PutSummary(_ context.Context, key string, data []byte) error {
	if len(data) > MaxSummaryBytes {
		return ErrSummaryTooLarge
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if m.summaries == nil {
		m.summaries = make(map[string]memSummary)
	}
	m.summaries[key] = memSummary{data: append([]byte(nil), data...), expires: now.Add(m.lim.TTL)}
	// MaxSummaries at most: the expired go first, then the soonest to expire.
	for len(m.summaries) > MaxSummaries {
		soonest := ""
		for k, s := range m.summaries {
			if !now.Before(s.expires) {
				soonest = k
				break
			}
			if k != key && (soonest == "" || s.expires.Before(m.summaries[soonest].expires)) {
				soonest = k
			}
		}
		delete(m.summaries, soonest)
	}
	return nil
}

// LoadSummary returns the summary of thread key (false: none, expired, or over maxBytes).
func (m *MemoryThreads) LoadSummary(_ context.Context, key string, maxBytes int) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.summaries[key]
	if !ok || !time.Now().Before(s.expires) {
		delete(m.summaries, key)
		return nil, false, nil
	}
	if len(s.data) > maxBytes {
		return nil, false, nil
	}
	return append([]byte(nil), s.data...), true, nil
}

func (t *RedisThreads) summaryKey(key string) string { return t.r.ns + "thread-summary:" + key }

// PutSummary keeps data as the summary of thread key in Redis (replacing the one held), expiring
// with the store's TTL.
func (t *RedisThreads) PutSummary(ctx context.Context, key string, data []byte) error {
	if len(data) > MaxSummaryBytes {
		return ErrSummaryTooLarge
	}
	keys := []string{t.summaryKey(key), t.r.ns + "thread-summaries"}
	if err := summaryPutScript.Run(ctx, t.r.c, keys, data, t.lim.TTL.Milliseconds(), MaxSummaries).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("thread summary put: %w", err)
	}
	return nil
}

// summaryPutScript: KEYS the summary, thread-summaries; ARGV data, ttl ms, most. Puts the summary,
// then forgets the expired and the oldest while there are more than most.
var summaryPutScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, most = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZADD', KEYS[2], string.format('%.0f', now), KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now - ttl))
while redis.call('ZCARD', KEYS[2]) > most do
	local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
	redis.call('ZREM', KEYS[2], oldest)
	redis.call('DEL', oldest)
end
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
`)

// LoadSummary returns the summary of thread key (false: none, or over maxBytes). It reads at most
// maxBytes+1 bytes (GETRANGE), whatever another writer put there.
func (t *RedisThreads) LoadSummary(ctx context.Context, key string, maxBytes int) ([]byte, bool, error) {
	if maxBytes <= 0 {
		return nil, false, nil
	}
	s, err := t.r.c.GetRange(ctx, t.summaryKey(key), 0, int64(maxBytes)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, fmt.Errorf("thread summary load: %w", err)
	}
	if s == "" || len(s) > maxBytes {
		return nil, false, nil
	}
	return []byte(s), true, nil
}

// PutSummary keeps the summary of thread key in Redis; while Redis cannot be reached, nothing is
// kept (the summary is made again: it is no change another replica could miss).
func (ft *FallbackThreads) PutSummary(ctx context.Context, key string, data []byte) error {
	return do(ctx, ft.f, "thread_summary_put", func(c context.Context) error { return ft.t.PutSummary(c, key, data) },
		func(context.Context) error { return nil })
}

// LoadSummary returns the summary of thread key from Redis; while Redis cannot be reached, none.
func (ft *FallbackThreads) LoadSummary(ctx context.Context, key string, maxBytes int) ([]byte, bool, error) {
	r, err := call(ctx, ft.f, "thread_summary_load", func(c context.Context) (loadedSummary, error) {
		data, ok, err := ft.t.LoadSummary(c, key, maxBytes)
		return loadedSummary{data, ok}, err
	}, func(context.Context) (loadedSummary, error) { return loadedSummary{}, nil })
	return r.data, r.ok, err
}

// loadedSummary is LoadSummary's result, for call.
type loadedSummary struct {
	data []byte
	ok   bool
}
