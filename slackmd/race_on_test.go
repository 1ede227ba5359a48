//go:build race

package slackmd

// raceEnabled: the race detector slows the property tests about tenfold, so they run fewer
// random inputs (the full set runs without -race).
const raceEnabled = true
