package main

import (
	"testing"
	"time"
)

// The questions past MAX_CONCURRENT_REPLIES waited in line: the k-th of them was k-th in line, so
// its wait divided by k is the wait per place ahead.
func TestQueueDetails(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name       string
		toModel    []time.Duration
		concurrent int
		told       int
		want       string
	}{
		{"nobody waited", []time.Duration{0, 0, s / 10}, 3, 0, ""},
		{"two waited", []time.Duration{10 * s, 0, 0, 20 * s}, 2, 2,
			"waited in line for one of 2 places 2 (told their place privately 2): question -> model request p50 10.00s max 20.00s; per place ahead mean 10.00s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &result{toModel: tc.toModel, concurrent: tc.concurrent, toldPlace: tc.told}
			if got := r.queueDetails(); got != tc.want {
				t.Errorf("queueDetails() = %q\nwant %q", got, tc.want)
			}
		})
	}
}
