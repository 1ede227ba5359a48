package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/internal/redistest"
)

// store is what the three stores have in common, each by its parts: the contract is written against it.
type store struct {
	runner
	keys
	answers
	inbox
	tallies tallies // a field: its Add is not Keys' Add
	rec     records // not embedded: Get is the journal's
}

// tallies is a store's Tallies.
type tallies interface {
	Add(ctx context.Context, ts ...Tally) error
	Get(ctx context.Context, group string, fields ...string) ([]int64, error)
	All(ctx context.Context, group string) (map[string]int64, error)
}

// runner is a store itself: it runs the replica, knows its leases and who is alive.
type runner interface {
	Self() string
	Run(ctx context.Context) error
	Close() error
	Lease(ctx context.Context, key string) (string, error)
	Holder(ctx context.Context, key string) (string, error)
	Release(ctx context.Context, key string) error
	Alive(ctx context.Context, replica string) (bool, error)
}

// keys is a store's Keys.
type keys interface {
	Claim(ctx context.Context, key string, ttl time.Duration) (bool, error)
	Mark(ctx context.Context, key string, ttl time.Duration) error
	Marked(ctx context.Context, key string) (bool, error)
	Add(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error)
	Take(ctx context.Context, name string, perMinute float64, burst int) (time.Duration, error)
	Pause(ctx context.Context, name string, until time.Time) error
}

// answers is a store's Answers.
type answers interface {
	Open(ctx context.Context, a Answer) error
	AddMessage(ctx context.Context, id, ts string) error
	CloseAnswer(ctx context.Context, id string) error
	Get(ctx context.Context, id string) (Answer, bool, error)
	Orphans(ctx context.Context) ([]Answer, error)
	Adopt(ctx context.Context, id string) (Answer, bool, error)
	Abandon(ctx context.Context, id string) error
	Fence(ctx context.Context, id string) (time.Time, error)
}

// records is a store's Records.
type records interface {
	Put(ctx context.Context, coll, id string, val []byte) error
	Get(ctx context.Context, coll, id string) ([]byte, bool, error)
	Delete(ctx context.Context, coll, id string) error
	List(ctx context.Context, coll string) (map[string][]byte, error)
}

// inbox is a store's Inbox.
type inbox interface {
	Send(ctx context.Context, replica string, msg []byte) error
	Receive(ctx context.Context) ([]byte, error)
}

// storeOf is s (a *Memory, *Redis or *Fallback) by its parts.
func storeOf(s runner) store {
	switch s := s.(type) {
	case *Memory:
		return store{s, s.Keys(), s.Answers(), s.Inbox(), s.Tallies(), s.Records()}
	case *Redis:
		return store{s, s.Keys(), s.Answers(), s.Inbox(), s.Tallies(), s.Records()}
	case *Fallback:
		return store{s, s.Keys(), s.Answers(), s.Inbox(), s.Tallies(), s.Records()}
	}
	panic(fmt.Sprintf("storeOf: %T is not a store", s))
}

// Liveness times of the Redis stores in tests: a crashed replica is dead within two seconds. The
// TTL is fifteen heartbeats: a live replica whose heartbeat goroutine a loaded machine holds back
// for a second must not pass for dead (a lease test then sees its lease taken).
const (
	testAliveTTL  = 1500 * time.Millisecond
	testHeartbeat = 100 * time.Millisecond
	testPollBlock = 100 * time.Millisecond
)

// newTestRedis connects a Redis store to url under ns with the tests' short liveness times.
func newTestRedis(t *testing.T, url, ns, self string) *Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	r, err := NewRedis(ctx, url, ns, self, zap.NewNop())
	if err != nil {
		t.Fatalf("NewRedis: %v", err)
	}
	r.aliveTTL, r.heartbeat, r.pollBlock = testAliveTTL, testHeartbeat, testPollBlock
	return r
}

// newTestMemory is NewMemory that fails t.
func newTestMemory(t *testing.T, self, dir string) *Memory {
	t.Helper()
	m, err := NewMemory(self, dir, zap.NewNop())
	if err != nil {
		t.Fatalf("NewMemory: %v", err)
	}
	return m
}

// replica is a store running: stop ends its Run (gracefully) and waits for it. Its lower-case methods are
// the store's, failing t on an error.
type replica struct {
	store
	t    *testing.T
	stop func()
}

func (r replica) claim(key string, ttl time.Duration) bool {
	r.t.Helper()
	first, err := r.Claim(r.t.Context(), key, ttl)
	check(r.t, err)
	return first
}

func (r replica) marked(key string) bool {
	r.t.Helper()
	ok, err := r.Marked(r.t.Context(), key)
	check(r.t, err)
	return ok
}

func (r replica) add(key string, delta int64, ttl time.Duration) int64 {
	r.t.Helper()
	n, err := r.Add(r.t.Context(), key, delta, ttl)
	check(r.t, err)
	return n
}

func (r replica) take(name string, perMinute float64, burst int) time.Duration {
	r.t.Helper()
	wait, err := r.Take(r.t.Context(), name, perMinute, burst)
	check(r.t, err)
	return wait
}

func (r replica) lease(key string) string {
	r.t.Helper()
	holder, err := r.Lease(r.t.Context(), key)
	check(r.t, err)
	return holder
}

func (r replica) alive(other string) bool {
	r.t.Helper()
	ok, err := r.Alive(r.t.Context(), other)
	check(r.t, err)
	return ok
}

func (r replica) get(id string) (Answer, bool) {
	r.t.Helper()
	a, ok, err := r.Get(r.t.Context(), id)
	check(r.t, err)
	return a, ok
}

func (r replica) orphans() []Answer {
	r.t.Helper()
	o, err := r.Orphans(r.t.Context())
	check(r.t, err)
	return o
}

// start runs s until stop or the end of t, and closes it at the end of t.
func start(t *testing.T, s runner) replica {
	return startWith(t, s, s.Run)
}

// startWith is start with run in place of s.Run (a replica that will crash).
func startWith(t *testing.T, s runner, run func(context.Context) error) replica {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1) // the one Run
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: Run: %v", s.Self(), err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%s: Run did not end within 5s of its ctx", s.Self())
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if err := s.Close(); err != nil {
			t.Errorf("%s: Close: %v", s.Self(), err)
		}
	})
	return replica{store: storeOf(s), t: t, stop: stop}
}

// check fails t on err.
func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// redisServer is one redis-server shared by the tests of a backend; each test has its own namespace.
type redisServer struct {
	url string
	n   atomic.Int64
}

func newRedisServer(t *testing.T) *redisServer {
	url, _ := redistest.Start(t)
	return &redisServer{url: url}
}

// namespace is a namespace no other test uses.
func (s *redisServer) namespace() string { return fmt.Sprintf("test:%d:", s.n.Add(1)) }

// isInvalid is whether err is a caller's mistake (errInvalid), as the contract wants for bad arguments.
func isInvalid(err error) bool { return errors.Is(err, errInvalid) }
