package bot

import "sync"

// tasks are the goroutines the bot starts for work. Besides waiting for all of them (Wait), the
// drain can watch for the moment none runs (idle) while it still starts more: the clicks other
// replicas hand to this one while its answers drain.
type tasks struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	n    int           // running
	none chan struct{} // closed when n drops to 0; nil while nobody watches
}

// Go runs f in a goroutine of the bot's.
func (t *tasks) Go(f func()) {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
	t.wg.Go(func() {
		defer t.done()
		f()
	})
}

func (t *tasks) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 && t.none != nil {
		close(t.none)
		t.none = nil
	}
}

// idle is closed once no task runs (already closed if none does now).
func (t *tasks) idle() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if t.none == nil {
		t.none = make(chan struct{})
	}
	return t.none
}

// Wait waits for every task: only once no more are started.
func (t *tasks) Wait() { t.wg.Wait() }
