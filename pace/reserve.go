package pace

import (
	"context"
	"math"
	"sync"
	"time"
)

// A bucket's tokens are planned over whole answers. The end of an answer is the write people wait
// for, and it comes when the model stops, which nobody knows in advance: so while an answer is
// live it claims one of the bucket's tokens for its end (Reserve), and the writes that only show
// progress take a token only when the claimed ones stay in the bucket (WaitSpare). A first text and
// an end wait as usual (Wait, in arrival order): they are what the claims keep tokens for.
// At most burst-1 tokens are kept, so progress always has the rate: the claims cost some of the
// burst, never throughput.

// Reservation is a live answer's claim on one of a bucket's tokens for its end. Release it when the
// answer has ended; Release is idempotent and a nil Reservation is none.
type Reservation struct {
	b    *Bucket
	once sync.Once
}

// Reserve claims one token of b for an end (see the comment above), until Release.
func (b *Bucket) Reserve() *Reservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.claims++
	return &Reservation{b: b}
}

// Release gives the claim up.
func (r *Reservation) Release() {
	if r == nil {
		return
	}
	r.once.Do(func() {
		r.b.mu.Lock()
		defer r.b.mu.Unlock()
		r.b.claims--
	})
}

// keptLocked is how many tokens a progress write leaves in the bucket: one per claim, at most burst-1.
func (b *Bucket) keptLocked() float64 {
	return math.Min(float64(b.claims), b.burst-1)
}

// WaitSpare takes one token for a write that shows progress, leaving the tokens claimed for ends
// (Reserve) in the bucket: it waits until the bucket holds one more than those (and for any pause),
// or until ctx ends. It holds no place in line: a first text or an end that queues meanwhile goes
// first, and a slot is taken only when it is free, so giving up returns nothing. The slot is
// returned for Slot.Stale.
func (b *Bucket) WaitSpare(ctx context.Context) (Slot, error) {
	var t *time.Timer
	for {
		if ctx.Err() != nil {
			return Slot{}, context.Cause(ctx)
		}
		b.mu.Lock()
		d := b.takeLocked(time.Now(), b.keptLocked())
		epoch := b.epoch
		b.mu.Unlock()
		if d <= 0 {
			if err := b.gate(ctx); err != nil {
				return Slot{}, err
			}
			return Slot{b, epoch}, nil
		}
		if t == nil {
			t = time.NewTimer(d)
			defer t.Stop()
		} else {
			t.Reset(d)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return Slot{}, context.Cause(ctx)
		}
	}
}
