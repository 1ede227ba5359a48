package pace

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Progress writes leave one token per live claim (at most burst-1) for the ends; the ends, and first
// texts, take the tokens kept for them at once.
func TestWaitSpareLeavesTheClaimedTokens(t *testing.T) {
	cases := []struct {
		name          string
		burst, claims int
		progress      []time.Duration // when each of four progress writes goes, in a row
	}{
		{"no claims: the burst, then the rate", 3, 0, []time.Duration{0, 0, 0, time.Second}},
		{"two claims of a burst of 5: three at once", 5, 2, []time.Duration{0, 0, 0, time.Second}},
		{"claims beyond the burst keep burst-1", 3, 9, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBucket(60, c.burst)
				for range c.claims {
					b.Reserve()
				}
				t0 := time.Now()
				var got []time.Duration
				for range c.progress {
					if _, err := b.WaitSpare(t.Context()); err != nil {
						t.Fatal(err)
					}
					got = append(got, since(t0))
				}
				if fmt.Sprint(got) != fmt.Sprint(c.progress) {
					t.Errorf("progress writes at %v, want %v", got, c.progress)
				}
			})
		})
	}
}

// Five answers in a channel whose budget is one post a second and a burst of 5: however much the
// answers' progress asks for meanwhile, the five ends that come together go at once.
func TestEndsOfLiveAnswersPostAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKeyed(60, 5)
		var claims []*Reservation
		for range 5 {
			claims = append(claims, k.Reserve("C1"))
		}
		// Progress that would spend every token: it gets one at a time, the four claimed stay.
		ctx, cancel := context.WithTimeout(t.Context(), 9500*time.Millisecond)
		progress := 0
		for {
			if _, err := k.WaitSpare(ctx, "C1"); err != nil {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatal(err)
				}
				break
			}
			progress++
		}
		cancel()
		if progress != 10 { // the one spare token at once, then one a second
			t.Errorf("progress writes in 9.5 s = %d, want 10", progress)
		}
		t0 := time.Now()
		for i, r := range claims {
			if err := k.Wait(t.Context(), "C1"); err != nil {
				t.Fatal(err)
			}
			r.Release()
			// The fifth end waits for the next token (half a second: progress took the last one
			// at 9 s): a fifth kept token would leave progress no burst at all.
			want := time.Duration(0)
			if i == 4 {
				want = 500 * time.Millisecond
			}
			if got := since(t0); got != want {
				t.Errorf("end %d posted after %v, want %v", i+1, got, want)
			}
		}
	})
}

// A released claim leaves its token to progress; releasing twice releases once.
func TestReservationRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 2)
		r1, r2 := b.Reserve(), b.Reserve()
		r1.Release()
		r1.Release()
		var nilClaim *Reservation
		nilClaim.Release()
		if _, err := b.WaitSpare(t.Context()); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if _, err := b.WaitSpare(t.Context()); err != nil { // r2 keeps the second token
			t.Fatal(err)
		}
		if got := since(t0); got != time.Second {
			t.Errorf("second progress write after %v, want 1s (one token kept for r2)", got)
		}
		r2.Release()
		if _, err := b.WaitSpare(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := since(t0); got != time.Second {
			t.Errorf("third progress write after %v, want 1s at once (the token kept for r2 is free)", got)
		}
	})
}

// A progress write holds no place in line: one queued first goes first, and one that gives up
// leaves the bucket as it was.
func TestWaitSpareYieldsToTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(60, 1)
		if err := b.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := b.WaitSpare(t.Context()); err != nil {
				t.Error(err)
			}
			mu.Lock()
			order = append(order, "progress")
			mu.Unlock()
		}()
		synctest.Wait()
		if err := b.Wait(t.Context()); err != nil { // an end, queued after the progress write
			t.Fatal(err)
		}
		mu.Lock()
		order = append(order, "end")
		mu.Unlock()
		<-done
		if fmt.Sprint(order) != "[end progress]" {
			t.Errorf("order %v, want the end first", order)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		if _, err := b.WaitSpare(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitSpare past its deadline = %v, want deadline exceeded", err)
		}
	})
}

// A claimed bucket is kept when idle keys are dropped: a new one would not know the claim.
func TestKeyedKeepsClaimedKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := NewKeyed(60, 2)
		r := k.Reserve("claimed")
		for i := range keyedSweepAt {
			if err := k.Wait(t.Context(), fmt.Sprint("C", i)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3 * time.Second)
		if err := k.Wait(t.Context(), "new"); err != nil {
			t.Fatal(err)
		}
		if got, want := k.Len(), 2; got != want {
			t.Errorf("keys after sweep = %d, want %d (new and claimed)", got, want)
		}
		r.Release()
	})
}

// Try grants at once when a token is free for its priority, never waits, and leaves no waiter.
func TestLaneTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewScheduler(60, 3) // reserve 1: pending leaves one token for first and final
		l := s.Lane()
		defer l.Close()
		now := time.Now()
		got := []bool{l.Try(Pending, now), l.Try(Pending, now), l.Try(Pending, now), l.Try(Final, now), l.Try(Final, now)}
		if want := "[true true false true false]"; fmt.Sprint(got) != want {
			t.Errorf("tries = %v, want %v", got, want)
		}
		if n := s.Waiting(); n != 0 {
			t.Errorf("%d waiters left by Try", n)
		}
		if since(now) != 0 {
			t.Errorf("Try waited %v", since(now))
		}
		l.Close()
		if l.Try(Final, now) {
			t.Error("Try on a closed lane granted")
		}
		b := NewScheduler(60, 3, WithPolicy(PolicyEvery1s)).Lane()
		if b.Try(Final, now) {
			t.Error("Try under a baseline policy granted")
		}
	})
}
