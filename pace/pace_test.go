package pace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// since returns the time since t0 in whole milliseconds (fake time inside synctest is exact).
func since(t0 time.Time) time.Duration { return time.Since(t0).Round(time.Millisecond) }

// every is a Scheduler's interval between grants at perMinute, in whole milliseconds.
func every(perMinute float64) time.Duration {
	return time.Duration(float64(time.Minute) / (perMinute * RateMargin)).Round(time.Millisecond)
}

func TestBucketBurstThenRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 3) // one a second, three at once
		t0 := time.Now()
		var got []time.Duration
		for range 6 {
			if err := b.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			got = append(got, since(t0))
		}
		want := []time.Duration{0, 0, 0, time.Second, 2 * time.Second, 3 * time.Second}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("grant times = %v, want %v", got, want)
		}
	})
}

func TestBucketWaitersServedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 1)
		t0 := time.Now()
		var mu sync.Mutex
		got := map[int]time.Duration{}
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				if err := b.Wait(t.Context()); err != nil {
					t.Error(err)
				}
				mu.Lock()
				got[i] = since(t0)
				mu.Unlock()
			})
			synctest.Wait() // arrival order 0, 1, 2, 3
		}
		wg.Wait()
		for i := range 4 {
			if want := time.Duration(i) * time.Second; got[i] != want {
				t.Errorf("waiter %d granted at %v, want %v", i, got[i], want)
			}
		}
	})
}

func TestBucketThrottledPausesAndLearns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 5)
		t0 := time.Now()
		b.Throttled(10 * time.Second)
		b.Throttled(10 * time.Second) // the same storm: counts once
		if got, want := b.Rate(), 48.0; math.Abs(got-want) > 1e-9 {
			t.Errorf("rate after one 429 = %v/min, want %v", got, want)
		}
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		// One write may go when the Retry-After has passed, the next at the lowered rate (1/0.8 s later).
		if got, want := since(t0), 10*time.Second; got != want {
			t.Errorf("first grant after 429 at %v, want %v", got, want)
		}
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got, want := since(t0), 10*time.Second+1250*time.Millisecond; got != want {
			t.Errorf("second grant after 429 at %v, want %v", got, want)
		}
		// The rate climbs back: 10% of the configured rate a minute, starting a minute after the cut.
		time.Sleep(time.Minute + 30*time.Second) // 1m41s after the cut
		if got := b.Rate(); got <= 48 || got >= 60 {
			t.Errorf("rate during recovery = %v/min, want between 48 and 60", got)
		}
		time.Sleep(5 * time.Minute)
		if got, want := b.Rate(), 60.0; got != want {
			t.Errorf("rate after recovery = %v/min, want %v", got, want)
		}
	})
}

func TestBucketPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 5)
		t0 := time.Now()
		before, err := b.WaitSlot(t.Context())
		if err != nil || before.Stale() {
			t.Fatalf("slot before the pause: stale %v, %v", before.Stale(), err)
		}
		b.Pause(t0.Add(3 * time.Second))
		b.Pause(t0.Add(time.Second)) // an earlier pause does not shorten it
		if !before.Stale() {
			t.Errorf("a slot taken before a pause is not stale")
		}
		after, err := b.WaitSlot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if after.Stale() {
			t.Errorf("the slot after the pause is stale")
		}
		if got, want := since(t0), 3*time.Second; got != want {
			t.Errorf("grant at %v, want after the pause at %v", got, want)
		}
		if got := b.Rate(); got != 60 {
			t.Errorf("rate after a plain pause = %v, want 60 (only Throttled learns)", got)
		}
	})
}

func TestBucketTryTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 2)
		got := []bool{b.TryTake(), b.TryTake(), b.TryTake()}
		time.Sleep(time.Second)
		got = append(got, b.TryTake())
		b.Throttled(5 * time.Second)
		got = append(got, b.TryTake())
		time.Sleep(5 * time.Second)
		got = append(got, b.TryTake())
		if want := "[true true false true false true]"; fmt.Sprint(got) != want {
			t.Errorf("TryTake = %v, want %s", got, want)
		}
	})
}

func TestBucketRateHasAFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 1)
		for range 20 {
			b.Throttled(time.Second)
			time.Sleep(2 * time.Second) // each 429 after the previous pause: a new storm
		}
		if got, want := b.Rate(), 60*minFraction; got != want {
			t.Errorf("rate after many 429s = %v/min, want the floor %v", got, want)
		}
	})
}

func TestBucketCancelReturnsReservation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 1)
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		cause := errors.New("gave up")
		ctx, cancel := context.WithCancelCause(t.Context())
		done := make(chan error)
		go func() { done <- b.Wait(ctx) }()
		time.Sleep(500 * time.Millisecond)
		cancel(cause)
		if err := <-done; !errors.Is(err, cause) {
			t.Errorf("Wait after cancel = %v, want the cause %v", err, cause)
		}
		// The cancelled reservation was returned: the next token is due at 1s, not 2s.
		t0 := time.Now()
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got, want := since(t0), 500*time.Millisecond; got != want {
			t.Errorf("next grant after %v, want %v", got, want)
		}
	})
}

func TestKeyedBucketsAreIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKeyed(60, 1)
		t0 := time.Now()
		for _, key := range []string{"C1", "C2", "C3"} {
			if err := k.Wait(t.Context(), key); err != nil {
				t.Fatal(err)
			}
		}
		if got := since(t0); got != 0 {
			t.Errorf("first post in three channels took %v, want 0", got)
		}
		c1, err := k.WaitSlot(t.Context(), "C1") // waits a second: C1's burst of 1 went above
		if err != nil {
			t.Fatal(err)
		}
		k.Throttled("C1", 5*time.Second)
		if !c1.Stale() {
			t.Errorf("C1's slot from before its 429 is not stale")
		}
		c2, err := k.WaitSlot(t.Context(), "C2")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := since(t0), time.Second; got != want {
			t.Errorf("C2 second post at %v, want %v (C1's 429 must not pause C2)", got, want)
		}
		if c2.Stale() {
			t.Errorf("C2's slot is stale after C1's 429")
		}
		if err := k.Wait(t.Context(), "C1"); err != nil {
			t.Fatal(err)
		}
		if got := since(t0); got < 5*time.Second {
			t.Errorf("C1 post at %v, want after its 5s Retry-After", got)
		}
	})
}

func TestKeyedForgetsIdleKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKeyed(60, 1)
		for i := range keyedSweepAt {
			if err := k.Wait(t.Context(), fmt.Sprint("C", i)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second) // every bucket is full again
		if err := k.Wait(t.Context(), "new"); err != nil {
			t.Fatal(err)
		}
		if got, want := k.Len(), 1; got != want {
			t.Errorf("keys after sweep = %d, want %d", got, want)
		}
	})
}

// streamLanes runs n lanes that always have pending text, for d, and returns the order of grants.
func streamLanes(t *testing.T, s *Scheduler, n int, d time.Duration) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		l := s.Lane()
		wg.Go(func() {
			defer l.Close()
			for {
				// Text keeps arriving: the oldest unshown text came right after the last write.
				if err := l.Wait(ctx, Pending, time.Now()); err != nil {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond) // the write
			}
		})
	}
	wg.Wait()
	return order
}

func TestSchedulerRoundRobinAcrossLanes(t *testing.T) {
	tests := []struct{ lanes, burst int }{{2, 1}, {5, 1}, {50, 1}, {5, 5}, {50, 5}}
	for _, tt := range tests {
		n := tt.lanes
		t.Run(fmt.Sprintf("lanes=%d,burst=%d", n, tt.burst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := NewScheduler(50, tt.burst)
				order := streamLanes(t, s, n, 10*time.Minute)
				// 10 min at the rate, plus what the burst held beyond the reserve at the start.
				want := int(500*RateMargin) + tt.burst - 1 - int(s.reserve)
				if got := len(order); got < want-1 || got > want+1 {
					t.Errorf("%d grants in 10 min at 50/min, want %d", got, want)
				}
				// Every window of n consecutive grants serves every lane once: equal, evenly spaced shares.
				for i := 0; i+n <= len(order); i += n {
					seen := map[int]bool{}
					for _, l := range order[i : i+n] {
						seen[l] = true
					}
					if len(seen) != n {
						t.Fatalf("grants %d..%d = %v: not a round robin", i, i+n-1, order[i:i+n])
					}
				}
				if got := s.Lanes(); got != 0 {
					t.Errorf("open lanes after Close = %d, want 0", got)
				}
			})
		})
	}
}

func TestSchedulerBurstThenRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(60, 5) // reserve 2
		l := s.Lane()
		t0 := time.Now()
		var got []time.Duration
		for range 5 {
			if err := l.Wait(t.Context(), Pending, time.Now()); err != nil {
				t.Fatal(err)
			}
			got = append(got, since(t0))
		}
		// Pending writes use the burst down to the reserve, then the rate.
		want := []time.Duration{0, 0, 0, every(60), 2 * every(60)}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("pending grant times = %v, want %v", got, want)
		}
		// The reserve: a reply's first text and another's final edit go at once.
		t1 := time.Now()
		for _, p := range []Priority{First, Final} {
			if err := s.Lane().Wait(t.Context(), p, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if got := since(t1); got != 0 {
			t.Errorf("first and final writes waited %v, want 0 (the reserve)", got)
		}
	})
}

func TestSchedulerPriorities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(60, 1)
		blocker := s.Lane()
		if err := blocker.Wait(t.Context(), Pending, time.Now()); err != nil { // empties the bucket
			t.Fatal(err)
		}
		t0 := time.Now()
		type req struct {
			name  string
			p     Priority
			since time.Time
		}
		reqs := []req{ // arrival order
			{"pending-new", Pending, t0},
			{"tidy", Tidy, t0},
			{"pending-old", Pending, t0.Add(-30 * time.Second)},
			{"first", First, t0},
			{"final", Final, t0},
		}
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for _, r := range reqs {
			l := s.Lane()
			wg.Go(func() {
				if err := l.Wait(t.Context(), r.p, r.since); err != nil {
					t.Error(err)
				}
				mu.Lock()
				order = append(order, r.name)
				mu.Unlock()
			})
			synctest.Wait()
		}
		wg.Wait()
		if got, want := fmt.Sprint(order), "[final first tidy pending-old pending-new]"; got != want {
			t.Errorf("grant order = %s, want %s", got, want)
		}
	})
}

func TestSchedulerThrottledPausesEveryone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(600, 10)
		t0 := time.Now()
		s.Throttled(7 * time.Second)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first time.Duration = -1
		for range 3 {
			l := s.Lane()
			wg.Go(func() {
				if err := l.Wait(t.Context(), Final, time.Now()); err != nil {
					t.Error(err)
				}
				mu.Lock()
				if first < 0 {
					first = since(t0)
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if first < 7*time.Second {
			t.Errorf("first grant at %v during a 7s Retry-After", first)
		}
		if got, want := s.Bucket().Rate(), 600*RateMargin*0.8; math.Abs(got-want) > 1e-9 {
			t.Errorf("rate after 429 = %v, want %v", got, want)
		}
	})
}

func TestSchedulerCancelledWaitLeavesNoWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(60, 1)
		hog := s.Lane()
		if err := hog.Wait(t.Context(), Pending, time.Now()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		done := make(chan error)
		l := s.Lane()
		go func() { done <- l.Wait(ctx, Final, time.Now()) }()
		synctest.Wait()
		if got := s.Waiting(); got != 1 {
			t.Fatalf("waiting = %d, want 1", got)
		}
		stop := errors.New("stop")
		cancel(stop)
		if err := <-done; !errors.Is(err, stop) {
			t.Errorf("Wait = %v, want cause %v", err, stop)
		}
		if got := s.Waiting(); got != 0 {
			t.Errorf("waiting after cancel = %d, want 0", got)
		}
		// The token the cancelled waiter would have had is still there for the next one, in one interval.
		t0 := time.Now()
		if err := hog.Wait(t.Context(), Pending, time.Now()); err != nil {
			t.Fatal(err)
		}
		if got, want := since(t0), every(60); got != want {
			t.Errorf("next grant after %v, want %v", got, want)
		}
		// An already-cancelled context returns at once without queueing.
		if err := l.Wait(ctx, Final, time.Now()); !errors.Is(err, stop) {
			t.Errorf("Wait on a done ctx = %v, want %v", err, stop)
		}
	})
}

func TestLaneClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(60, 1)
		l := s.Lane()
		if got := s.Lanes(); got != 1 {
			t.Errorf("lanes = %d, want 1", got)
		}
		l.Close()
		l.Close()
		if got := s.Lanes(); got != 0 {
			t.Errorf("lanes after Close = %d, want 0", got)
		}
		if err := l.Wait(t.Context(), Final, time.Now()); !errors.Is(err, ErrLaneClosed) {
			t.Errorf("Wait on closed lane = %v, want ErrLaneClosed", err)
		}
	})
}

func TestSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(60/RateMargin, 5) // 60 a minute once the margin is taken
		if got := s.Spacing(); got != 0 {
			t.Errorf("spacing with no lane = %v, want 0", got)
		}
		lanes := []*Lane{s.Lane(), s.Lane(), s.Lane()}
		if got, want := s.Spacing(), 3*time.Second; got.Round(time.Millisecond) != want {
			t.Errorf("spacing of 3 lanes at 60/min = %v, want %v", got, want)
		}
		s.Throttled(time.Second) // a 429 lowers the rate: replies wait longer
		if got := s.Spacing(); got <= 3*time.Second {
			t.Errorf("spacing after a 429 = %v, want above 3s", got)
		}
		for _, l := range lanes {
			l.Close()
		}
		if got := NewScheduler(60, 5, WithPolicy(PolicyEvery1s)); got.Lane() != nil && got.Spacing() != 0 {
			t.Errorf("spacing under a baseline = %v, want 0 (own clocks)", got.Spacing())
		}
	})
}

func TestPolicyEvery1sUsesOwnClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(1, 1, WithPolicy(PolicyEvery1s)) // the shared budget is ignored
		a, b := s.Lane(), s.Lane()
		t0 := time.Now()
		var got []time.Duration
		for range 3 {
			for _, l := range []*Lane{a, b} {
				if err := l.Wait(t.Context(), Pending, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			got = append(got, since(t0))
		}
		if want := []time.Duration{0, time.Second, 2 * time.Second}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("rounds at %v, want %v", got, want)
		}
		a.Throttled(5 * time.Second) // only a waits
		t1 := time.Now()
		if err := b.Wait(t.Context(), Pending, time.Now()); err != nil {
			t.Fatal(err)
		}
		if got, want := since(t1), time.Second; got != want {
			t.Errorf("b waited %v, want %v", got, want)
		}
		if err := a.Wait(t.Context(), Pending, time.Now()); err != nil {
			t.Fatal(err)
		}
		if got, want := since(t1), 5*time.Second; got != want {
			t.Errorf("a waited %v, want its Retry-After %v", got, want)
		}
	})
}

func TestPolicyEvery20Chunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(1, 1, WithPolicy(PolicyEvery20Chunks))
		l := s.Lane()
		t0 := time.Now()
		for range 10 {
			if err := l.Wait(t.Context(), Pending, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if got := since(t0); got != 0 {
			t.Errorf("10 writes took %v, want no wait", got)
		}
		publish := []bool{}
		for _, n := range []int{1, 19, 20, 21} {
			publish = append(publish, PolicyEvery20Chunks.Publish(n))
		}
		if got, want := fmt.Sprint(publish), "[false false true true]"; got != want {
			t.Errorf("Publish(1, 19, 20, 21) = %s, want %s", got, want)
		}
		if !PolicyFair.Publish(1) || !PolicyEvery1s.Publish(1) {
			t.Error("fair and every-1s must publish every chunk")
		}
	})
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    Policy
		wantErr bool
	}{
		{"", PolicyFair, false},
		{"fair", PolicyFair, false},
		{"every-1s", PolicyEvery1s, false},
		{"every-20-chunks", PolicyEvery20Chunks, false},
		{"fast", "", true},
	}
	for _, tt := range tests {
		got, err := ParsePolicy(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// BenchmarkSchedulerGrant measures the scheduler's own cost per grant, the bucket never running dry:
// one lane alone, and 200 lanes (goroutines) asking at once, so grants scan a full waiting list.
func BenchmarkSchedulerGrant(b *testing.B) {
	b.Run("lanes=1", func(b *testing.B) {
		s := NewScheduler(1e12, 1<<30)
		l := s.Lane()
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Wait(ctx, Pending, time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lanes=200", func(b *testing.B) {
		s := NewScheduler(1e12, 1<<30)
		ctx := context.Background()
		b.ReportAllocs()
		b.SetParallelism(100) // 2 cores x 100 = 200 goroutines
		b.RunParallel(func(pb *testing.PB) {
			l := s.Lane()
			for pb.Next() {
				if err := l.Wait(ctx, Pending, time.Time{}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkSchedulerGrantFromQueue measures one grant picked from 200 parked waiters (the scan, the
// removal and the wake-up), as under load when every reply in flight waits for the budget.
func BenchmarkSchedulerGrantFromQueue(b *testing.B) {
	s := NewScheduler(60, 1)
	t0 := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range 200 {
		s.waiters = append(s.waiters, &waiter{p: Pending, since: t0.Add(time.Duration(i)), seq: uint64(i), ready: make(chan struct{})})
	}
	b.ReportAllocs()
	i := 200
	for b.Loop() {
		s.b.mu.Lock()
		s.b.tokens = 1
		s.b.mu.Unlock()
		s.dispatchLocked() // grants exactly one
		i++
		s.waiters = append(s.waiters, &waiter{p: Pending, since: t0.Add(time.Duration(i)), seq: uint64(i), ready: make(chan struct{})})
	}
	if s.timer != nil {
		s.timer.Stop()
	}
}
