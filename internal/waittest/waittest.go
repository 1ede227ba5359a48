// Package waittest holds the bounded waits of tests that run against real connections and
// processes (no fake clock): a condition polled until it holds, a value received from a channel,
// each failing the test after a time limit.
package waittest

import (
	"testing"
	"time"
)

// poll is how often Eventually asks.
const poll = 5 * time.Millisecond

// Eventually calls cond until it is true, failing tb (saying what it waited for) after within.
func Eventually(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(poll)
	}
}

// Receive returns the next value from c, failing tb (saying what it waited for) after within.
func Receive[T any](tb testing.TB, within time.Duration, what string, c <-chan T) T {
	tb.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(within):
		tb.Fatalf("not within %v: %s", within, what)
		var zero T
		return zero
	}
}
