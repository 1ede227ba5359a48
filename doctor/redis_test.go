package doctor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestCheckRedis: the Redis check passes when Redis answers PING, fails with the fix when it does
// not, and says a single replica needs none when REDIS_URL is unset; either way it says where the
// threads are cached.
func TestCheckRedis(t *testing.T) {
	for _, tc := range []struct {
		name   string
		host   string
		ping   error
		ttl    time.Duration
		want   status
		detail string
	}{
		{"not set", "", nil, 0, statusOK, "REDIS_URL not set"},
		{"answers", "redis.internal:6379", nil, 0, statusOK, "answers PING"},
		{"refused", "redis.internal:6379", errors.New("dial tcp: connection refused"), 0, statusFail, "connection refused"},
		{"threads cached in memory", "", nil, 6 * time.Hour, statusOK, "threads it takes part in are cached in its memory, for 6h after"},
		{"threads cached in Redis", "redis.internal:6379", nil, 90 * time.Minute, statusOK, "state there; the threads it takes part in are cached there too, for 1h30m after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{RedisHost: tc.host, PingRedis: func(context.Context) error { return tc.ping }, ThreadCacheTTL: tc.ttl}
			r := checkRedis(t.Context(), in)
			if r.status != tc.want || !strings.Contains(r.detail, tc.detail) {
				t.Errorf("checkRedis = %v %q; want %v with %q", r.status, r.detail, tc.want, tc.detail)
			}
		})
	}
}
