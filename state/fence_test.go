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
		check(t, a.Open(ctx, Answer{ID: id, Channel: "C1", TS: "1.1"}))
	}
	waittest.Eventually(t, 5*time.Second, "a's first heartbeat", func() bool { return a.primary.fresh() })
	fenceWithin := func(id string, d time.Duration) error {
		fctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return a.Fence(fctx, id)
	}
	if err := fenceWithin("kept", 50*time.Millisecond); err != nil {
		t.Fatalf("Fence of a live replica: %v; want nil at once", err)
	}

	c.Cut()
	cutAt := time.Now()
	waittest.Eventually(t, 5*time.Second, "a degraded", a.Degraded)
	check(t, a.Open(ctx, Answer{ID: "local", Channel: "C1", TS: "1.2"}))
	if err := fenceWithin("local", 50*time.Millisecond); err != nil {
		t.Errorf("Fence of an answer opened while cut off: %v; want nil at once", err)
	}
	time.Sleep(time.Until(cutAt.Add(testAliveTTL / 2)))
	if err := fenceWithin("kept", 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fence half a TTL after the cut: %v; want it to wait", err)
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
