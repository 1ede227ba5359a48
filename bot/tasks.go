package bot

import "sync"

// tasks are the goroutines the bot starts for work. Besides waiting for all of them (Wait), the
// drain can watch for the moment none runs (idle) while it still starts more: the clicks other
// replicas hand to this one while its answers drain.
type tasks struct {
	mu   sync.Mutex
	n    int           // running
	none chan struct{} // closed when n drops to 0; nil while nobody watches
}

// Go runs f in a goroutine of the bot's.
func (t *tasks) Go(f func()) {
	t.mu.Lock()
	t.n++
	t.mu.Unlock()
	go func() {
		defer t.done()
		f()
	}()
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
func (t *tasks) Wait() { <-t.idle() }

// held is the work the loop has handled but not started yet: Slack may deliver many envelopes at
// once (N people asking together), and each answer started at once would compete for the CPU with
// the acks of the envelopes behind it (parsing, opening HTTP connections, the first Slack and model
// calls). The loop holds started work until no envelope has come for burstGap (2 ms) and none is
// waiting, at most burstHold (50 ms), so a burst is acked first. Only the loop goroutine touches it.
type held []func()

// later holds f, to be started the envelopes arriving with this one are acked.
func (h *held) later(f func()) { *h = append(*h, f) }

// release starts the held work as tasks of ts.
func (h *held) release(ts *tasks) {
	for i, f := range *h {
		ts.Go(f)
		(*h)[i] = nil
	}
	*h = (*h)[:0]
}
