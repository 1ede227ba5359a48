package handlers

import (
	"context"
	"testing"
	"time"
)

// TestCloseBy pins an answer's closing deadline: at shutdown the grace period counts from the
// cancellation, whenever the closing writes begin; after a Stop (or any other cancellation) the
// final write gets its whole FinalTimeout from when it begins, if that is after the cancellation.
func TestCloseBy(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	r := NewReplies(nil, nil, nil, nil, nil, nil, ReplyOptions{Timeouts: Timeouts{FinalTimeout: 10 * time.Second, ShutdownTimeout: 2 * time.Second}})
	tests := []struct {
		name             string
		cause            error
		cancelled, began time.Duration // after t0
		want             time.Duration
	}{
		{"shutdown, closing at once", ErrShutdown, 0, 0, 2 * time.Second},
		{"shutdown, closing after an interim call", ErrShutdown, 0, 1500 * time.Millisecond, 2 * time.Second},
		{"stop, closing at once", ErrStopped, 0, 0, 10 * time.Second},
		{"stop, closing after an interim call", ErrStopped, 0, 5 * time.Second, 15 * time.Second},
		{"stop while the closing writes wait", ErrStopped, 3 * time.Second, 0, 13 * time.Second},
		{"the caller's own cancellation", context.Canceled, 0, time.Second, 11 * time.Second},
	}
	for _, tt := range tests {
		got := r.closeBy(tt.cause, t0.Add(tt.cancelled), t0.Add(tt.began))
		if want := t0.Add(tt.want); !got.Equal(want) {
			t.Errorf("%s: closeBy = t0+%v, want t0+%v", tt.name, got.Sub(t0), tt.want)
		}
	}
}
