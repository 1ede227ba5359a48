package pace

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// served records when waits on a bucket got their token, counted from start.
type served struct {
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
}

func newServed() *served { return &served{start: time.Now()} }

// wait waits on b and records the time if it got a token.
func (s *served) wait(ctx context.Context, b *Bucket) error {
	err := b.Wait(ctx)
	if err == nil {
		s.mu.Lock()
		s.at = append(s.at, time.Since(s.start))
		s.mu.Unlock()
	}
	return err
}

// sorted returns the recorded times in order; call it once every wait has ended.
func (s *served) sorted() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	sort.Slice(s.at, func(i, j int) bool { return s.at[i] < s.at[j] })
	return s.at
}

// spentBucket is a bucket of one token a second, burst 1, whose token was just taken: the next is
// due in 1 s.
func spentBucket(t *testing.T) *Bucket {
	t.Helper()
	b := NewBucket(60, 1)
	if err := b.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}

// checkSpaced reports any two of at[from:] that are less than gap apart.
func checkSpaced(t *testing.T, at []time.Duration, from int, gap time.Duration) {
	t.Helper()
	for i := max(from, 1); i < len(at); i++ {
		if d := at[i] - at[i-1]; d < gap-time.Millisecond {
			t.Errorf("waits %d and %d got their tokens %v apart (%v), want at least %v", i-1, i, d, at, gap)
			return
		}
	}
}

// Waiters already queued when a 429 pauses the bucket resume one at a time at the (lowered) rate
// after the pause, not all at once when it ends: at once they would draw the 429s again (Slack
// has earned one token in the pause, not one per waiter).
func TestWaitersAfterAPauseResumeAtTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := spentBucket(t)
		s := newServed()
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := s.wait(t.Context(), b); err != nil {
					t.Error(err)
				}
			})
		}
		synctest.Wait() // all three queued, due at 1, 2 and 3 s
		time.Sleep(500 * time.Millisecond)
		b.Throttled(3 * time.Second) // a 429 at 0.5 s: paused until 3.5 s, rate cut to 0.8/s
		wg.Wait()

		done := s.sorted()
		if done[0] < 3500*time.Millisecond {
			t.Errorf("a waiter went at %v, inside the pause (until 3.5s)", done[0])
		}
		checkSpaced(t, done, 1, time.Duration(float64(time.Second)/cutFactor)) // the lowered rate
		t.Logf("waiters went at %v", done)
	})
}

// A waiter that gives up does not hand its place to a newcomer while others wait behind it: the
// newcomer would share the last waiter's slot, and both would go at once (with the look-ups' 5 s
// bound, many waiters give up at N=200, and each such pair drew a 429 from Slack).
func TestGivingUpNeverPutsTwoWaitersOnOneSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := spentBucket(t)
		s := newServed()
		var wg sync.WaitGroup
		wait := func(ctx context.Context) { _ = s.wait(ctx, b) }
		short, cancel := context.WithCancel(t.Context())
		defer cancel()
		time.AfterFunc(500*time.Millisecond, cancel)
		wg.Go(func() { wait(short) }) // due at 1 s, gives up at 0.5 s
		synctest.Wait()
		for range 2 { // due at 2 and 3 s
			wg.Go(func() { wait(t.Context()) })
			synctest.Wait()
		}
		time.Sleep(600 * time.Millisecond)
		wg.Go(func() { wait(t.Context()) }) // a newcomer after the first gave up
		wg.Wait()

		done := s.sorted()
		if len(done) != 3 {
			t.Fatalf("%d waits ended with a token, want 3", len(done))
		}
		checkSpaced(t, done, 1, time.Second) // the rate
		t.Logf("waiters went at %v", done)
	})
}

// A waiter that gives up with nobody behind it returns its token: the next one need not wait for it.
func TestGivingUpLastReturnsTheToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := spentBucket(t)
		short, cancel := context.WithCancel(t.Context())
		defer cancel()
		time.AfterFunc(300*time.Millisecond, cancel)
		if err := b.Wait(short); err == nil {
			t.Fatal("the short wait got a token")
		}
		start := time.Now()
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 700*time.Millisecond {
			t.Errorf("the next waiter waited %v, want 700ms (the token due at 1s)", d)
		}
	})
}

// A wait whose token would come after the deadline is refused at once and takes no place: the
// next waiter is not pushed back by it.
func TestWaitPastTheDeadlineIsRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := spentBucket(t)
		short, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := b.Wait(short); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 0 {
			t.Fatalf("a wait for a token due after its deadline: %v after %v, want DeadlineExceeded at once", err, time.Since(start))
		}
		if err := b.Wait(t.Context()); err != nil || time.Since(start) != time.Second {
			t.Errorf("the next waiter: %v after %v, want its token at 1s", err, time.Since(start))
		}
	})
}

// Under steady overload (five waiters a second, each waiting at most 5 s, for one token a second)
// the bucket keeps serving at its rate: the waiters that cannot be served in time are refused, and
// none of those served goes in the same instant as another.
func TestSteadyOverloadKeepsServingAtTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 5)
		s := newServed()
		var wg sync.WaitGroup
		for i := range 300 { // 60 s of arrivals, 5 a second
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				_ = s.wait(ctx, b)
			})
			if i%5 == 4 {
				time.Sleep(time.Second)
			}
		}
		wg.Wait()
		served := s.sorted()
		// 5 at once (the burst), then one a second for 60 s (+ the 5 s the last arrivals may wait).
		if len(served) < 60 {
			t.Errorf("%d of 300 waiters served in 65 s, want at least 60 (the rate)", len(served))
		}
		checkSpaced(t, served, 5, time.Second)
		t.Logf("%d of 300 served, the last at %v", len(served), served[len(served)-1])
	})
}

// A volley of 429s (answers to calls already in flight) gives the token at the end of the pause
// once: a waiter that queued between two of them keeps it, and the next one comes at the rate.
func TestVolleyOf429sGivesOneTokenAfterThePause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 1)
		s := newServed()
		var wg sync.WaitGroup
		b.Throttled(3 * time.Second)
		wg.Go(func() { _ = s.wait(t.Context(), b) })
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		b.Throttled(3 * time.Second) // one more 429 from a call sent before the first
		wg.Go(func() { _ = s.wait(t.Context(), b) })
		wg.Wait()
		done := s.sorted()
		if len(done) != 2 || done[0] < 3100*time.Millisecond {
			t.Fatalf("waits got their tokens at %v, want two, none inside the pause (until 3.1s)", done)
		}
		checkSpaced(t, done, 1, time.Duration(float64(time.Second)/cutFactor)) // the lowered rate
	})
}

// Waiters that give up from the last one back each return their token: the line shrinks from
// its end, and the next newcomer is due when the first of them would have been.
func TestGivingUpFromTheEndReturnsEveryToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := spentBucket(t)
		var wg sync.WaitGroup
		for _, after := range []time.Duration{300 * time.Millisecond, 200 * time.Millisecond} { // due at 1 s and 2 s
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			time.AfterFunc(after, cancel)
			wg.Go(func() {
				if err := b.Wait(ctx); err == nil {
					t.Error("a wait that gave up got a token")
				}
			})
			synctest.Wait()
		}
		wg.Wait() // the second gave up at 0.2 s, then the first at 0.3 s
		start := time.Now()
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 700*time.Millisecond || d > 701*time.Millisecond { // ns of float rounding
			t.Errorf("the next waiter waited %v, want 700ms (the token due at 1s)", d)
		}
	})
}
