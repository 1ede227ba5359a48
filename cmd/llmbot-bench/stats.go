package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the p-th percentile (0 < p <= 100) of xs by the nearest-rank method: the
// smallest value with at least p% of the values at or below it. It returns 0 for no values.
func percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// mean returns the arithmetic mean of xs, 0 for no values.
func mean(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += float64(x)
	}
	return time.Duration(sum / float64(len(xs)))
}

// maxOf returns the largest of xs, 0 for no values.
func maxOf(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// bestMeanLag is the lowest mean visible lag a pacing policy can reach when n replies stream at
// once and share a budget of perMinute writes a minute: each reply gets an equal share, perMinute/n
// writes a minute, evenly spaced, so its writes are interval = 60s·n/perMinute apart. A token
// arrives at a time independent of the write schedule, so it waits for the next write on average
// half an interval:
//
//	L* = interval/2 = 60s · n / (2 · perMinute)
//
// (The same holds when the interval is longer than an answer: replies' last writes are then spread
// over one interval after the answers end, and averaged over the replies a token still waits half
// an interval. The bucket's burst lets the first writes of a run come sooner, so a run with few
// replies can beat L* slightly.)
func bestMeanLag(n int, perMinute float64) time.Duration {
	if n <= 0 || perMinute <= 0 {
		return 0
	}
	return time.Duration(60 * float64(time.Second) * float64(n) / (2 * perMinute))
}
