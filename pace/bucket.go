// Package pace holds the bot's shared Slack write budget: token buckets (Bucket, Keyed) and the fair
// edit scheduler (Scheduler) that hands chat.update (or chat.appendStream) slots to the replies in flight.
//
// Slack limits chat.update per workspace (about 50 a minute, shared by every reply) and chat.postMessage to
// about one a second per channel. Going over earns a 429 with Retry-After; a 429 seen by one reply pauses
// everyone using the same bucket, and the bucket learns from it (see Bucket.Throttled).
//
// Nothing here starts a goroutine: waits are timers owned by the waiting caller, and the scheduler's grant
// logic runs under a mutex, driven by the callers and by one time.AfterFunc timer.
package pace

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// Learning after a 429 (Bucket.Throttled): the effective rate is multiplied by cutFactor (at most once per
// pause, so a volley of 429s from requests already in flight counts once), never below minFraction of the
// configured rate. After recoverDelay without a 429 it climbs back by recoverPerMinute of the configured rate
// per minute, up to the configured rate. With the defaults one 429 costs 20% of the budget for about three
// minutes, and a rate configured above Slack's real limit produces one 429 every few minutes, never a storm.
const (
	cutFactor        = 0.8
	minFraction      = 0.25
	recoverDelay     = time.Minute
	recoverPerMinute = 0.1
)

// Bucket is a token bucket: tokens refill at a rate per minute up to a burst; one write takes one token.
// Pause (or Throttled, for a 429) stops every user of the bucket until a time. Safe for concurrent use.
type Bucket struct {
	mu     sync.Mutex
	base   float64   // configured tokens per second
	rate   float64   // effective tokens per second (lowered after a 429, restored slowly)
	burst  float64   // capacity
	tokens float64   // may go negative: reservations by Wait
	last   time.Time // last refill
	paused time.Time // no token is handed out before this (Pause, a 429)
	// held is when the shared bucket (Share) will have a token again: no token is handed out before
	// it either, but it is no 429: tokens are still earned and slots handed out stay fresh.
	held  time.Time
	cutAt time.Time // last time rate was lowered
	// earned counts every token earned since the start; a waiter's place in line is the count at
	// which its token is earned, so it can find its time again after a pause or a rate change,
	// which epoch counts (pauses, see Slot).
	earned float64
	epoch  uint64
	// issued numbers the waits that queued; the last one queued holds the latest number, and
	// only it may give its token back when it stops waiting (see giveUp).
	issued uint64
	// claims counts the live Reservations: the tokens WaitSpare leaves for them (see Reserve).
	claims int

	shared Shared // nil: this process alone (see Share)
	name   string // the shared bucket's name
}

// NewBucket returns a full bucket refilling perMinute tokens a minute, holding at most burst (at least 1).
func NewBucket(perMinute float64, burst int) *Bucket {
	if perMinute <= 0 {
		perMinute = 1
	}
	if burst < 1 {
		burst = 1
	}
	return &Bucket{
		base:   perMinute / 60,
		rate:   perMinute / 60,
		burst:  float64(burst),
		tokens: float64(burst),
		last:   time.Now(),
	}
}

// Rate returns the effective rate in tokens per minute (lower than configured for a while after a 429).
func (b *Bucket) Rate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked(time.Now())
	return b.rate * 60
}

// Wait takes one token, waiting for it (and for any pause) unless ctx ends first, in which case the
// reservation is returned and the cause of ctx is returned. Waiters are served in arrival order.
//
// A wait whose token would come after ctx's deadline returns an error wrapping
// context.DeadlineExceeded at once, without queueing.
//
// A waiter keeps its place in line (the count of earned tokens at which its token is due), not its
// time: when a 429 pauses the bucket or lowers its rate while it waits, it works out its time again
// from its place, so the waiters queued before a pause resume one at a time at the rate after it,
// instead of all at once when it ends (which would draw the 429s again).
func (b *Bucket) Wait(ctx context.Context) error {
	_, err := b.WaitSlot(ctx)
	return err
}

// Slot is a token handed out by WaitSlot.
type Slot struct {
	b     *Bucket
	epoch uint64 // the bucket's pause count when the token was handed out
}

// Stale reports whether the bucket has been paused (Pause, or a 429 through Throttled) since the slot was
// handed out. A caller that waited for something else after taking it should then wait for the bucket
// again: the slot came from before the pause, and using it now may draw the 429 the pause is there to avoid.
// The zero Slot (returned with an error) is never stale.
func (s Slot) Stale() bool {
	if s.b == nil {
		return false
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.b.epoch != s.epoch
}

// WaitSlot is Wait, and returns the slot it took (see Slot.Stale).
func (b *Bucket) WaitSlot(ctx context.Context) (Slot, error) {
	if ctx.Err() != nil {
		return Slot{}, context.Cause(ctx)
	}
	b.mu.Lock()
	now := time.Now()
	b.refillLocked(now)
	b.tokens--
	d := b.delayLocked(now)
	if deadline, ok := ctx.Deadline(); ok && d > 0 && now.Add(d).After(deadline) {
		// The token would come too late: do not queue for it (this waiter is the last in line, so
		// giving it back moves nobody's place). Waiting in line only to give up would cost the
		// waiters behind a slot each, and under steady overload every newcomer would.
		b.tokens++
		b.mu.Unlock()
		return Slot{}, errTooLate
	}
	place := b.earned - math.Min(b.tokens, 0) // this token is ours once this many have been earned
	epoch := b.epoch
	var ticket uint64
	if d > 0 {
		b.issued++
		ticket = b.issued
	}
	b.mu.Unlock()
	var t *time.Timer
	for d > 0 {
		if t == nil {
			t = time.NewTimer(d)
			defer t.Stop()
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			b.giveUp(ticket)
			return Slot{}, context.Cause(ctx)
		}
		b.mu.Lock()
		if b.epoch == epoch {
			b.mu.Unlock()
			break
		}
		now = time.Now()
		b.refillLocked(now)
		d, epoch = b.untilLocked(now, place), b.epoch
		b.mu.Unlock()
	}
	if err := b.gate(ctx); err != nil {
		return Slot{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return Slot{b, b.epoch}, nil
}

// giveUp returns the token of a waiter that stopped waiting, when nobody queued after it (its
// ticket is the last issued). Otherwise its slot passes unused: the waiters behind it keep their
// places, and a newcomer queues after the last of them, so no two waiters ever share a slot
// (giving the token back would put the newcomer on the last waiter's place, and both would go at
// once). Tickets are counted, not compared as places, so float rounding never decides.
func (b *Bucket) giveUp(ticket uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked(time.Now())
	if ticket == b.issued {
		b.issued-- // the one queued before it is the last now
		b.tokens = math.Min(b.tokens+1, b.burst)
	}
}

// errTooLate is returned by Wait when the token would come after the context's deadline.
var errTooLate = fmt.Errorf("pace: the next slot comes after the deadline: %w", context.DeadlineExceeded)

// untilLocked is how long until the bucket is not paused and place tokens have been earned.
func (b *Bucket) untilLocked(now time.Time, place float64) time.Duration {
	var d time.Duration
	if p := b.blockedLocked().Sub(now); p > 0 {
		d = p
	}
	if short := place - b.earned; short > 0 {
		d += time.Duration(math.Ceil(short / b.rate * float64(time.Second)))
	}
	return d
}

// TryTake takes one token if one is available now (not paused, a whole token earned) and reports whether
// it did; it never waits.
func (b *Bucket) TryTake() bool {
	b.mu.Lock()
	now := time.Now()
	b.refillLocked(now)
	if b.tokens < 1 || now.Before(b.blockedLocked()) {
		b.mu.Unlock()
		return false
	}
	b.tokens--
	b.mu.Unlock()
	return b.tryGate()
}

// Pause stops handing out tokens until the given time (a later pause wins, an earlier one is ignored).
func (b *Bucket) Pause(until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if until.After(b.paused) {
		b.refillLocked(time.Now())
		b.paused = until
		b.epoch++
	}
}

// Throttled records a 429 with the given Retry-After: everyone waits until it has passed, then one write may
// go and the rest follow at the effective rate, which is lowered (once per pause) so the storm is not
// repeated.
func (b *Bucket) Throttled(retryAfter time.Duration) {
	if retryAfter <= 0 {
		retryAfter = time.Second
	}
	b.mu.Lock()
	now := time.Now()
	b.refillLocked(now)
	if !now.Before(b.paused) { // a first 429, not one more answer to requests sent before the pause
		b.rate = math.Max(b.rate*cutFactor, b.base*minFraction)
		b.cutAt = now
		if b.tokens >= 0 {
			// Retry-After is when the next call may go: one token at the end of the pause, then the
			// rate. Only on the first 429: nobody is queued then (tokens >= 0 and no pause), while
			// during a pause a waiter may hold the token already, and giving it again would send two
			// calls at once when the pause ends.
			b.tokens = 1
		}
	}
	until := now.Add(retryAfter)
	if until.After(b.paused) {
		b.paused = until
	}
	b.epoch++ // waiters work out their times again (the pause, the rate)
	b.mu.Unlock()
	b.pauseShared(until)
}

// take takes one token if one is available now with keep more left in the bucket, and returns 0;
// otherwise it takes nothing and returns how long until that will be.
func (b *Bucket) take(now time.Time, keep float64) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeLocked(now, keep)
}

func (b *Bucket) takeLocked(now time.Time, keep float64) time.Duration {
	b.refillLocked(now)
	need := 1 + keep
	if b.tokens >= need && !now.Before(b.blockedLocked()) {
		b.tokens--
		return 0
	}
	b.tokens -= need
	d := b.delayLocked(now)
	b.tokens += need
	if d <= 0 {
		d = time.Millisecond // rounding: never spin
	}
	return d
}

// refund returns a token that was taken but not used.
func (b *Bucket) refund() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = math.Min(b.tokens+1, b.burst)
}

// delayLocked is how long until the bucket is not paused and the token count is non-negative (tokens are
// earned only after the pause).
func (b *Bucket) delayLocked(now time.Time) time.Duration {
	var d time.Duration
	if p := b.blockedLocked().Sub(now); p > 0 {
		d = p
	}
	if b.tokens < 0 {
		d += time.Duration(math.Ceil(-b.tokens / b.rate * float64(time.Second)))
	}
	return d
}

// blockedLocked is when tokens may be handed out again: after a pause and after a hold.
func (b *Bucket) blockedLocked() time.Time {
	if b.held.After(b.paused) {
		return b.held
	}
	return b.paused
}

// hold hands out no token before until, when the shared bucket will have one (see held).
func (b *Bucket) hold(until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if until.After(b.held) {
		b.held = until
	}
}

// refillLocked adds the tokens earned since the last refill (none while paused) and restores the rate.
func (b *Bucket) refillLocked(now time.Time) {
	from := b.last
	if b.paused.After(from) {
		from = b.paused // nothing is earned during a pause
	}
	if b.rate < b.base && now.Sub(b.cutAt) > recoverDelay {
		start := b.cutAt.Add(recoverDelay)
		if b.last.After(start) {
			start = b.last
		}
		b.rate = math.Min(b.base, b.rate+b.base*recoverPerMinute*now.Sub(start).Minutes())
	}
	if el := now.Sub(from); el > 0 {
		b.earned += el.Seconds() * b.rate
		b.tokens = math.Min(b.burst, b.tokens+el.Seconds()*b.rate)
	}
	if now.After(b.last) {
		b.last = now
	}
}
