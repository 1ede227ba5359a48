//go:build !race

package slackmd

const raceEnabled = false
