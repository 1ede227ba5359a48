package state

import (
	"errors"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/redistest"
)

// A claim another replica made in Redis (a hand-over's receipt, taken by its receiver) is seen by
// ClaimShared; while Redis cannot be reached, ClaimShared says Redis did not decide, where Claim
// answers from this process's memory as if the key were free.
func TestFallbackClaimSharedSaysWhenRedisDidNotDecide(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := redistest.NewProxy(t, srv.Addr())
	ns := "claim-shared:"
	a := NewFallback(newTestRedis(t, c.URL(), ns, "a"), newTestMemory(t, "a", ""), nil, FallbackHooks{})
	a.probeEvery, a.timeout = 50*time.Millisecond, 100*time.Millisecond
	start(t, a)
	b := newTestRedis(t, srv.URL(), ns, "b")
	t.Cleanup(func() { _ = b.Close() })
	ctx := t.Context()
	for _, key := range []string{"handover:1", "handover:2"} {
		if first, err := b.Keys().Claim(ctx, key, time.Minute); err != nil || !first {
			t.Fatalf("b's claim of %s: %v, %v", key, first, err)
		}
	}
	if first, err := a.Keys().ClaimShared(ctx, "handover:1", time.Minute); err != nil || first {
		t.Errorf("ClaimShared of a key b claimed: %v, %v; want taken", first, err)
	}
	if first, err := a.Keys().ClaimShared(ctx, "handover:3", time.Minute); err != nil || !first {
		t.Errorf("ClaimShared of a free key: %v, %v; want first", first, err)
	}

	c.Cut()
	if first, err := a.Keys().ClaimShared(ctx, "handover:2", time.Minute); !errors.Is(err, ErrNotShared) {
		t.Errorf("ClaimShared through the cut: %v, %v; want ErrNotShared", first, err)
	}
	if first, err := a.Keys().Claim(ctx, "handover:2", time.Minute); err != nil || !first {
		t.Errorf("Claim through the cut: %v, %v; want first, from this process's memory", first, err)
	}
	if first, err := a.Keys().ClaimShared(ctx, "handover:2", time.Minute); !errors.Is(err, ErrNotShared) {
		t.Errorf("ClaimShared while degraded: %v, %v; want ErrNotShared", first, err)
	}
}
