package pace

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// gcra is a hand-written shared bucket (what the state package keeps in Redis), on this
// process's clock.
type gcra struct {
	mu     sync.Mutex
	tat    map[string]time.Time // theoretical arrival time of the next token, per bucket
	paused map[string]time.Time
	takes  int
	pauses int
}

func newGCRA() *gcra { return &gcra{tat: map[string]time.Time{}, paused: map[string]time.Time{}} }

func (g *gcra) Take(_ context.Context, name string, perMinute float64, burst int) (time.Duration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	if p := g.paused[name].Sub(now); p > 0 {
		return p, nil
	}
	every := time.Duration(float64(time.Minute) / perMinute)
	tat := g.tat[name]
	if tat.Before(now) {
		tat = now
	}
	if early := tat.Sub(now) - every*time.Duration(burst-1); early > 0 {
		return early, nil
	}
	g.tat[name] = tat.Add(every)
	g.takes++
	return 0, nil
}

func (g *gcra) Pause(_ context.Context, name string, until time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pauses++
	if until.After(g.paused[name]) {
		g.paused[name] = until
	}
	return nil
}

// TestSharedBucketHoldsReplicasToOneRate: two processes' buckets of 60 a minute (burst 3) that
// share one bucket make 3 + 60 writes in a minute together, not twice that; alone, one makes
// them all.
func TestSharedBucketHoldsReplicasToOneRate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		want     int
	}{
		{"one replica", 1, 63},
		{"two replicas", 2, 63},
		{"three replicas", 3, 63},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newGCRA()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Millisecond)
				defer cancel()
				var wg sync.WaitGroup
				var mu sync.Mutex
				writes := 0
				for range tc.replicas {
					b := NewBucket(60, 3)
					b.Share(g, "update")
					for range 4 { // writers in each replica
						wg.Go(func() {
							for b.Wait(ctx) == nil {
								mu.Lock()
								writes++
								mu.Unlock()
							}
						})
					}
				}
				wg.Wait()
				if writes != tc.want || g.takes != tc.want {
					t.Errorf("writes %d, shared takes %d in a minute; want %d", writes, g.takes, tc.want)
				}
			})
		})
	}
}

// TestSharedSchedulerHoldsReplicasToOneRate: the fair scheduler's grants go through the shared
// bucket too.
func TestSharedSchedulerHoldsReplicasToOneRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGCRA()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Millisecond)
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex
		writes := 0
		for range 2 {
			s := NewScheduler(50, 5)
			s.Bucket().Share(g, "update")
			for range 5 {
				lane := s.Lane()
				wg.Go(func() {
					defer lane.Close()
					for lane.Wait(ctx, Pending, time.Time{}) == nil {
						mu.Lock()
						writes++
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		// 50 a minute at RateMargin, plus the burst.
		if want := 5 + 48; writes < want-1 || writes > want+1 { // 50 × RateMargin = 48.5
			t.Errorf("writes %d in a minute; want %d", writes, want)
		}
	})
}

// TestSharedThrottledPausesEveryReplica: a 429 seen by one process pauses the shared bucket, so
// the other process waits it out too.
func TestSharedThrottledPausesEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGCRA()
		a, b := NewBucket(60, 3), NewBucket(60, 3)
		a.Share(g, "update")
		b.Share(g, "update")
		a.Throttled(10 * time.Second)
		start := time.Now()
		if err := b.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < 10*time.Second {
			t.Errorf("the other replica wrote after %v; want the 10 s pause", waited)
		}
	})
}

// TestSharedTryTake: a stream start takes a shared token only when one is there now; when not, it
// takes none locally either.
func TestSharedTryTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGCRA()
		a, b := NewBucket(20, 1), NewBucket(20, 1)
		a.Share(g, "streams")
		b.Share(g, "streams")
		if !a.TryTake() {
			t.Fatal("first TryTake refused")
		}
		if b.TryTake() {
			t.Fatal("the other replica took a second token of a burst of 1")
		}
		time.Sleep(3 * time.Second) // one token a 3 s
		if !b.TryTake() {
			t.Fatal("TryTake refused after the shared token came")
		}
	})
}

// TestSharedWaitIsNoPause: waiting for the shared bucket is not a 429: a slot handed out before it
// stays fresh, and a real 429 afterwards still lowers the rate.
func TestSharedWaitIsNoPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGCRA()
		a, b := NewBucket(60, 2), NewBucket(60, 2)
		a.Share(g, "update")
		b.Share(g, "update")
		ctx := context.Background()
		slot, err := a.WaitSlot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(ctx); err != nil { // the shared burst is used up
			t.Fatal(err)
		}
		start := time.Now()
		if err := a.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < time.Second {
			t.Errorf("waited %v for the shared bucket; want its next token, a second later", waited)
		}
		if slot.Stale() {
			t.Error("a slot handed out before the shared wait is stale; want fresh: there was no 429")
		}
		a.Throttled(time.Second)
		if r := a.Rate(); r >= 60 {
			t.Errorf("rate %v after a 429; want it lowered", r)
		}
	})
}
