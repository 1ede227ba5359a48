package bot

import "time"

// seen remembers keys for a while, to drop redelivered envelopes and events. It is bounded in
// both time (ttl) and size (max: the oldest keys are forgotten first). Not safe for concurrent
// use: only the event loop touches it.
type seen struct {
	ttl   time.Duration
	max   int
	at    map[string]time.Time // key -> when it was added
	queue []seenEntry          // insertion order; queue[head:] are live or stale entries
	head  int
}

type seenEntry struct {
	key string
	at  time.Time
}

func newSeen(ttl time.Duration, max int) *seen {
	return &seen{ttl: ttl, max: max, at: make(map[string]time.Time)}
}

// add records key at now and reports whether it was already there (and not expired).
func (s *seen) add(key string, now time.Time) (dup bool) {
	s.expire(now)
	if _, ok := s.at[key]; ok {
		return true
	}
	s.at[key] = now
	s.queue = append(s.queue, seenEntry{key, now})
	for len(s.at) > s.max {
		s.pop()
	}
	return false
}

// has reports whether key was added and has not expired, without adding it.
func (s *seen) has(key string, now time.Time) bool {
	s.expire(now)
	_, ok := s.at[key]
	return ok
}

// len returns the number of keys remembered.
func (s *seen) len() int { return len(s.at) }

func (s *seen) expire(now time.Time) {
	for s.head < len(s.queue) && now.Sub(s.queue[s.head].at) >= s.ttl {
		s.pop()
	}
}

// pop forgets the oldest entry, compacting the queue once half of it is dead.
func (s *seen) pop() {
	e := s.queue[s.head]
	s.queue[s.head] = seenEntry{}
	s.head++
	if t, ok := s.at[e.key]; ok && t.Equal(e.at) {
		delete(s.at, e.key)
	}
	if s.head > 64 && s.head*2 > len(s.queue) {
		s.queue = append(s.queue[:0:0], s.queue[s.head:]...)
		s.head = 0
	}
}
