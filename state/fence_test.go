package state

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/internal/waittest"
)

// A replica cut off from Redis stops writing its answers once its liveness is half the TTL old
// (Fence waits), before any other replica can take it for dead; once back, it writes again only
// the answers still its own: one another replica adopted meanwhile is ErrFenced. An answer opened
// while cut off (in its local store, which nobody else sees) is never held back.
func TestFenceHoldsACutOffReplicasWrites(t *testing.T) {
	srv := redistest.New(t)
	url := srv.URL()
	c := redistest.NewProxy(t, srv.Addr())
	ns := "fence:"
	a := NewFallback(newTestRedis(t, c.URL(), ns, "a"), newTestMemory(t, "a", ""), nil, FallbackHooks{})
	a.probeEvery, a.timeout = 50*time.Millisecond, 100*time.Millisecond
	start(t, a)
	b := start(t, newTestRedis(t, url, ns, "b"))
	ctx := t.Context()
	for _, id := range []string{"adopted", "kept"} {
		check(t, a.Answers().Open(ctx, Answer{ID: id, Channel: "C1", TS: "1.1"}))
	}
	waittest.Eventually(t, 5*time.Second, "a's first heartbeat", func() bool { return a.primary.fresh() })
	fenceWithin := func(id string, d time.Duration) error {
		fctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, err := a.Answers().Fence(fctx, id)
		return err
	}
	if err := fenceWithin("kept", 50*time.Millisecond); err != nil {
		t.Fatalf("Fence of a live replica: %v; want nil at once", err)
	}

	c.Cut()
	cutAt := time.Now()
	waittest.Eventually(t, 5*time.Second, "a degraded", a.Degraded)
	check(t, a.Answers().Open(ctx, Answer{ID: "local", Channel: "C1", TS: "1.2"}))
	if err := fenceWithin("local", 50*time.Millisecond); err != nil {
		t.Errorf("Fence of an answer opened while cut off: %v; want nil at once", err)
	}
	time.Sleep(time.Until(cutAt.Add(testAliveTTL / 2)))
	if err := fenceWithin("kept", 100*time.Millisecond); !errors.Is(err, ErrNotRenewed) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fence half a TTL after the cut: %v; want it to wait, then ErrNotRenewed (nothing was written)", err)
	}
	waittest.Eventually(t, 5*time.Second, "b sees a's answers orphaned", func() bool {
		return slices.ContainsFunc(b.orphans(), func(o Answer) bool { return o.ID == "adopted" })
	})
	if _, ok, err := b.Adopt(ctx, "adopted"); err != nil || !ok {
		t.Fatalf("b adopts: %v, %v", ok, err)
	}

	c.Restore()
	if err := fenceWithin("adopted", 5*time.Second); !errors.Is(err, ErrFenced) {
		t.Errorf("Fence of the answer b adopted, once a is back: %v; want ErrFenced", err)
	}
	if err := fenceWithin("kept", 5*time.Second); err != nil {
		t.Errorf("Fence of an answer still a's, once a is back: %v; want nil", err)
	}
}

// After a lapse of its liveness, a replica checks each of its answers once, and then writes them as
// before: an answer it has closed itself (its cleanup writes go on after the close), an answer whose
// record Redis lost (opened again, so that it stays recoverable) and an answer still its own are never
// fenced; only one adopted by another replica is, also once that replica has closed its record.
func TestFenceAfterALapse(t *testing.T) {
	srv := redistest.New(t)
	ns := "lapse:"
	ra := newTestRedis(t, srv.URL(), ns, "a")
	a := NewFallback(ra, newTestMemory(t, "a", ""), nil, FallbackHooks{})
	start(t, a)
	b := start(t, newTestRedis(t, srv.URL(), ns, "b"))
	ctx := t.Context()
	ids := []string{"closed", "lost", "kept", "adopted", "adopted-closed"}
	for _, id := range ids {
		check(t, a.Answers().Open(ctx, Answer{ID: id, Channel: "C1", TS: "1.1"}))
	}
	waittest.Eventually(t, 5*time.Second, "a's first heartbeat", ra.fresh)

	// a's liveness key goes (evicted, or lost in a failover): to b, a is dead, and a's clock says nothing.
	// a's next heartbeat puts it back; b adopts in between.
	for _, id := range []string{"adopted", "adopted-closed"} {
		waittest.Eventually(t, 5*time.Second, "b adopts "+id, func() bool {
			check(t, ra.c.Del(ctx, ra.key("alive:", "a")).Err())
			_, ok, err := b.Adopt(ctx, id)
			check(t, err)
			return ok
		})
	}
	check(t, b.CloseAnswer(ctx, "adopted-closed"))
	check(t, ra.c.Del(ctx, ra.key("answer:", "lost")).Err())
	waittest.Eventually(t, 5*time.Second, "a sees the lapse", func() bool { return !ra.book.quiet() })
	check(t, a.Answers().CloseAnswer(ctx, "closed"))

	for _, tc := range []struct {
		id   string
		want error
	}{
		{id: "closed", want: nil},
		{id: "lost", want: nil},
		{id: "kept", want: nil},
		{id: "adopted", want: ErrFenced},
		{id: "adopted-closed", want: ErrFenced},
	} {
		for range 2 { // the second time from what the first learned
			fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := a.Answers().Fence(fctx, tc.id)
			cancel()
			if !errors.Is(err, tc.want) {
				t.Errorf("Fence(%s) after the lapse: %v; want %v", tc.id, err, tc.want)
			}
		}
	}
	if rec, ok := b.get("lost"); !ok || rec.Owner != "a" || rec.Channel != "C1" {
		t.Errorf("the record Redis lost, after a's next write: %+v, %v; want it open again, a's", rec, ok)
	}
	for _, id := range []string{"adopted", "adopted-closed"} {
		check(t, a.Answers().CloseAnswer(ctx, id)) // a's own close when its answer ends: b's record stays b's
	}
	if !ra.book.quiet() {
		t.Error("every answer checked and the adopted ones ended: want the fast path back")
	}
}

// A heartbeat marks a lapse when the liveness key may have expired since the previous one: it was
// gone, or this beat may have landed more than the TTL after the previous one began.
func TestBeatAtMarksLapses(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ttl := testAliveTTL
	for _, tc := range []struct {
		name       string
		prev       time.Time // zero: the first beat
		start, end time.Time
		missing    bool
		wantLapse  bool
	}{
		{name: "in time", prev: t0, start: t0.Add(ttl / 2), end: t0.Add(ttl/2 + time.Millisecond)},
		{name: "begun in time, landed late", prev: t0, start: t0.Add(ttl - time.Millisecond), end: t0.Add(ttl + time.Millisecond), wantLapse: true},
		{name: "begun late", prev: t0, start: t0.Add(ttl + time.Millisecond), end: t0.Add(ttl + 2*time.Millisecond), wantLapse: true},
		{name: "key gone", prev: t0, start: t0.Add(time.Millisecond), end: t0.Add(2 * time.Millisecond), missing: true, wantLapse: true},
		{name: "first beat", start: t0, end: t0.Add(time.Millisecond), missing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Redis{aliveTTL: ttl}
			if !tc.prev.IsZero() {
				r.beaten.Store(tc.prev.UnixNano())
			}
			r.book.opened(Answer{ID: "x"})
			r.beatAt(tc.start, tc.end, tc.missing)
			if lapsed := !r.book.quiet(); lapsed != tc.wantLapse {
				t.Errorf("lapse recorded: %v; want %v", lapsed, tc.wantLapse)
			}
			if got := time.Unix(0, r.beaten.Load()); !got.Equal(tc.start) {
				t.Errorf("beat recorded at %v; want its start %v", got, tc.start)
			}
		})
	}
}

// Fence gives each write the moment its liveness stops being fresh as its deadline (half the TTL
// after the last heartbeat began); a Memory's never waits and gives none.
func TestFenceDeadlines(t *testing.T) {
	srv := redistest.New(t)
	r := newTestRedis(t, srv.URL(), "deadline:", "a")
	start(t, r)
	ctx := t.Context()
	check(t, r.Answers().Open(ctx, Answer{ID: "x", Channel: "C1", TS: "1.1"}))
	waittest.Eventually(t, 5*time.Second, "a's first heartbeat", r.fresh)
	until, err := r.Answers().Fence(ctx, "x")
	if err != nil || !until.Equal(r.freshUntil()) && !until.Before(r.freshUntil()) || !until.After(time.Now()) ||
		until.After(time.Now().Add(testAliveTTL/2)) {
		t.Errorf("Redis.Fence: %v, %v; want a deadline within half the TTL from now", until, err)
	}
	m := newTestMemory(t, "m", "")
	fctx, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if until, err := m.Answers().Fence(fctx, "x"); err != nil || !until.IsZero() {
		t.Errorf("Memory.Fence: %v, %v; want no deadline, nil", until, err)
	}
}
