//go:build !unix

package state

import (
	"errors"
	"os"
)

// errNoFlock: a journal directory relies on flock, which only Unix systems have; elsewhere use a Memory
// without a directory, or Redis.
var errNoFlock = errors.New("a journal directory needs flock (Unix only)")

func holdLock(string) (*os.File, error) { return nil, errNoFlock }
func lockHeld(string) (bool, error)     { return false, errNoFlock }
func lockWait(*os.File) error           { return errNoFlock }
func unlock(*os.File) error             { return errNoFlock }
