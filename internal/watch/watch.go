// Package watch holds the module's waits that end with their context: for a fake's state to
// change (Changes; each change closes the channel its observers wait on, instead of their polling
// it) and for a while to pass (Sleep).
package watch

import (
	"context"
	"sync"
	"time"
)

// Sleep waits d, or until ctx ends (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Changes is the state changes of one fake. Create it with New.
type Changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// New returns Changes with no change yet.
func New() *Changes { return &Changes{ch: make(chan struct{})} }

// C is closed at the next change.
func (c *Changes) C() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

// Notify wakes everyone waiting for a change. Call it after the change is made.
func (c *Changes) Notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.ch)
	c.ch = make(chan struct{})
}

// WaitFor calls cond now and after every change until it returns true or ctx ends. cond may read
// the state under its own lock.
func (c *Changes) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		ch := c.C()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
