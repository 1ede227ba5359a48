package pace

import (
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Waiters already queued when a 429 pauses the bucket resume one at a time at the (lowered) rate
// after the pause, not all at once when it ends: at once they would draw the 429s again (Slack
// has earned one token in the pause, not one per waiter).
func TestWaitersAfterAPauseResumeAtTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 1) // one a second, burst 1
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var mu sync.Mutex
		var done []time.Duration
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := b.Wait(t.Context()); err != nil {
					t.Error(err)
				}
				mu.Lock()
				done = append(done, time.Since(start))
				mu.Unlock()
			})
		}
		synctest.Wait() // all three queued, due at 1, 2 and 3 s
		time.Sleep(500 * time.Millisecond)
		b.Throttled(3 * time.Second) // a 429 at 0.5 s: paused until 3.5 s, rate cut to 0.8/s
		wg.Wait()

		sort.Slice(done, func(i, j int) bool { return done[i] < done[j] })
		if done[0] < 3500*time.Millisecond {
			t.Errorf("a waiter went at %v, inside the pause (until 3.5s)", done[0])
		}
		gap := time.Duration(float64(time.Second) / (cutFactor)) // the lowered rate
		for i := 1; i < len(done); i++ {
			if d := done[i] - done[i-1]; d < gap-time.Millisecond {
				t.Errorf("waiters went %v apart after the pause (%v), want at least %v (the lowered rate)", d, done, gap)
			}
		}
		t.Logf("waiters went at %v", done)
	})
}
