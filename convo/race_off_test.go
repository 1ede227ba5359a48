//go:build !race

package convo

const raceEnabled = false
