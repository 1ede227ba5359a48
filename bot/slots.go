package bot

import (
	"context"
	"sync"
)

// slots bounds the work running at once (answers and /imagine jobs: model requests in flight) and
// queues the rest in arrival order: a question asked first is answered first, whatever the Go
// scheduler wakes first.
type slots struct {
	mu      sync.Mutex
	free    int
	waiting []chan struct{} // oldest first; closed when handed a slot
}

func newSlots(n int) *slots { return &slots{free: n} }

// acquire waits for a slot, in arrival order, until ctx ends (then it returns ctx's cause and
// holds no slot). Every acquire that returns nil needs one release.
func (s *slots) acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.free > 0 && len(s.waiting) == 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	s.waiting = append(s.waiting, ready)
	s.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range s.waiting {
		if w == ready {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return context.Cause(ctx)
		}
	}
	// Handed a slot as ctx ended: give it to the next in line.
	s.handOver()
	return context.Cause(ctx)
}

// release frees a slot: the oldest waiter gets it.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handOver()
}

// handOver passes one slot to the oldest waiter, or frees it. s.mu is held.
func (s *slots) handOver() {
	if len(s.waiting) == 0 {
		s.free++
		return
	}
	close(s.waiting[0])
	s.waiting = s.waiting[1:]
}

// queued is how many wait for a slot.
func (s *slots) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}
