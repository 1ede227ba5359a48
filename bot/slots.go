package bot

import (
	"context"
	"sync"
)

// slots bounds the work running at once (answers and /imagine jobs: model requests in flight) and
// queues the rest in arrival order. The loop joins the line (join) as each request arrives, before
// the goroutine that will wait starts, so a question asked first is answered first whatever order
// the Go scheduler starts those goroutines in.
type slots struct {
	mu      sync.Mutex
	free    int
	waiting []*ticket // oldest first
}

// ticket is a place in the line for a slot.
type ticket struct {
	s     *slots
	ready chan struct{} // closed when the ticket holds a slot
	ahead int           // tickets in line before this one when it joined (-1: a slot at once)
}

func newSlots(n int) *slots { return &slots{free: n} }

// join takes a place in the line now. The ticket must be waited for (wait), which holds a slot once
// it returns nil; every such slot needs one release.
func (s *slots) join() *ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &ticket{s: s, ready: make(chan struct{}), ahead: len(s.waiting)}
	if s.free > 0 && len(s.waiting) == 0 {
		s.free--
		close(t.ready)
		t.ahead = -1
		return t
	}
	s.waiting = append(s.waiting, t)
	return t
}

// queued reports whether the ticket had to wait in line when it joined, and its place then (1: next).
func (t *ticket) queued() (place int, waits bool) { return t.ahead + 1, t.ahead >= 0 }

// wait waits for the ticket's slot until ctx ends (then it returns ctx's cause, holds no slot, and
// leaves the line).
func (t *ticket) wait(ctx context.Context) error {
	select {
	case <-t.ready:
		return nil
	case <-ctx.Done():
	}
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range s.waiting {
		if w == t {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return context.Cause(ctx)
		}
	}
	// Handed a slot as ctx ended: give it to the next in line.
	s.handOver()
	return context.Cause(ctx)
}

// release frees a slot: the oldest in line gets it.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handOver()
}

// handOver passes one slot to the oldest in line, or frees it. s.mu is held.
func (s *slots) handOver() {
	if len(s.waiting) == 0 {
		s.free++
		return
	}
	close(s.waiting[0].ready)
	s.waiting = s.waiting[1:]
}

// queued is how many wait in line.
func (s *slots) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}
