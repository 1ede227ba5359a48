package pace

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Priority orders the replies waiting for a write slot. Higher goes first.
type Priority int

// The priorities, lowest first.
const (
	// Pending: a streaming reply with text not yet shown; among these, the oldest pending text goes first
	// (max lag first), which makes the grants a round robin: every reply gets an equal, evenly spaced share.
	Pending Priority = iota
	// Tidy: a write that shows no new text (a finished part losing its Stop button). It goes after
	// every first and final text, but before pending text: starved behind streaming replies, it would
	// hold its finished reply open under sustained load.
	Tidy
	// First: a reply's first visible text (the placeholder is all the user sees so far).
	First
	// Final: the last write of a reply part (full text, status note). Final writes go before everything.
	Final
)

// String returns "pending", "tidy", "first" or "final" (for logs).
func (p Priority) String() string {
	switch p {
	case Pending:
		return "pending"
	case Tidy:
		return "tidy"
	case First:
		return "first"
	case Final:
		return "final"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// Scheduler grants write slots from one Bucket to the replies in flight (one Lane each), fairest first:
// final writes, then first text, then writes that show no new text, then the reply whose pending text
// has waited longest. Text is coalesced by
// the callers (a reply writes its latest snapshot when granted), never queued here.
//
// Pending and tidy writes leave a reserve of tokens in the bucket (by default (burst-1)/2, e.g. 2 of a burst of 5)
// for final and first writes: a reply that ends or starts while others stream writes at once instead of
// waiting for the next token. The reserve costs no throughput (the bucket still refills at the same rate;
// streaming replies just run with it banked), only that many edits once at start.
//
// The grant logic runs under a mutex, called by Lane.Wait, by cancellations and by one time.AfterFunc
// timer armed for when the next token is due; the scheduler owns no goroutine and needs no Close.
type Scheduler struct {
	b       *Bucket
	policy  Policy
	reserve float64 // tokens Pending grants leave in the bucket

	mu      sync.Mutex
	waiters []*waiter // unordered; the best is found by a scan (tens to hundreds of entries)
	seq     uint64
	lanes   int
	timer   *time.Timer
	due     time.Time // when timer fires; zero when not armed
}

type waiter struct {
	p       Priority
	since   time.Time
	seq     uint64
	ready   chan struct{} // closed on grant
	granted bool
}

// Option configures a Scheduler.
type Option func(*Scheduler)

// WithPolicy selects the edit policy (default PolicyFair). The baseline policies exist for the load
// benchmark's comparison only.
func WithPolicy(p Policy) Option {
	return func(s *Scheduler) { s.policy = p }
}

// WithReserve sets how many tokens pending writes leave in the bucket for final and first writes
// (default (burst-1)/2; at most burst-1).
func WithReserve(n int) Option {
	return func(s *Scheduler) { s.reserve = float64(n) }
}

// RateMargin is the fraction of the configured rate a Scheduler grants: Slack counts a write when it
// arrives, and network and scheduling jitter can bring two writes granted 1.2 s apart within 1.16 s of
// each other there. Running 3% under the limit absorbs that jitter, so a budget-bound bot never sees a 429
// (one 429 would cost far more: a pause for everyone and a 20% cut).
const RateMargin = 0.97

// NewScheduler returns a scheduler over a new Bucket of perMinute writes a minute (times RateMargin) and
// the given burst.
func NewScheduler(perMinute float64, burst int, opts ...Option) *Scheduler {
	s := &Scheduler{b: NewBucket(perMinute*RateMargin, burst), policy: PolicyFair, reserve: -1}
	for _, o := range opts {
		o(s)
	}
	if max := s.b.burst - 1; s.reserve < 0 {
		s.reserve = math.Floor(max / 2)
	} else if s.reserve > max {
		s.reserve = max
	}
	return s
}

// Policy returns the scheduler's edit policy; the reply loop consults it (Policy.Publish).
func (s *Scheduler) Policy() Policy { return s.policy }

// Bucket returns the scheduler's bucket (for its effective rate).
func (s *Scheduler) Bucket() *Bucket { return s.b }

// Lane returns a new lane: one per reply (or per streamed message), closed when the reply is done.
func (s *Scheduler) Lane() *Lane {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lanes++
	return &Lane{s: s}
}

// Lanes returns the number of lanes not yet closed (replies in flight).
func (s *Scheduler) Lanes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lanes
}

// Spacing is how far apart one reply's writes come when the replies in flight share the budget equally
// (lanes / effective rate), under PolicyFair; 0 under the baselines, which write on their own clocks.
// Replies use it to tell when they are under load (continuation by post).
func (s *Scheduler) Spacing() time.Duration {
	if s.policy != PolicyFair {
		return 0
	}
	lanes := s.Lanes()
	rate := s.b.Rate() // per minute
	if lanes == 0 || rate <= 0 {
		return 0
	}
	return time.Duration(float64(lanes) / rate * float64(time.Minute))
}

// Throttled records a 429 with its Retry-After: every lane waits until it has passed, and the effective rate
// is lowered for a while (Bucket.Throttled).
func (s *Scheduler) Throttled(retryAfter time.Duration) {
	s.b.Throttled(retryAfter)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dispatchLocked()
}

// Waiting returns the number of lanes waiting for a grant.
func (s *Scheduler) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}

// wait blocks until w is granted or ctx ends.
func (s *Scheduler) wait(ctx context.Context, p Priority, since time.Time) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if since.IsZero() {
		since = time.Now()
	}
	s.mu.Lock()
	s.seq++
	w := &waiter{p: p, since: since, seq: s.seq, ready: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.dispatchLocked()
	s.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.granted {
			s.b.refund() // granted as we gave up: give the slot to someone else
		} else {
			s.removeLocked(w)
		}
		s.dispatchLocked()
		return context.Cause(ctx)
	}
}

// dispatchLocked grants tokens to the best waiters while tokens are available, then arms the timer for the
// next token (or stops it when nobody waits).
func (s *Scheduler) dispatchLocked() {
	for len(s.waiters) > 0 {
		now := time.Now()
		i := s.bestLocked()
		w := s.waiters[i]
		var keep float64
		if w.p < First {
			keep = s.reserve
		}
		if d := s.b.take(now, keep); d > 0 {
			s.armLocked(now.Add(d))
			return
		}
		s.waiters[i] = s.waiters[len(s.waiters)-1]
		s.waiters[len(s.waiters)-1] = nil
		s.waiters = s.waiters[:len(s.waiters)-1]
		w.granted = true
		close(w.ready)
	}
	if s.timer != nil && !s.due.IsZero() {
		s.timer.Stop()
		s.due = time.Time{}
	}
}

func (s *Scheduler) armLocked(at time.Time) {
	if !s.due.IsZero() && !s.due.After(at) {
		return // already armed early enough; the callback re-arms if needed
	}
	s.due = at
	d := time.Until(at)
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.fire)
		return
	}
	s.timer.Reset(d)
}

func (s *Scheduler) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.due = time.Time{}
	s.dispatchLocked()
}

// bestLocked returns the index of the waiter to serve first: highest priority, then oldest pending text,
// then first come.
func (s *Scheduler) bestLocked() int {
	best := 0
	for i, w := range s.waiters[1:] {
		if before(w, s.waiters[best]) {
			best = i + 1
		}
	}
	return best
}

func before(a, b *waiter) bool {
	if a.p != b.p {
		return a.p > b.p
	}
	if !a.since.Equal(b.since) {
		return a.since.Before(b.since)
	}
	return a.seq < b.seq
}

func (s *Scheduler) removeLocked(w *waiter) {
	for i, x := range s.waiters {
		if x == w {
			last := len(s.waiters) - 1
			s.waiters[i] = s.waiters[last]
			s.waiters[last] = nil
			s.waiters = s.waiters[:last]
			return
		}
	}
}

// Lane is one reply's place in a Scheduler. A lane is used by one goroutine at a time (the reply's writer).
type Lane struct {
	s *Scheduler

	mu     sync.Mutex
	closed bool
	// Baseline policies only: this reply's own clock.
	last   time.Time // last grant
	paused time.Time // this lane's own Retry-After
}

// ErrLaneClosed is returned by Wait on a closed Lane.
var ErrLaneClosed = errors.New("pace: lane closed")

// Wait blocks until this reply may make one write, or ctx ends (it then returns context.Cause(ctx)).
// p is the kind of write; pendingSince is when the oldest text not yet shown arrived (zero: now).
func (l *Lane) Wait(ctx context.Context, p Priority, pendingSince time.Time) error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrLaneClosed
	}
	switch l.s.policy {
	case PolicyEvery1s:
		return l.waitOwn(ctx, time.Second)
	case PolicyEvery20Chunks:
		return l.waitOwn(ctx, 0)
	}
	if err := l.s.wait(ctx, p, pendingSince); err != nil {
		return err
	}
	return l.s.b.gate(ctx) // the replicas' shared budget, if the bucket shares one
}

// Try takes a grant for a write of kind p at once, when one is free now for it (as Wait would hand
// it out at once: no better waiter, a token in the bucket beyond the reserve p leaves), and reports
// whether it did; it never waits. With a shared bucket (Bucket.Share) it needs that bucket's token
// now too. Under the baseline policies there is nothing to take at once: false.
func (l *Lane) Try(p Priority, pendingSince time.Time) bool {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed || l.s.policy != PolicyFair {
		return false
	}
	return l.s.try(p, pendingSince) && l.s.b.tryGate()
}

// try is Try's grant: it queues a waiter, lets dispatchLocked serve the line as it stands, and takes
// the waiter back out when it was not served.
func (s *Scheduler) try(p Priority, since time.Time) bool {
	if since.IsZero() {
		since = time.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	w := &waiter{p: p, since: since, seq: s.seq, ready: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.dispatchLocked()
	if w.granted {
		return true
	}
	s.removeLocked(w)
	return false
}

// Throttled records a 429 seen by this lane's write. Under PolicyFair it pauses the whole scheduler
// (Scheduler.Throttled); the baseline policies pause only this lane, as the bots they imitate do.
func (l *Lane) Throttled(retryAfter time.Duration) {
	if l.s.policy == PolicyFair {
		l.s.Throttled(retryAfter)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := time.Now().Add(retryAfter); until.After(l.paused) {
		l.paused = until
	}
}

// Close ends the lane: it no longer counts as open (Scheduler.Lanes) and a later Wait returns ErrLaneClosed.
// Calling it more than once is harmless.
func (l *Lane) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	l.s.mu.Lock()
	l.s.lanes--
	l.s.mu.Unlock()
}

// waitOwn waits for the lane's own clock: at least every since the last grant, and past its own pause.
func (l *Lane) waitOwn(ctx context.Context, every time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	l.mu.Lock()
	at := l.paused
	if next := l.last.Add(every); !l.last.IsZero() && next.After(at) {
		at = next
	}
	l.mu.Unlock()
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	l.mu.Lock()
	l.last = time.Now()
	l.mu.Unlock()
	return nil
}
