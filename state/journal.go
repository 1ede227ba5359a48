package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
)

// journal is where a Memory keeps its open answers: a map, or a directory shared by the processes using it.
type journal interface {
	put(a Answer) error
	// update calls fn on answer id, atomically for every user of the journal, and stores the answer if fn
	// returns true. It returns the answer as stored and whether it changed; an absent id is (false, nil).
	update(id string, fn func(a *Answer) (bool, error)) (Answer, bool, error)
	remove(id string) error
	get(id string) (Answer, bool, error)
	all() ([]Answer, error)
}

// mapJournal is the journal of a Memory without a directory.
type mapJournal struct {
	mu sync.Mutex
	m  map[string]Answer
}

func newMapJournal() *mapJournal { return &mapJournal{m: map[string]Answer{}} }

func (j *mapJournal) put(a Answer) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	a.Messages = slices.Clone(a.Messages)
	j.m[a.ID] = a
	return nil
}

func (j *mapJournal) update(id string, fn func(a *Answer) (bool, error)) (Answer, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	a, ok := j.m[id]
	if !ok {
		return Answer{}, false, nil
	}
	a.Messages = slices.Clone(a.Messages)
	changed, err := fn(&a)
	if err != nil || !changed {
		return Answer{}, false, err
	}
	j.m[id] = a
	a.Messages = slices.Clone(a.Messages)
	return a, true, nil
}

func (j *mapJournal) remove(id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.m, id)
	return nil
}

func (j *mapJournal) get(id string) (Answer, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	a, ok := j.m[id]
	a.Messages = slices.Clone(a.Messages)
	return a, ok, nil
}

func (j *mapJournal) all() ([]Answer, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Answer, 0, len(j.m))
	for _, a := range j.m {
		a.Messages = slices.Clone(a.Messages)
		out = append(out, a)
	}
	return out, nil
}

// dirJournal keeps one JSON file per answer under <dir>/answers, named by a hash of its id (ids hold
// slashes), each written whole (a temporary file renamed over it) so a crash never leaves half an answer.
// Every operation holds an flock on <dir>/journal.lock, so the processes sharing the directory (a restarted
// process and the one it replaces, or two tests) see each change whole: Adopt is atomic between them.
type dirJournal struct {
	dir string // <dir>/answers
	log *zap.Logger

	mu   sync.Mutex // the flock is per open file, shared by this process's goroutines: they take turns here
	lock *os.File
}

// tempPrefix starts the names of answers being written; all removes those a crash left behind.
const tempPrefix = ".tmp-"

func openDirJournal(dir string, log *zap.Logger) (*dirJournal, error) {
	f, err := os.OpenFile(filepath.Join(dir, "journal.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal lock: %w", err)
	}
	// Taken once now, so a system without flock fails here rather than at the first answer.
	if err := lockWait(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal lock: %w", err)
	}
	if err := unlock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal lock: %w", err)
	}
	return &dirJournal{dir: filepath.Join(dir, "answers"), log: log, lock: f}, nil
}

// locked runs fn holding the journal's lock, in this process and between processes.
func (j *dirJournal) locked(fn func() error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := lockWait(j.lock); err != nil {
		return fmt.Errorf("journal lock: %w", err)
	}
	defer func() {
		if err := unlock(j.lock); err != nil {
			j.log.Warn("state: journal unlock", zap.Error(err))
		}
	}()
	return fn()
}

func (j *dirJournal) path(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(j.dir, hex.EncodeToString(sum[:16])+".json")
}

func (j *dirJournal) put(a Answer) error {
	return j.locked(func() error { return j.write(a) })
}

func (j *dirJournal) update(id string, fn func(a *Answer) (bool, error)) (Answer, bool, error) {
	var out Answer
	var changed bool
	err := j.locked(func() error {
		a, ok, err := j.read(j.path(id))
		if err != nil || !ok {
			return err
		}
		if changed, err = fn(&a); err != nil || !changed {
			return err
		}
		out = a
		return j.write(a)
	})
	if err != nil {
		return Answer{}, false, err
	}
	return out, changed, nil
}

func (j *dirJournal) remove(id string) error {
	return j.locked(func() error {
		if err := os.Remove(j.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}

func (j *dirJournal) get(id string) (Answer, bool, error) {
	var a Answer
	var ok bool
	err := j.locked(func() error {
		var err error
		a, ok, err = j.read(j.path(id))
		return err
	})
	return a, ok, err
}

func (j *dirJournal) all() ([]Answer, error) {
	var out []Answer
	err := j.locked(func() error {
		entries, err := os.ReadDir(j.dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			a, ok := j.entry(e.Name())
			if ok {
				out = append(out, a)
			}
		}
		return nil
	})
	return out, err
}

// entry reads one file of the answers directory for all: an answer, or nothing (a crash's temporary file is
// removed on the way, a damaged file is logged and left for a person to look at).
func (j *dirJournal) entry(name string) (Answer, bool) {
	path := filepath.Join(j.dir, name)
	if strings.HasPrefix(name, tempPrefix) {
		// Nobody is writing it: writers hold the journal lock, which the caller holds.
		if err := os.Remove(path); err != nil {
			j.log.Warn("state: removing a journal file left by a crash", zap.String("file", name), zap.Error(err))
		}
		return Answer{}, false
	}
	if !strings.HasSuffix(name, ".json") {
		return Answer{}, false
	}
	a, ok, err := j.read(path)
	if err != nil {
		j.log.Warn("state: skipping a journal file", zap.String("file", name), zap.Error(err))
		return Answer{}, false
	}
	return a, ok
}

func (j *dirJournal) close() error { return j.lock.Close() }

// read returns the answer in path; a missing file is (false, nil).
func (j *dirJournal) read(path string) (Answer, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Answer{}, false, nil
	}
	if err != nil {
		return Answer{}, false, err
	}
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		return Answer{}, false, fmt.Errorf("decode %s: %w", filepath.Base(path), err)
	}
	return a, true, nil
}

// write stores a whole: into a temporary file, synced, then renamed over the answer's file.
func (j *dirJournal) write(a Answer) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(j.dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), j.path(a.ID))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write answer: %w", err)
	}
	return nil
}
