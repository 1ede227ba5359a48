package pace

import (
	"context"
	"sync"
	"time"
)

// keyedSweepAt is the number of keys above which idle buckets are dropped: a bucket that has been idle long
// enough to be full again is the same as a new one, so forgetting it loses nothing.
const keyedSweepAt = 256

// Keyed holds one Bucket per key, made on first use: chat.postMessage is limited per channel. Memory is
// bounded by the keys used recently (idle buckets are dropped). Safe for concurrent use.
type Keyed struct {
	perMinute float64
	burst     int
	shared    Shared // see Share
	prefix    string

	mu sync.Mutex
	m  map[string]*Bucket
}

// NewKeyed returns per-key buckets of perMinute tokens a minute and the given burst each.
func NewKeyed(perMinute float64, burst int) *Keyed {
	return &Keyed{perMinute: perMinute, burst: burst, m: make(map[string]*Bucket)}
}

// Share makes every key's bucket share s's bucket named prefix+key (see Bucket.Share). Call it
// before k is used.
func (k *Keyed) Share(s Shared, prefix string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.shared, k.prefix = s, prefix
}

// Wait takes one token from key's bucket, waiting as Bucket.Wait does.
func (k *Keyed) Wait(ctx context.Context, key string) error {
	return k.bucket(key).Wait(ctx)
}

// WaitSlot takes one token from key's bucket and returns its slot, as Bucket.WaitSlot does.
func (k *Keyed) WaitSlot(ctx context.Context, key string) (Slot, error) {
	return k.bucket(key).WaitSlot(ctx)
}

// WaitSpare takes one token from key's bucket for a write that shows progress, leaving the
// tokens claimed there (Bucket.WaitSpare).
func (k *Keyed) WaitSpare(ctx context.Context, key string) (Slot, error) {
	return k.bucket(key).WaitSpare(ctx)
}

// Reserve claims one token of key's bucket for an end (Bucket.Reserve).
func (k *Keyed) Reserve(key string) *Reservation {
	return k.bucket(key).Reserve()
}

// Throttled records a 429 for key's bucket (see Bucket.Throttled).
func (k *Keyed) Throttled(key string, retryAfter time.Duration) {
	k.bucket(key).Throttled(retryAfter)
}

// Len returns the number of keys currently remembered.
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

func (k *Keyed) bucket(key string) *Bucket {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	b, ok := k.m[key]
	if !ok {
		if len(k.m) >= keyedSweepAt {
			k.sweepLocked(now)
		}
		b = NewBucket(k.perMinute, k.burst)
		if k.shared != nil {
			b.Share(k.shared, k.prefix+key)
		}
		k.m[key] = b
	}
	return b
}

// sweepLocked drops the buckets that are full again (idle long enough) and not paused.
func (k *Keyed) sweepLocked(now time.Time) {
	for key, b := range k.m {
		b.mu.Lock()
		b.refillLocked(now)
		idle := b.tokens >= b.burst && !b.paused.After(now) && b.claims == 0 // a claimed bucket is no new one
		b.mu.Unlock()
		if idle {
			delete(k.m, key)
		}
	}
}
