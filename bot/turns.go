package bot

import "sync"

// turns orders work per key (a thread): each job waits for the one taken before it on the same
// key. A job's place is taken by the event loop, in arrival order, so two mentions in one thread
// are answered one after the other, the second seeing the first's answer.
type turns struct {
	mu   sync.Mutex
	last map[string]chan struct{} // key -> done channel of the newest job on it
}

func newTurns() *turns { return &turns{last: make(map[string]chan struct{})} }

// take queues a job on key. The job must wait for prev (nil: nobody before it) and must call
// done exactly once when finished, whatever happened.
func (t *turns) take(key string) (prev <-chan struct{}, done func()) {
	mine := make(chan struct{})
	t.mu.Lock()
	if p, ok := t.last[key]; ok {
		prev = p
	}
	t.last[key] = mine
	t.mu.Unlock()
	return prev, func() {
		close(mine)
		t.mu.Lock()
		if t.last[key] == mine {
			delete(t.last, key)
		}
		t.mu.Unlock()
	}
}

// len returns the number of keys with a job queued or running.
func (t *turns) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.last)
}
