package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/internal/waittest"
)

// hookLog records what a Fallback's hooks were told.
type hookLog struct {
	mu       sync.Mutex
	degraded []bool
	failed   []string
}

func (h *hookLog) hooks() FallbackHooks {
	return FallbackHooks{
		Degraded: func(d bool) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.degraded = append(h.degraded, d)
		},
		Failed: func(op string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.failed = append(h.failed, op)
		},
	}
}

func (h *hookLog) seen() ([]bool, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.degraded), slices.Clone(h.failed)
}

// observed is a Fallback with what it logged and told its hooks.
type observed struct {
	replica
	f     *Fallback
	hooks *hookLog
	logs  *observer.ObservedLogs
}

func newObserved(t *testing.T, url, ns, self string) observed {
	core, logs := observer.New(zapcore.DebugLevel)
	h := &hookLog{}
	f := NewFallback(newTestRedis(t, url, ns, self), newTestMemory(t, self, ""), zap.New(core), h.hooks())
	return observed{replica: start(t, f), f: f, hooks: h, logs: logs}
}

// secret is message text: it must never reach a log.
const secret = "the asker's secret words"

func TestFallbackServesThroughAnOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	a, b := newObserved(t, srv.URL(), "outage:", "a"), newObserved(t, srv.URL(), "outage:", "b")
	waitAlive(t, a.replica, "b")
	if !a.claim("before", time.Minute) || b.claim("before", time.Minute) {
		t.Fatal("the claim is not shared before the outage")
	}

	srv.Stop()
	opened := duringOutage(t, a, b)
	for _, o := range []observed{a, b} {
		degraded, failed := o.hooks.seen()
		if !slices.Equal(degraded, []bool{true}) || len(failed) == 0 {
			t.Errorf("%s: hooks told degraded %v, failed %v", o.Self(), degraded, failed)
		}
	}

	srv.Restart()
	waittest.Eventually(t, 4*probeEvery, "both back on Redis", func() bool { return !a.f.Degraded() && !b.f.Degraded() })
	afterOutage(t, a, b, opened)
	for _, o := range []observed{a, b} {
		if degraded, _ := o.hooks.seen(); !slices.Equal(degraded, []bool{true, false}) {
			t.Errorf("%s: hooks told degraded %v, want [true false]", o.Self(), degraded)
		}
		checkLogs(t, o)
	}
}

// duringOutage: every call works, from each replica's memory; it returns the id of an answer opened meanwhile.
func duringOutage(t *testing.T, a, b observed) string {
	ctx := t.Context()
	began := time.Now()
	if !a.claim("during", time.Minute) {
		t.Fatal("a's claim during the outage refused")
	}
	if took := time.Since(began); took > 2*callTimeout {
		t.Errorf("the first call of the outage took %v", took)
	}
	// One failed call alone (a blip) does not degrade; the second in a row does.
	if !a.claim("during, again", time.Minute) {
		t.Fatal("a's second claim during the outage refused")
	}
	if !a.f.Degraded() {
		t.Fatal("a not degraded with Redis down")
	}
	if a.claim("before", time.Minute) {
		t.Error("a forgot its claim from before the outage")
	}
	if !b.claim("during", time.Minute) {
		t.Error("b refused a claim only a made: a duplicate is better than silence")
	}
	if w := a.take("posts", 60, 1); w != 0 {
		t.Errorf("Take during the outage waits %v", w)
	}
	if ha, hb := a.lease("thread"), b.lease("thread"); ha != "a" || hb != "b" {
		t.Errorf("Lease during the outage: a got %q, b got %q; want each its own", ha, hb)
	}
	if err := a.Send(ctx, "b", []byte(secret)); !errors.Is(err, ErrNoReplica) {
		t.Errorf("Send to b during the outage: %v, want ErrNoReplica", err)
	}
	check(t, a.Send(ctx, "a", []byte(secret)))
	receive(t, a.replica, secret)
	opened := testAnswer("C1/outage")
	check(t, a.Open(ctx, opened))
	check(t, a.AddMessage(ctx, opened.ID, "1700000001.000100"))
	if _, ok := a.get(opened.ID); !ok {
		t.Fatal("the answer opened during the outage is not found")
	}
	return opened.ID
}

// afterOutage: the state is shared again, and the answer opened during the outage can still be closed.
func afterOutage(t *testing.T, a, b observed, opened string) {
	ctx := t.Context()
	waitAlive(t, a.replica, "b")
	if !a.claim("after", time.Minute) || b.claim("after", time.Minute) {
		t.Error("the claim is not shared after the outage")
	}
	check(t, a.Send(ctx, "b", []byte(secret)))
	receive(t, b.replica, secret)
	got, ok := a.get(opened)
	if !ok || !slices.Equal(got.Messages, []string{"1700000001.000100"}) {
		t.Fatalf("the answer opened during the outage after it = %+v, %v", got, ok)
	}
	if _, ok := b.get(opened); ok {
		t.Error("b sees the answer a opened in its memory during the outage")
	}
	// Opened again (a Regenerate), it goes to Redis, and the memory's copy goes.
	check(t, a.Open(ctx, testAnswer(opened)))
	if got, ok := b.get(opened); !ok || got.Owner != "a" || got.Messages != nil {
		t.Errorf("b.Get of the answer a opened again = %+v, %v", got, ok)
	}
	if _, ok, err := a.f.local.Answers().Get(ctx, opened); err != nil || ok {
		t.Errorf("the memory's copy after the answer was opened again: %v, %v", ok, err)
	}
	check(t, a.CloseAnswer(ctx, opened))
	for _, r := range []observed{a, b} {
		if _, ok := r.get(opened); ok {
			t.Errorf("%s: the answer is still there after CloseAnswer", r.Self())
		}
	}
}

// checkLogs: one warning for the outage, one line for the recovery, and no message text.
func checkLogs(t *testing.T, o observed) {
	t.Helper()
	warns := o.logs.FilterLevelExact(zapcore.WarnLevel).Len()
	infos := o.logs.FilterMessageSnippet("again").Len()
	if warns != 1 || infos != 1 {
		t.Errorf("%s: logged %d warnings and %d recoveries, want one of each", o.Self(), warns, infos)
	}
	for _, e := range o.logs.All() {
		if strings.Contains(fmt.Sprint(e.Message, e.ContextMap()), secret) {
			t.Errorf("%s: message text in the log: %v", o.Self(), e)
		}
	}
}

// receive wants msg as the next message of r, within a few seconds.
func receive(t *testing.T, r replica, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if got, err := r.Receive(ctx); err != nil || string(got) != msg {
		t.Fatalf("%s.Receive = %q, %v; want %q", r.Self(), got, err, msg)
	}
}

// TestFallbackTimesOutASlowRedis: a Redis that does not answer within the call timeout is as good as down.
func TestFallbackTimesOutASlowRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	a := newObserved(t, srv.URL(), "slow:", "a")
	admin := newTestRedis(t, srv.URL(), "slow:", "admin")
	t.Cleanup(func() { admin.Close() })
	a.claim("warm", time.Minute)
	const pause = 2 * time.Second
	check(t, admin.c.ClientPause(t.Context(), pause).Err())
	began := time.Now()
	if !a.claim("slow", time.Minute) {
		t.Fatal("claim refused while Redis is paused")
	}
	if took := time.Since(began); took > 2*callTimeout {
		t.Errorf("a call to a paused Redis took %v, want the call timeout %v", took, callTimeout)
	}
	if !a.claim("slow, again", time.Minute) {
		t.Fatal("second claim refused while Redis is paused")
	}
	if !a.f.Degraded() {
		t.Fatal("not degraded while Redis does not answer (two calls in a row)")
	}
	waittest.Eventually(t, pause+3*probeEvery, "back on Redis after its pause", func() bool { return !a.f.Degraded() })
}

// TestFallbackStartsWhileRedisIsDown: a replica that starts while Redis is down (OpenRedis, a
// failed Ping, Degrade) serves from its memory, and shares its state once Redis answers.
func TestFallbackStartsWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	srv.Stop()
	r, err := OpenRedis(srv.URL(), "late:", "a", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	r.aliveTTL, r.heartbeat, r.pollBlock = testAliveTTL, testHeartbeat, testPollBlock
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := r.Ping(ctx); err == nil {
		t.Fatal("Ping answered with Redis stopped")
	}
	h := &hookLog{}
	f := NewFallback(r, newTestMemory(t, "a", ""), zap.NewNop(), h.hooks())
	f.Degrade(errors.New("connection refused"))
	a := start(t, f)
	if !f.Degraded() || !a.claim("while down", time.Minute) {
		t.Fatal("a replica started without Redis does not serve from memory")
	}

	srv.Restart()
	waittest.Eventually(t, 4*probeEvery, "back on Redis", func() bool { return !f.Degraded() })
	other := start(t, newTestRedis(t, srv.URL(), "late:", "b"))
	if !a.claim("after", time.Minute) || other.claim("after", time.Minute) {
		t.Error("the claim is not shared once Redis answers")
	}
	if degraded, _ := h.seen(); !slices.Equal(degraded, []bool{true, false}) {
		t.Errorf("hooks told degraded %v, want [true false]", degraded)
	}
}

// TestFallbackClosesLateAfterAnOutage: an answer closed while Redis is down is closed in Redis
// once it answers again, so it never looks orphaned to the other replicas.
func TestFallbackClosesLateAfterAnOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := redistest.NewProxy(t, srv.Addr()) // a cut, not a restart: a restarted redistest server comes back empty
	a := newObserved(t, c.URL(), "late-close:", "a")
	other := start(t, newTestRedis(t, srv.URL(), "late-close:", "b"))
	ctx := t.Context()
	if err := a.f.Answers().Open(ctx, Answer{ID: "C1/1.000001", Channel: "C1", TS: "1.000001"}); err != nil {
		t.Fatal(err)
	}
	if _, open := other.get("C1/1.000001"); !open {
		t.Fatal("the answer is not open in Redis before the outage")
	}
	c.Cut()
	if err := a.f.Answers().CloseAnswer(ctx, "C1/1.000001"); err != nil {
		t.Fatal(err)
	}
	if _, open := other.get("C1/1.000001"); !open {
		t.Fatal("the close reached Redis through the cut")
	}
	c.Restore()
	waittest.Eventually(t, 4*probeEvery, "the close made in Redis", func() bool {
		_, open := other.get("C1/1.000001")
		return !a.f.Degraded() && !open
	})
}

// An answer whose open in Redis failed (a timeout, which may have run there all the same) is opened
// in the local store, and the copy that may have landed in Redis goes once Redis answers again: one
// answer never has two records, for two replicas to close.
func TestFallbackOpenThatFailedLeavesNoRedisCopy(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := redistest.NewProxy(t, srv.Addr())
	ns := "open-failed:"
	a := NewFallback(newTestRedis(t, c.URL(), ns, "a"), newTestMemory(t, "a", ""), nil, FallbackHooks{})
	a.probeEvery, a.timeout = 50*time.Millisecond, 100*time.Millisecond
	start(t, a)
	landed := newTestRedis(t, srv.URL(), ns, "a") // the failed call, as it ran in Redis after all
	t.Cleanup(func() { landed.Close() })
	b := start(t, newTestRedis(t, srv.URL(), ns, "b"))
	ctx := t.Context()
	want := Answer{ID: "C1/1.1", Channel: "C1", TS: "1.1"}

	c.Cut()
	check(t, landed.Answers().Open(ctx, want))
	check(t, a.Answers().Open(ctx, want))
	if _, local, err := a.local.Answers().Get(ctx, want.ID); err != nil || !local {
		t.Fatalf("the answer in the local store: %v, %v; want it there", local, err)
	}
	c.Restore()
	waittest.Eventually(t, 5*time.Second, "the copy in Redis removed", func() bool {
		_, open := b.get(want.ID)
		return !open
	})
	if _, local, err := a.local.Answers().Get(ctx, want.ID); err != nil || !local {
		t.Errorf("the answer in the local store once Redis is back: %v, %v; want it still open", local, err)
	}
}

// An answer handed over for adoption while Redis cannot be reached (its closing write waited for the
// fence through the outage, and was stopped) is handed over once Redis answers: not left to a live
// replica that will never close it.
func TestFallbackAbandonsLateAfterAnOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := redistest.NewProxy(t, srv.Addr())
	ns := "late-abandon:"
	a := NewFallback(newTestRedis(t, c.URL(), ns, "a"), newTestMemory(t, "a", ""), nil, FallbackHooks{})
	a.probeEvery, a.timeout = 50*time.Millisecond, 100*time.Millisecond
	start(t, a)
	b := start(t, newTestRedis(t, srv.URL(), ns, "b"))
	ctx := t.Context()
	check(t, a.Answers().Open(ctx, Answer{ID: "C1/1.1", Channel: "C1", TS: "1.1"}))
	c.Cut()
	check(t, a.Answers().Abandon(ctx, "C1/1.1"))
	c.Restore()
	waittest.Eventually(t, 5*time.Second, "the answer handed over in Redis", func() bool {
		o := b.orphans()
		return len(o) == 1 && o[0].ID == "C1/1.1" && o[0].Owner == ""
	})
}

// TestCloseAnswerLeavesAnotherOwnersRecord: a replica's close of an answer another replica owns
// now (it adopted it, or opened the same id again) leaves the record alone.
func TestCloseAnswerLeavesAnotherOwnersRecord(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	a := start(t, newTestRedis(t, srv.URL(), "owner:", "a"))
	b := start(t, newTestRedis(t, srv.URL(), "owner:", "b"))
	ctx := t.Context()
	if err := b.Open(ctx, Answer{ID: "C1/1.000002", Channel: "C1", TS: "1.000002"}); err != nil {
		t.Fatal(err)
	}
	if err := a.CloseAnswer(ctx, "C1/1.000002"); err != nil {
		t.Fatal(err)
	}
	if got, open := a.get("C1/1.000002"); !open || got.Owner != "b" {
		t.Errorf("after another replica's close: open %v, owner %q; want b's record kept", open, got.Owner)
	}
	if err := b.CloseAnswer(ctx, "C1/1.000002"); err != nil {
		t.Fatal(err)
	}
	if _, open := a.get("C1/1.000002"); open {
		t.Error("the owner's close left the record")
	}
}

// TestFallbackDeleteSaysRedisKeptTheRecord: a removal Redis did not make (paused) is an error, not
// a success hiding a record that comes back once Redis answers.
func TestFallbackDeleteSaysRedisKeptTheRecord(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	a := newObserved(t, srv.URL(), "delete:", "a")
	admin := newTestRedis(t, srv.URL(), "delete:", "admin")
	t.Cleanup(func() { admin.Close() })
	rec := a.f.Records()
	check(t, rec.Put(t.Context(), "grants", "g1", []byte("kept")))
	const pause = 2 * time.Second
	check(t, admin.c.ClientPause(t.Context(), pause).Err())
	if err := rec.Delete(t.Context(), "grants", "g1"); !errors.Is(err, ErrNotShared) {
		t.Errorf("a removal Redis did not make: %v, want ErrNotShared", err)
	}
	waittest.Eventually(t, pause+3*probeEvery, "back on Redis after its pause", func() bool {
		_ = a.claim("probe", time.Minute)
		return !a.f.Degraded()
	})
	if _, ok, err := rec.Get(t.Context(), "grants", "g1"); err != nil || !ok {
		t.Fatalf("the record Redis kept: %v, %v", ok, err)
	}
	check(t, rec.Delete(t.Context(), "grants", "g1"))
	if _, ok, _ := rec.Get(t.Context(), "grants", "g1"); ok {
		t.Error("removed with Redis back, still found")
	}
}
