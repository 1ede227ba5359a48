//go:build !linux

package nodump

// Set does nothing: only Linux has prctl, and the bot is built for Linux containers.
func Set() error { return nil }

// Dumpable reports true: nothing outside Linux makes a process non-dumpable here.
func Dumpable() (bool, error) { return true, nil }
