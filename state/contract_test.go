package state

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/internal/waittest"
)

// sharing is what the replicas of one backend share with each other.
type sharing int

const (
	alone      sharing = iota // Memory: nobody but itself exists
	journaled                 // Memory with a directory: liveness and the journal of open answers
	everything                // Redis and Fallback
)

// world makes the replicas of one test, which share what their backend shares (a namespace, a directory).
type world struct {
	t    *testing.T
	make func(self string) runner
	// crash, where the backend has one, runs s as a replica that dies when ctx ends, without removing its
	// liveness (which then expires).
	crash func(s runner) func(context.Context) error
}

// replica makes replica self and runs it.
func (w world) replica(self string) replica { return start(w.t, w.make(self)) }

// backend is one kind of store under the contract.
type backend struct {
	name   string
	shares sharing
	// setup prepares the backend for its tests (a redis-server) and returns how each test gets its world.
	setup func(t *testing.T) func(t *testing.T) world
}

var backends = []backend{
	{name: "Memory", shares: alone, setup: func(*testing.T) func(*testing.T) world {
		return func(t *testing.T) world {
			return world{t: t, make: func(self string) runner { return newTestMemory(t, self, "") }}
		}
	}},
	{name: "MemoryDir", shares: journaled, setup: func(*testing.T) func(*testing.T) world {
		return func(t *testing.T) world {
			dir := t.TempDir()
			return world{t: t, make: func(self string) runner { return newTestMemory(t, self, dir) }}
		}
	}},
	{name: "Redis", shares: everything, setup: func(t *testing.T) func(*testing.T) world {
		srv := newRedisServer(t)
		return func(t *testing.T) world {
			ns := srv.namespace()
			return world{
				t:     t,
				make:  func(self string) runner { return newTestRedis(t, srv.url, ns, self) },
				crash: func(s runner) func(context.Context) error { return crashRun(s.(*Redis)) },
			}
		}
	}},
	{name: "Fallback", shares: everything, setup: func(t *testing.T) func(*testing.T) world {
		srv := newRedisServer(t)
		return func(t *testing.T) world {
			ns := srv.namespace()
			return world{
				t: t,
				make: func(self string) runner {
					// Redis is up throughout: a failed call would hide behind the local store.
					hooks := FallbackHooks{Failed: func(op string) { t.Errorf("%s: Redis call %s failed", self, op) }}
					return NewFallback(newTestRedis(t, srv.url, ns, self), newTestMemory(t, self, ""), zap.NewNop(), hooks)
				},
				crash: func(s runner) func(context.Context) error { return crashRun(s.(*Fallback).primary) },
			}
		}
	}},
}

// crashRun runs r's heartbeat and, when ctx ends, stops it as a crash would: the liveness key stays to expire.
func crashRun(r *Redis) func(context.Context) error {
	return func(ctx context.Context) error {
		r.run(ctx, false)
		return nil
	}
}

// contract is what every store does; a case runs on the backends that share at least what it needs.
var contract = []struct {
	name  string
	needs sharing
	run   func(t *testing.T, w world)
}{
	{"claim once within its ttl", alone, claimOnce},
	{"claim is shared", everything, claimShared},
	{"mark until its ttl", alone, markUntilTTL},
	{"add with the ttl of its creation", alone, addWithTTL},
	{"bad arguments are the caller's", alone, badArguments},
	{"take a burst then wait", alone, takeBurstThenWait},
	{"pause: the later wins", alone, pauseLaterWins},
	{"replicas share one bucket", everything, shareBucket},
	{"lease is self's", alone, leaseSelf},
	{"lease held by a live replica", everything, leaseHeld},
	{"lease of a crashed replica", everything, leaseCrashed},
	{"alive while running", journaled, aliveWhileRunning},
	{"journal open, add, get, close", alone, journalLifecycle},
	{"orphans adopted once", journaled, orphansAdoptedOnce},
	{"an abandoned answer is an orphan", alone, abandonedIsOrphan},
	{"send to self and receive", alone, sendToSelf},
	{"receive ends with its ctx", alone, receiveEnds},
	{"send between replicas", everything, sendBetween},
	{"tallies add, get and list", alone, talliesAddGet},
	{"tallies are shared", everything, talliesShared},
	{"records put, get, list, delete", alone, recordsLifecycle},
	{"records are shared", journaled, recordsShared},
	{"records are bounded", alone, recordsBounded},
}

func TestContract(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			newWorld := b.setup(t)
			for _, c := range contract {
				if b.shares < c.needs {
					continue // nothing to share: a single Memory has no other replica
				}
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newWorld(t))
				})
			}
		})
	}
}

func claimOnce(t *testing.T, w world) {
	a := w.replica("a")
	for _, c := range []struct {
		key  string
		want bool
	}{{"k", true}, {"k", false}, {"other", true}, {"other", false}} {
		if got := a.claim(c.key, time.Minute); got != c.want {
			t.Fatalf("Claim(%q) = %v, want %v", c.key, got, c.want)
		}
	}
	if !a.claim("short", 150*time.Millisecond) {
		t.Fatal("first Claim(short) = false")
	}
	waittest.Eventually(t, 2*time.Second, "Claim(short) true again after its ttl", func() bool {
		return a.claim("short", time.Minute)
	})
}

func claimShared(t *testing.T, w world) {
	a, b := w.replica("a"), w.replica("b")
	if !a.claim("event", time.Minute) {
		t.Fatal("a's first claim refused")
	}
	if b.claim("event", time.Minute) {
		t.Fatal("b claimed what a claimed")
	}
}

func markUntilTTL(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	if a.marked("thread") {
		t.Fatal("marked before Mark")
	}
	const ttl = 300 * time.Millisecond
	marked := time.Now()
	check(t, a.Mark(ctx, "thread", ttl))
	if !a.marked("thread") && time.Since(marked) < ttl {
		t.Fatal("not marked after Mark")
	}
	waittest.Eventually(t, 2*time.Second, "mark gone after its ttl", func() bool { return !a.marked("thread") })
}

func addWithTTL(t *testing.T, w world) {
	a := w.replica("a")
	const ttl = 300 * time.Millisecond
	var created time.Time // just after the counter's creation, so it has expired ttl after this
	for i, c := range []struct {
		delta, want int64
	}{{1, 1}, {2, 3}, {-1, 2}} {
		if got := a.add("quota", c.delta, ttl); got != c.want {
			t.Fatalf("Add(%d) = %d, want %d", c.delta, got, c.want)
		}
		if i == 0 {
			created = time.Now()
		}
	}
	// An Add halfway must not renew the TTL: the counter still ends ttl after its creation.
	time.Sleep(ttl / 2)
	if got := a.add("quota", 0, ttl); time.Since(created) < ttl && got != 2 {
		t.Fatalf("Add(0) halfway = %d, want 2", got)
	}
	time.Sleep(time.Until(created.Add(ttl + 100*time.Millisecond)))
	if got := a.add("quota", 1, ttl); got != 1 {
		t.Fatalf("Add(1) after the ttl of the counter's creation = %d, want 1 (a new counter)", got)
	}
}

func badArguments(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"claim ttl 0", func() error { _, err := a.Claim(ctx, "k", 0); return err }},
		{"mark ttl -1s", func() error { return a.Mark(ctx, "k", -time.Second) }},
		{"add ttl 0", func() error { _, err := a.Add(ctx, "k", 1, 0); return err }},
		{"take 0 a minute", func() error { _, err := a.Take(ctx, "b", 0, 1); return err }},
		{"take burst 0", func() error { _, err := a.Take(ctx, "b", 60, 0); return err }},
		{"open without id", func() error { return a.Open(ctx, Answer{}) }},
		{"message ts with a comma", func() error { return a.AddMessage(ctx, "C1/1", "1,2") }},
	} {
		if err := c.call(); !isInvalid(err) {
			t.Errorf("%s: err = %v, want errInvalid", c.name, err)
		}
	}
}

func takeBurstThenWait(t *testing.T, w world) {
	a := w.replica("a")
	for _, c := range []struct {
		perMinute float64
		burst     int
	}{{60, 1}, {600, 3}, {6000, 5}} {
		bucket := fmt.Sprintf("b%v", c.perMinute)
		began := time.Now()
		for i := range c.burst {
			if wait := a.take(bucket, c.perMinute, c.burst); wait != 0 {
				t.Fatalf("%s: take %d of a burst of %d waits %v", bucket, i+1, c.burst, wait)
			}
		}
		interval := time.Duration(float64(time.Minute) / c.perMinute)
		wait := a.take(bucket, c.perMinute, c.burst)
		// The next token comes one interval after the first take: a little less has to be waited.
		if low := interval - time.Since(began) - 5*time.Millisecond; wait <= 0 || wait > interval || wait < low {
			t.Fatalf("%s: wait after the burst = %v, want about %v (at least %v)", bucket, wait, interval, low)
		}
	}
}

func pauseLaterWins(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	// A pause of d made at paused leaves between d less the time since then and d.
	within := func(wait, d time.Duration, paused time.Time) bool {
		return wait <= d && wait >= d-time.Since(paused)-10*time.Millisecond
	}
	paused := time.Now()
	check(t, a.Pause(ctx, "b", paused.Add(2*time.Second)))
	check(t, a.Pause(ctx, "b", time.Now().Add(500*time.Millisecond))) // earlier: ignored
	check(t, a.Pause(ctx, "b", time.Now().Add(-time.Second)))         // past: ignored
	if wait := a.take("b", 6000, 10); !within(wait, 2*time.Second, paused) {
		t.Fatalf("Take during a 2 s pause waits %v", wait)
	}
	paused = time.Now()
	check(t, a.Pause(ctx, "b", paused.Add(3*time.Second))) // later: wins
	if wait := a.take("b", 6000, 10); !within(wait, 3*time.Second, paused) {
		t.Fatalf("Take after a later pause of 3 s waits %v", wait)
	}
	if wait := a.take("other", 6000, 10); wait != 0 {
		t.Fatalf("another bucket waits %v", wait)
	}
}

func shareBucket(t *testing.T, w world) {
	ctx := t.Context()
	a, b := w.replica("a"), w.replica("b")
	const burst = 4
	taken := 0
	for i := range 2 * burst {
		r := []replica{a, b}[i%2]
		if r.take("posts", 1, burst) == 0 {
			taken++
		}
	}
	if taken != burst {
		t.Fatalf("two replicas took %d tokens, want the burst of %d", taken, burst)
	}
	check(t, a.Pause(ctx, "shared-pause", time.Now().Add(time.Second)))
	if wait := b.take("shared-pause", 6000, 10); wait <= 0 {
		t.Fatal("a's pause did not stop b")
	}
}

func leaseSelf(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	holder := func() string {
		h, err := a.Holder(ctx, "thread")
		check(t, err)
		return h
	}
	if h := holder(); h != "" {
		t.Fatalf("Holder before any lease = %q, want none", h)
	}
	for range 2 {
		if h := a.lease("thread"); h != "a" {
			t.Fatalf("Lease = %q, want a", h)
		}
	}
	if h := holder(); h != "a" {
		t.Fatalf("Holder = %q, want a", h)
	}
	check(t, a.Release(ctx, "thread"))
	if h := holder(); h != "" {
		t.Fatalf("Holder after Release = %q, want none", h)
	}
	check(t, a.Release(ctx, "thread")) // idempotent
	if h := a.lease("thread"); h != "a" {
		t.Fatalf("Lease after Release = %q, want a", h)
	}
}

func leaseHeld(t *testing.T, w world) {
	ctx := t.Context()
	a, b := w.replica("a"), w.replica("b")
	// Each holds the lease in turn while the other asks: each must see the other alive first (a
	// replica's first heartbeat may land after the steps begin, and a holder not yet alive is free
	// to take over).
	waitAlive(t, b, "a")
	waitAlive(t, a, "b")
	steps := []struct {
		who       replica
		op        string // "lease", "holder" or "release"
		key, want string
	}{
		{a, "lease", "t1", "a"},
		{b, "lease", "t1", "a"}, // a is alive: refused
		{b, "holder", "t1", "a"},
		{b, "release", "t1", ""},
		{b, "lease", "t1", "a"}, // b's release was not a's
		{a, "release", "t1", ""},
		{b, "lease", "t1", "b"},
		{a, "lease", "t1", "b"},
		{a, "lease", "t2", "a"},
	}
	ops := map[string]func(r replica, key string) string{
		"lease": func(r replica, key string) string { return r.lease(key) },
		"holder": func(r replica, key string) string {
			h, err := r.Holder(ctx, key)
			check(t, err)
			return h
		},
		"release": func(r replica, key string) string { check(t, r.Release(ctx, key)); return "" },
	}
	for i, s := range steps {
		if h := ops[s.op](s.who, s.key); h != s.want {
			t.Fatalf("step %d: %s.%s(%s) = %q, want %q", i, s.who.Self(), s.op, s.key, h, s.want)
		}
	}
	a.stop() // a graceful exit frees a's leases at once
	if h := b.lease("t2"); h != "b" {
		t.Fatalf("Lease of a stopped replica's thread = %q, want b", h)
	}
}

func leaseCrashed(t *testing.T, w world) {
	as := w.make("a")
	a := startWith(t, as, w.crash(as))
	b := w.replica("b")
	waitAlive(t, b, "a")
	if h := a.lease("t"); h != "a" {
		t.Fatalf("a.Lease = %q", h)
	}
	stopped := time.Now()
	a.stop() // a crash: the heartbeat stops, the liveness stays until it expires
	// Its last heartbeat was at most one interval before: it is alive for a while yet.
	if h := b.lease("t"); h != "a" && time.Since(stopped) < testAliveTTL-2*testHeartbeat {
		t.Fatalf("b.Lease just after a's crash = %q, want a (still alive)", h)
	}
	began := time.Now()
	waittest.Eventually(t, 3*time.Second, "b takes the lease of crashed a", func() bool { return b.lease("t") == "b" })
	if took := time.Since(began); took > 2*testAliveTTL {
		t.Errorf("the lease took %v to free, want about the liveness TTL %v", took, testAliveTTL)
	}
}

// waitAlive waits until observer sees other alive (its Run has started).
func waitAlive(t *testing.T, observer replica, other string) {
	t.Helper()
	waittest.Eventually(t, 3*time.Second, observer.Self()+" sees "+other+" alive", func() bool {
		return observer.alive(other)
	})
}

func aliveWhileRunning(t *testing.T, w world) {
	a, b := w.replica("a"), w.replica("b")
	if !a.alive("a") {
		t.Fatal("not alive to itself")
	}
	if a.alive("nobody") {
		t.Fatal("an unknown replica is alive")
	}
	waitAlive(t, b, "a")
	a.stop()
	if b.alive("a") {
		t.Fatal("a alive after its Run ended")
	}
}

// testAnswer is an answer as a handler opens it.
func testAnswer(id string) Answer {
	return Answer{ID: id, Team: "T1", Channel: "C1", ThreadTS: "1700000000.000100", TS: "1700000000.000200",
		Asker: "U1", Mode: "edit", Started: time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.Local)}
}

// sameAnswer compares got with want but for Updated, which has to be recent.
func sameAnswer(t *testing.T, got, want Answer) {
	t.Helper()
	if time.Since(got.Updated) > time.Minute || got.Updated.Location() != time.UTC {
		t.Errorf("Updated = %v, want now in UTC", got.Updated)
	}
	want.Started = want.Started.UTC()
	got.Updated, want.Updated = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("answer\n got %+v\nwant %+v", got, want)
	}
}

func journalLifecycle(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	want := testAnswer("C1/1700000000.000200")
	check(t, a.Open(ctx, want))
	want.Owner = "a"
	got, ok := a.get(want.ID)
	if !ok {
		t.Fatal("Get after Open: not found")
	}
	sameAnswer(t, got, want)
	for _, ts := range []string{"1700000001.000100", "1700000002.000100", "1700000001.000100"} {
		check(t, a.AddMessage(ctx, want.ID, ts))
	}
	want.Messages = []string{"1700000001.000100", "1700000002.000100"}
	got, _ = a.get(want.ID)
	sameAnswer(t, got, want)
	if o := a.orphans(); len(o) != 0 {
		t.Fatalf("Orphans of a live replica's answers = %v", o)
	}
	if _, ok, err := a.Adopt(ctx, want.ID); err != nil || ok {
		t.Fatalf("Adopt of its own answer = %v, %v", ok, err)
	}
	check(t, a.CloseAnswer(ctx, want.ID))
	check(t, a.CloseAnswer(ctx, want.ID))
	check(t, a.AddMessage(ctx, want.ID, "1700000003.000100")) // closed: left alone
	if _, ok := a.get(want.ID); ok {
		t.Fatal("Get after CloseAnswer: found")
	}
	// Open again without a start time: it starts now.
	check(t, a.Open(ctx, Answer{ID: "C1/2", Messages: []string{}}))
	got, _ = a.get("C1/2")
	if time.Since(got.Started) > time.Minute || got.Messages != nil {
		t.Fatalf("reopened answer = %+v", got)
	}
}

func orphansAdoptedOnce(t *testing.T, w world) {
	ctx := t.Context()
	dead, b, c := w.replica("dead"), w.replica("b"), w.replica("c")
	lost := testAnswer("C1/1")
	check(t, dead.Open(ctx, lost))
	check(t, dead.AddMessage(ctx, lost.ID, "1700000001.000100"))
	check(t, b.Open(ctx, testAnswer("C1/2"))) // b's, alive: nobody's orphan
	waitAlive(t, c, "dead")
	waitAlive(t, c, "b")
	if o := c.orphans(); len(o) != 0 {
		t.Fatalf("orphans while their owners live: %v", o)
	}
	dead.stop()
	orphans := c.orphans()
	lost.Owner, lost.Messages = "dead", []string{"1700000001.000100"}
	if len(orphans) != 1 {
		t.Fatalf("orphans = %+v, want dead's answer", orphans)
	}
	sameAnswer(t, orphans[0], lost)
	if _, ok, err := c.Adopt(ctx, "C1/2"); err != nil || ok {
		t.Fatalf("Adopt of a live replica's answer = %v, %v", ok, err)
	}

	// b and c adopt at once: one wins.
	var wg sync.WaitGroup
	won := make([]bool, 2)
	for i, r := range []replica{b, c} {
		wg.Go(func() {
			a, ok, err := r.Adopt(ctx, lost.ID)
			if err != nil {
				t.Errorf("%s.Adopt: %v", r.Self(), err)
			}
			if ok && a.Owner != r.Self() {
				t.Errorf("%s adopted, owner %q", r.Self(), a.Owner)
			}
			won[i] = ok
		})
	}
	wg.Wait()
	if won[0] == won[1] {
		t.Fatalf("b won %v, c won %v: want exactly one", won[0], won[1])
	}
	winner := []replica{b, c}[slices.Index(won, true)]
	got, _ := b.get(lost.ID)
	lost.Owner = winner.Self()
	sameAnswer(t, got, lost)
	for _, r := range []replica{b, c} {
		if o := r.orphans(); len(o) != 0 {
			t.Fatalf("%s: orphans after the adoption = %+v", r.Self(), o)
		}
	}
	check(t, winner.CloseAnswer(ctx, lost.ID))
	if _, ok, err := c.Adopt(ctx, lost.ID); err != nil || ok {
		t.Fatalf("Adopt of a closed answer = %v, %v", ok, err)
	}
}

// An answer handed over for adoption (its closing write did not land, or its adopter's close failed
// for a while) is an orphan for every replica, the one that abandoned it included, until one adopts it.
func abandonedIsOrphan(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	open := testAnswer("C1/1")
	check(t, a.Open(ctx, open))
	check(t, a.Abandon(ctx, open.ID))
	check(t, a.Abandon(ctx, "C1/none")) // nothing open: nothing to do
	if o := a.orphans(); len(o) != 1 || o[0].ID != open.ID || o[0].Owner != "" {
		t.Fatalf("orphans after Abandon = %+v; want the answer, nobody's", o)
	}
	for range 2 { // adopted, handed back, adopted again
		if got, ok, err := a.Adopt(ctx, open.ID); err != nil || !ok || got.Owner != "a" {
			t.Fatalf("Adopt of an abandoned answer = %+v, %v, %v", got, ok, err)
		}
		if o := a.orphans(); len(o) != 0 {
			t.Fatalf("orphans once adopted = %+v", o)
		}
		check(t, a.Abandon(ctx, open.ID))
	}
}

func sendToSelf(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	for _, m := range []string{"one", "two"} {
		check(t, a.Send(ctx, "a", []byte(m)))
	}
	for _, want := range []string{"one", "two"} {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		got, err := a.Receive(rctx)
		cancel()
		if err != nil || string(got) != want {
			t.Fatalf("Receive = %q, %v; want %q", got, err, want)
		}
	}
	if err := a.Send(ctx, "nobody", []byte("x")); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("Send to nobody: %v, want ErrNoReplica", err)
	}
}

func receiveEnds(t *testing.T, w world) {
	a := w.replica("a")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	msg, err := a.Receive(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || msg != nil {
		t.Fatalf("Receive = %q, %v; want the ctx's error", msg, err)
	}
	if took := time.Since(began); took > 200*time.Millisecond+testPollBlock+500*time.Millisecond {
		t.Fatalf("Receive took %v to see its ctx end", took)
	}
}

func sendBetween(t *testing.T, w world) {
	ctx := t.Context()
	a, b := w.replica("a"), w.replica("b")
	waitAlive(t, a, "b")
	check(t, a.Send(ctx, "b", []byte("click")))
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if got, err := b.Receive(rctx); err != nil || string(got) != "click" {
		t.Fatalf("b.Receive = %q, %v", got, err)
	}
	b.stop()
	if err := a.Send(ctx, "b", []byte("late")); !errors.Is(err, ErrNoReplica) {
		t.Fatalf("Send to a stopped replica: %v, want ErrNoReplica", err)
	}
}
