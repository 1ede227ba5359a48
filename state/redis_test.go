package state

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/internal/waittest"
)

func TestNewRedisErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	locked := redistest.New(t, "--requirepass", "another")
	withPassword := "redis://:s3cret@" + locked.Addr()
	closed := "redis://:s3cret@" + closedAddr(t)
	for _, c := range []struct {
		name, url, want string
	}{
		{"not a URL", "redis://u:s3cret@127.0.0.1:port", "not a URL"},
		{"scheme", "http://u:s3cret@127.0.0.1:6379", "invalid URL scheme"},
		{"database", "redis://:s3cret@127.0.0.1:6379/x", "redis://:xxxxx@127.0.0.1:6379/x"},
		{"nobody listens", closed, "PING redis://:xxxxx@"},
		{"refused password", withPassword, "PING redis://:xxxxx@"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Nobody listening fails after the client's retries; the deadline cuts them short.
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			r, err := NewRedis(ctx, c.url, "test:", "a", zap.NewNop())
			if err == nil {
				r.Close()
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want %q in it and no password", err, c.want)
			}
		})
	}
}

// closedAddr is a loopback address nobody listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(t, err)
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestRedisKeysStayInTheirNamespace(t *testing.T) {
	t.Parallel()
	srv := newRedisServer(t)
	ctx := t.Context()
	one := start(t, newTestRedis(t, srv.url, "bot1:", "a"))
	two := start(t, newTestRedis(t, srv.url, "bot2:", "a"))
	for _, r := range []replica{one, two} {
		if !r.claim("event", time.Minute) {
			t.Fatalf("%s: the other namespace's claim counted", r.runner.(*Redis).ns)
		}
		check(t, r.Mark(ctx, "thread", time.Minute))
		r.add("quota", 1, time.Minute)
		r.take("posts", 60, 1)
		check(t, r.Pause(ctx, "posts", time.Now().Add(time.Second)))
		r.lease("thread")
		check(t, r.Open(ctx, testAnswer("C1/1")))
		check(t, r.Send(ctx, "a", []byte("x")))
	}
	keys, err := one.runner.(*Redis).c.Keys(ctx, "*").Result()
	check(t, err)
	for _, k := range keys {
		if !strings.HasPrefix(k, "bot1:") && !strings.HasPrefix(k, "bot2:") {
			t.Errorf("key %q outside the namespaces", k)
		}
	}
	if len(keys) != 2*10 { // alive, inbox, claim, mark, count, bucket, pause, lease, answer, answers
		t.Errorf("%d keys, want 10 a namespace: %v", len(keys), keys)
	}
}

func TestDeadReplicasInboxExpires(t *testing.T) {
	t.Parallel()
	srv := newRedisServer(t)
	ns := srv.namespace()
	a := start(t, newTestRedis(t, srv.url, ns, "a"))
	bs := newTestRedis(t, srv.url, ns, "b")
	b := startWith(t, bs, crashRun(bs))
	waitAlive(t, a, "b")
	check(t, a.Send(t.Context(), "b", []byte("click")))
	inbox := ns + "inbox:b"
	if !exists(t, bs, inbox) {
		t.Fatal("b's inbox is empty after a Send")
	}
	b.stop()
	waittest.Eventually(t, 3*testAliveTTL, "the crashed replica's inbox expires", func() bool {
		return !exists(t, bs, inbox)
	})
}

// TestTakeRefillsAtItsRate: two replicas taking from one bucket as fast as they can get its rate between them.
func TestTakeRefillsAtItsRate(t *testing.T) {
	t.Parallel()
	srv := newRedisServer(t)
	ns := srv.namespace()
	a := start(t, newTestRedis(t, srv.url, ns, "a"))
	b := start(t, newTestRedis(t, srv.url, ns, "b"))
	const perMinute = 1200 // one token every 50 ms
	began := time.Now()
	taken := 0
	for time.Since(began) < 500*time.Millisecond {
		for _, r := range []replica{a, b} {
			if r.take("fast", perMinute, 1) == 0 {
				taken++
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	// One for the first take and one every 50 ms at most; a slow machine may miss some, not get more.
	if most := 1 + int(time.Since(began)/(50*time.Millisecond)); taken < 3 || taken > most {
		t.Fatalf("took %d tokens at %d a minute, want from 3 to %d", taken, perMinute, most)
	}
}

// exists reports whether key is in r's server.
func exists(t *testing.T, r *Redis, key string) bool {
	t.Helper()
	n, err := r.c.Exists(t.Context(), key).Result()
	check(t, err)
	return n == 1
}
