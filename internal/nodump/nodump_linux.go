//go:build linux

package nodump

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Set makes the process non-dumpable (prctl PR_SET_DUMPABLE 0). It holds for the process's
// life (the programs it starts are dumpable again after their exec, which does not matter here:
// they do not hold its secrets).
func Set() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_DUMPABLE: %w", err)
	}
	return nil
}

// Dumpable reports whether the process is dumpable (prctl PR_GET_DUMPABLE).
func Dumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		return false, fmt.Errorf("prctl PR_GET_DUMPABLE: %w", err)
	}
	return v != 0, nil
}
