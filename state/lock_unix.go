//go:build unix

package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// holdAttempts bounds holdLock's retries when its file is removed under it (see holdLock).
const holdAttempts = 3

// holdLock creates path and holds an exclusive flock on it until the file is closed: the replica it names is
// alive while the lock is held, and the kernel lets it go when the process dies, however it dies.
func holdLock(path string) (*os.File, error) {
	for range holdAttempts {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		// Between the create and the flock, another process may have found the file free, taken it for a
		// dead replica's and removed it: a lock on a removed file would keep nobody from thinking us dead.
		held, err1 := f.Stat()
		named, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return f, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("lock %s: removed under us %d times", path, holdAttempts)
}

// lockHeld reports whether some process holds path's lock. A free lock file is a dead replica's: it is removed.
// The check takes a shared lock, so checkers never see each other as the replica.
func lockHeld(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = flock(f, syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove dead replica's lock: %w", err)
	}
	return false, nil
}

// lockWait takes f's exclusive lock, waiting for it (its holders hold it for one journal operation).
func lockWait(f *os.File) error { return flock(f, syscall.LOCK_EX) }

func unlock(f *os.File) error { return flock(f, syscall.LOCK_UN) }

// flock is syscall.Flock, repeated when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
