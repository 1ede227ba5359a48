package main

import (
	"slices"
	"testing"
	"time"
)

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		xs   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ms(7), 99, 7 * time.Millisecond},
		{"median of ten", ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 50, 5 * time.Millisecond},
		{"p90 of ten", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
		{"p95 of ten is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 95, 10 * time.Millisecond},
		{"p99 of a hundred", append(ms(make([]int, 98)...), ms(500, 900)...), 99, 500 * time.Millisecond},
		{"p100", ms(3, 1, 2), 100, 3 * time.Millisecond},
		{"tiny p is the smallest", ms(3, 1, 2), 0.1, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.xs, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.xs, tt.p, got, tt.want)
			}
		})
	}
}

func TestPercentileLeavesInputAlone(t *testing.T) {
	xs := ms(3, 1, 2)
	percentile(xs, 50)
	if want := ms(3, 1, 2); !slices.Equal(xs, want) {
		t.Errorf("input changed to %v", xs)
	}
}

func TestMeanAndMax(t *testing.T) {
	tests := []struct {
		name      string
		xs        []time.Duration
		mean, max time.Duration
	}{
		{"empty", nil, 0, 0},
		{"one", ms(4), 4 * time.Millisecond, 4 * time.Millisecond},
		{"several", ms(1, 2, 3, 10), 4 * time.Millisecond, 10 * time.Millisecond},
		{"fraction", ms(1, 2), 1500 * time.Microsecond, 2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mean(tt.xs); got != tt.mean {
				t.Errorf("mean = %v, want %v", got, tt.mean)
			}
			if got := maxOf(tt.xs); got != tt.max {
				t.Errorf("maxOf = %v, want %v", got, tt.max)
			}
		})
	}
}

func TestBestMeanLag(t *testing.T) {
	tests := []struct {
		n         int
		perMinute float64
		want      time.Duration
	}{
		{1, 50, 600 * time.Millisecond}, // one write every 1.2 s: half of it
		{10, 50, 6 * time.Second},
		{50, 50, 30 * time.Second},
		{200, 50, 2 * time.Minute},
		{10, 100, 3 * time.Second}, // twice the budget, half the lag
		{0, 50, 0},
		{10, 0, 0},
	}
	for _, tt := range tests {
		if got := bestMeanLag(tt.n, tt.perMinute); got != tt.want {
			t.Errorf("bestMeanLag(%d, %v) = %v, want %v", tt.n, tt.perMinute, got, tt.want)
		}
	}
}

// TestBestMeanLagIsHalfTheShare checks the formula against the schedule it describes: n replies
// writing in turn, evenly spaced, from a budget of perMinute, and tokens arriving at many
// different times: the mean wait for the next write of the token's reply is half its interval.
func TestBestMeanLagIsHalfTheShare(t *testing.T) {
	const n, perMinute = 7, 50.0
	gap := time.Duration(float64(time.Minute) / perMinute) // one write of the budget
	interval := time.Duration(n) * gap                     // one reply's writes
	var waits []time.Duration
	for reply := range n {
		first := time.Duration(reply) * gap // the replies' writes interleave
		for tok := time.Duration(0); tok < 10*interval; tok += 37 * time.Millisecond {
			next := first
			for next < tok {
				next += interval
			}
			waits = append(waits, next-tok)
		}
	}
	got, want := mean(waits), bestMeanLag(n, perMinute)
	if diff := got - want; diff < -50*time.Millisecond || diff > 50*time.Millisecond {
		t.Errorf("simulated mean wait %v, formula %v", got, want)
	}
}
