package pace

import (
	"context"
	"time"
)

// Shared is a token bucket that several processes draw from (the state package's buckets in
// Redis): the bot's replicas share one Slack workspace, and so its limits. A Bucket that shares
// takes each of its tokens there as well, after its own: its own bucket keeps this process's order
// (the fair scheduler's priorities, arrival order), the shared one keeps the replicas together to
// Slack's rate.
type Shared interface {
	// Take takes one token of the bucket name (perMinute, burst) if one is available now and
	// returns 0; otherwise it takes nothing and returns how long until one will be.
	Take(ctx context.Context, name string, perMinute float64, burst int) (time.Duration, error)
	// Pause stops the bucket name for every process until until (a 429's Retry-After).
	Pause(ctx context.Context, name string, until time.Time) error
}

// sharedCallTimeout bounds a call to the shared bucket made without a caller's context (a 429
// reported through Throttled). The state package answers from memory when its store is slow.
const sharedCallTimeout = time.Second

// Share makes b take each token from s's bucket name as well (see Shared). Call it before b is used.
func (b *Bucket) Share(s Shared, name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shared, b.name = s, name
}

// gate takes the shared token for a local one just handed out. While the shared bucket has none,
// this bucket is held until it will (hold: not a pause, which means a 429): the other local
// waiters stay in their places behind this one instead of all asking the shared bucket, so this
// process's order holds across replicas.
// An error of the shared bucket lets the write go: a possible 429 is better than silence.
func (b *Bucket) gate(ctx context.Context) error {
	b.mu.Lock()
	s, name, perMinute, burst := b.shared, b.name, b.base*60, int(b.burst)
	b.mu.Unlock()
	if s == nil {
		return nil
	}
	var t *time.Timer
	for {
		wait, err := s.Take(ctx, name, perMinute, burst)
		if err != nil || wait <= 0 {
			return ctx.Err()
		}
		b.hold(time.Now().Add(wait))
		if t == nil {
			t = time.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// tryGate is gate for TryTake: it takes the shared token if there is one now, else it holds b
// until there will be one and reports false.
func (b *Bucket) tryGate() bool {
	b.mu.Lock()
	s, name, perMinute, burst := b.shared, b.name, b.base*60, int(b.burst)
	b.mu.Unlock()
	if s == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedCallTimeout)
	defer cancel()
	wait, err := s.Take(ctx, name, perMinute, burst)
	if err != nil || wait <= 0 {
		return true
	}
	b.refund()
	b.hold(time.Now().Add(wait))
	return false
}

// pauseShared tells the other processes of a 429 (Throttled): Slack's pause is the workspace's.
func (b *Bucket) pauseShared(until time.Time) {
	b.mu.Lock()
	s, name := b.shared, b.name
	b.mu.Unlock()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedCallTimeout)
	defer cancel()
	_ = s.Pause(ctx, name, until) // best effort: this process pauses either way
}
