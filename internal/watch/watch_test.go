package watch

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestWaitForWakesOnChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New()
		var n atomic.Int32
		done := make(chan error, 1) // one wait
		go func() { done <- c.WaitFor(t.Context(), func() bool { return n.Load() == 2 }) }()
		for range 2 {
			time.Sleep(time.Second)
			n.Add(1)
			c.Notify()
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestWaitForEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := New().WaitFor(ctx, func() bool { return false }); err != context.DeadlineExceeded {
			t.Errorf("WaitFor = %v, want the deadline", err)
		}
	})
}
