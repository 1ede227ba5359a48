package fakeslack

import (
	"math"
	"time"
)

// bucket is a token bucket: rate tokens per second, capacity burst.
type bucket struct {
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

// newBucket returns a full bucket, or, when the budgets were spent (spent is not zero), the
// bucket as it would be had it been emptied then: refilling since.
func newBucket(l Limit, now, spent time.Time) *bucket {
	burst := float64(l.Burst)
	if burst < 1 {
		burst = 1
	}
	if !spent.IsZero() {
		return &bucket{rate: l.PerMinute / 60, burst: burst, tokens: 0, last: spent}
	}
	return &bucket{rate: l.PerMinute / 60, burst: burst, tokens: burst, last: now}
}

// take spends one token, or reports how long until one is available.
func (b *bucket) take(now time.Time) (ok bool, wait time.Duration) {
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = math.Min(b.burst, b.tokens+dt*b.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// retryAfterSeconds is the Retry-After header value for a wait: whole seconds, rounded up,
// at least 1.
func retryAfterSeconds(wait time.Duration) int {
	n := int(math.Ceil(wait.Seconds()))
	if n < 1 {
		n = 1
	}
	return n
}

func (l Limit) unlimited() bool { return l.PerMinute <= 0 }

// limitLocked applies the method's bucket and, for chat.postMessage, the channel's.
// It returns the wait before a retry could succeed, 0 when the call may proceed.
func (s *Server) limitLocked(method, channel string, now time.Time) time.Duration {
	var spent *bucket
	if l, ok := s.limits.Methods[method]; ok && !l.unlimited() {
		b := s.buckets[method]
		if b == nil {
			b = newBucket(l, now, s.spent)
			s.buckets[method] = b
		}
		if ok, wait := b.take(now); !ok {
			return wait
		}
		spent = b
	}
	if method == "chat.postMessage" && channel != "" && !s.limits.PostMessagePerChannel.unlimited() {
		b := s.chanBuckets[channel]
		if b == nil {
			b = newBucket(s.limits.PostMessagePerChannel, now, s.spent)
			s.chanBuckets[channel] = b
		}
		if ok, wait := b.take(now); !ok {
			if spent != nil {
				spent.tokens++ // the call is refused: give the workspace token back
			}
			return wait
		}
	}
	return 0
}

// SetLimits replaces the rate limits; buckets start full.
func (s *Server) SetLimits(l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = l
	s.spent = time.Time{}
	s.buckets = map[string]*bucket{}
	s.chanBuckets = map[string]*bucket{}
}

// SpendBudgets empties every rate-limit bucket now, each method's and each channel's, as if
// another client of the same app (the bot's previous instance, say) had just used up the
// workspace's budget: from now on they refill at their rates, and a call beyond them gets its
// 429. Buckets first used later are as empty as they would be.
func (s *Server) SpendBudgets() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spent = time.Now()
	s.buckets = map[string]*bucket{}
	s.chanBuckets = map[string]*bucket{}
}
