package doctor

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCheckRedis: the Redis check passes when Redis answers PING, fails with the fix when it does
// not, and says a single replica needs none when REDIS_URL is unset.
func TestCheckRedis(t *testing.T) {
	for _, tc := range []struct {
		name   string
		host   string
		ping   error
		want   status
		detail string
	}{
		{"not set", "", nil, statusOK, "REDIS_URL not set"},
		{"answers", "redis.internal:6379", nil, statusOK, "answers PING"},
		{"refused", "redis.internal:6379", errors.New("dial tcp: connection refused"), statusFail, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{RedisHost: tc.host, PingRedis: func(context.Context) error { return tc.ping }}
			r := checkRedis(t.Context(), in)
			if r.status != tc.want || !strings.Contains(r.detail, tc.detail) {
				t.Errorf("checkRedis = %v %q; want %v with %q", r.status, r.detail, tc.want, tc.detail)
			}
		})
	}
}
