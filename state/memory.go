package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// sweepEvery is how often expired keys, leases, buckets and pauses are dropped from a Memory's maps (on a
// write), so a long-running process does not keep every claim it ever made.
const sweepEvery = time.Minute

// Memory is the state of a single process. Without a directory everything is in memory and only this
// replica exists. With one, the journal of open answers is kept there and this replica's liveness is an flock
// (see the package comment), so the answers of a process that crashed are orphans to the next process on the
// same directory. Safe for concurrent use.
type Memory struct {
	self string
	dir  string
	log  *zap.Logger
	jr   journal
	// closeDir releases the journal directory's lock file: nothing to do without a directory.
	closeDir func() error

	mu      sync.Mutex
	keys    map[string]entry     // "claim:", "mark:", "count:" + the caller's key
	leases  map[string]time.Time // key -> safety expiry; the holder is always self
	buckets map[string]time.Time // name -> theoretical arrival time of the next token (GCRA)
	pauses  map[string]time.Time // name -> end of its pause
	swept   time.Time
	inbox   [][]byte
	arrived chan struct{} // closed (and replaced) when a message is queued

	tallies        map[string]*group            // group -> its counters (tally.go)
	talliesChanged bool                         // since the directory's file was written
	records        map[string]map[string][]byte // collection -> id -> value (Records)
}

// entry is a key with a value and an expiry.
type entry struct {
	n     int64
	until time.Time
}

// NewMemory returns the state of process self. With dir "" the journal is in memory only; otherwise the
// journal and the liveness locks live in dir, created (0700) if missing.
func NewMemory(self, dir string, log *zap.Logger) (*Memory, error) {
	if !validReplica(self) {
		return nil, fmt.Errorf("new memory: replica id %q: %w", self, errInvalid)
	}
	if log == nil {
		log = zap.NewNop()
	}
	m := &Memory{
		self: self, dir: dir, log: log,
		keys: map[string]entry{}, leases: map[string]time.Time{},
		buckets: map[string]time.Time{}, pauses: map[string]time.Time{},
		arrived: make(chan struct{}), closeDir: func() error { return nil },
		tallies: map[string]*group{},
		records: map[string]map[string][]byte{},
	}
	if dir == "" {
		m.jr = newMapJournal()
		return m, nil
	}
	for _, d := range []string{dir, filepath.Join(dir, "answers"), filepath.Join(dir, "replicas")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("new memory: %w", err)
		}
	}
	jr, err := openDirJournal(dir, log)
	if err != nil {
		return nil, fmt.Errorf("new memory: %w", err)
	}
	m.jr, m.closeDir = jr, jr.close
	m.loadTallies()
	return m, nil
}

// Self is this replica's id.
func (m *Memory) Self() string { return m.self }

// Run keeps this replica alive until ctx ends: with a directory it holds replicas/<self>.lock, removes
// the lock files of replicas that are gone, and writes the tallies there every minute and at the end.
// Then it removes its own lock file and returns nil.
func (m *Memory) Run(ctx context.Context) error {
	if m.dir == "" {
		<-ctx.Done()
		return nil
	}
	path := m.replicaLock(m.self)
	f, err := holdLock(path)
	if err != nil {
		return fmt.Errorf("memory run: %w", err)
	}
	m.sweepReplicas()
	m.keepTallies(ctx)
	// Removed before it is unlocked, so nobody can find the file free and take it for a dead replica's.
	if err := os.Remove(path); err != nil {
		m.log.Warn("state: removing this replica's lock file", zap.Error(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("memory run: release lock: %w", err)
	}
	return nil
}

// Close releases the journal directory's lock file, once Run has returned.
func (m *Memory) Close() error { return m.closeDir() }

// Claim is true the first time key is claimed within ttl.
func (k MemoryKeys) Claim(_ context.Context, key string, ttl time.Duration) (bool, error) {
	m := k.m
	if err := positive("claim", ttl); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.writeTime()
	if e, ok := m.keys["claim:"+key]; ok && now.Before(e.until) {
		return false, nil
	}
	m.keys["claim:"+key] = entry{n: 1, until: now.Add(ttl)}
	return true, nil
}

// Mark sets a flag on key for ttl.
func (k MemoryKeys) Mark(_ context.Context, key string, ttl time.Duration) error {
	m := k.m
	if err := positive("mark", ttl); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys["mark:"+key] = entry{n: 1, until: m.writeTime().Add(ttl)}
	return nil
}

// Marked reports whether key's flag is set.
func (k MemoryKeys) Marked(_ context.Context, key string) (bool, error) {
	m := k.m
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.keys["mark:"+key]
	return ok && time.Now().Before(e.until), nil
}

// Add adds delta to counter key and returns its new value; ttl is set when the key is created.
func (k MemoryKeys) Add(_ context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	m := k.m
	if err := positive("add", ttl); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.writeTime()
	e, ok := m.keys["count:"+key]
	if !ok || !now.Before(e.until) {
		e = entry{until: now.Add(ttl)}
	}
	e.n += delta
	m.keys["count:"+key] = e
	return e.n, nil
}

// Take takes a token of bucket name if one is there now and returns 0, or returns how long until one will be.
func (k MemoryKeys) Take(_ context.Context, name string, perMinute float64, burst int) (time.Duration, error) {
	m := k.m
	interval, err := emission(perMinute, burst)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.writeTime()
	if p, ok := m.pauses[name]; ok && now.Before(p) {
		return p.Sub(now), nil
	}
	tat := m.buckets[name]
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	if allow := next.Add(-time.Duration(burst) * interval); allow.After(now) {
		return allow.Sub(now), nil
	}
	m.buckets[name] = next
	return 0, nil
}

// Pause stops bucket name until until; an earlier pause than the one in force is ignored.
func (k MemoryKeys) Pause(_ context.Context, name string, until time.Time) error {
	m := k.m
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.writeTime()
	if d := time.Until(until); d > 0 && now.Add(d).After(m.pauses[name]) {
		m.pauses[name] = now.Add(d)
	}
	return nil
}

// Lease takes key for this replica, the only one a Memory knows, and returns Self().
func (m *Memory) Lease(_ context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.leases[key] = m.writeTime().Add(LeaseTTL)
	return m.self, nil
}

// Holder returns the replica holding the lease key, "" when none does: a Memory knows only itself.
func (m *Memory) Holder(_ context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if until, ok := m.leases[key]; ok && m.writeTime().Before(until) {
		return m.self, nil
	}
	return "", nil
}

// Release frees key.
func (m *Memory) Release(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.leases, key)
	return nil
}

// Alive reports whether replica is alive: itself always; another only with a directory, while it holds its
// lock file (a dead replica's lock file is removed on the way).
func (m *Memory) Alive(_ context.Context, replica string) (bool, error) {
	if replica == m.self {
		return true, nil
	}
	if m.dir == "" || !validReplica(replica) {
		return false, nil
	}
	alive, err := lockHeld(m.replicaLock(replica))
	if err != nil {
		return false, fmt.Errorf("alive: %w", err)
	}
	return alive, nil
}

// Open records a as in progress, owned by this replica (an answer with the same ID is replaced).
func (j MemoryAnswers) Open(_ context.Context, a Answer) error {
	m := j.m
	a, err := opened(a, m.self)
	if err != nil {
		return err
	}
	if err := m.jr.put(a); err != nil {
		return fmt.Errorf("open answer: %w", err)
	}
	return nil
}

// AddMessage appends ts to the messages of answer id, once. An answer that is not open is left alone.
func (j MemoryAnswers) AddMessage(_ context.Context, id, ts string) error {
	m := j.m
	if err := validTS(ts); err != nil {
		return err
	}
	_, _, err := m.jr.update(id, func(a *Answer) (bool, error) {
		if expired(*a) || slices.Contains(a.Messages, ts) {
			return false, nil
		}
		a.Messages = append(a.Messages, ts)
		a.Updated = now()
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("add message: %w", err)
	}
	return nil
}

// CloseAnswer removes answer id from the journal unless another replica owns it; closing an answer
// that is not open does nothing.
func (j MemoryAnswers) CloseAnswer(_ context.Context, id string) error {
	m := j.m
	a, ok, err := m.jr.get(id)
	if err != nil {
		return fmt.Errorf("close answer: %w", err)
	}
	if ok && a.Owner != m.self {
		return nil // adopted, or opened again, by someone else
	}
	if err := m.jr.remove(id); err != nil {
		return fmt.Errorf("close answer: %w", err)
	}
	return nil
}

// Abandon hands answer id, if this replica owns it, over for adoption (see Redis.Abandon).
func (j MemoryAnswers) Abandon(_ context.Context, id string) error {
	m := j.m
	_, _, err := m.jr.update(id, func(a *Answer) (bool, error) {
		if a.Owner != m.self {
			return false, nil
		}
		a.Owner, a.Updated = "", now()
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("abandon answer: %w", err)
	}
	return nil
}

// Get returns open answer id.
func (j MemoryAnswers) Get(_ context.Context, id string) (Answer, bool, error) {
	m := j.m
	a, ok, err := m.jr.get(id)
	if err != nil {
		return Answer{}, false, fmt.Errorf("get answer: %w", err)
	}
	if !ok || expired(a) {
		return Answer{}, false, nil
	}
	return a, true, nil
}

// Orphans returns the open answers whose owner is not alive (never this replica's), oldest first.
func (j MemoryAnswers) Orphans(ctx context.Context) ([]Answer, error) {
	m := j.m
	all, err := m.jr.all()
	if err != nil {
		return nil, fmt.Errorf("orphans: %w", err)
	}
	var out []Answer
	for _, a := range all {
		if a.Owner == m.self || expired(a) {
			continue
		}
		alive, err := m.Alive(ctx, a.Owner)
		if err != nil {
			return nil, fmt.Errorf("orphans: %w", err)
		}
		if !alive {
			out = append(out, a)
		}
	}
	sortAnswers(out)
	return out, nil
}

// Adopt makes this replica the owner of orphan id; ok is false when it is not open or its owner is alive.
func (j MemoryAnswers) Adopt(ctx context.Context, id string) (Answer, bool, error) {
	m := j.m
	a, ok, err := m.jr.update(id, func(a *Answer) (bool, error) {
		if expired(*a) || a.Owner == m.self {
			return false, nil
		}
		alive, err := m.Alive(ctx, a.Owner)
		if err != nil || alive {
			return false, err
		}
		a.Owner, a.Updated = m.self, now()
		return true, nil
	})
	if err != nil {
		return Answer{}, false, fmt.Errorf("adopt: %w", err)
	}
	if !ok {
		return Answer{}, false, nil
	}
	return a, true, nil
}

// Send queues msg for this replica; any other replica is ErrNoReplica.
func (i MemoryInbox) Send(_ context.Context, replica string, msg []byte) error {
	m := i.m
	if replica != m.self {
		return ErrNoReplica
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inbox = append(m.inbox, slices.Clone(msg))
	close(m.arrived)
	m.arrived = make(chan struct{})
	return nil
}

// Receive returns the next message for this replica, waiting for one until ctx ends.
func (i MemoryInbox) Receive(ctx context.Context) ([]byte, error) {
	m := i.m
	for {
		m.mu.Lock()
		if len(m.inbox) > 0 {
			msg := m.inbox[0]
			m.inbox[0] = nil
			m.inbox = m.inbox[1:]
			m.mu.Unlock()
			return msg, nil
		}
		arrived := m.arrived
		m.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// writeTime is the time of a write, which sweeps the maps now and then. Call it with m.mu held.
func (m *Memory) writeTime() time.Time {
	now := time.Now()
	if now.Sub(m.swept) < sweepEvery {
		return now
	}
	m.swept = now
	for k, e := range m.keys {
		if !now.Before(e.until) {
			delete(m.keys, k)
		}
	}
	for _, times := range []map[string]time.Time{m.leases, m.buckets, m.pauses} {
		for k, t := range times {
			if !now.Before(t) {
				delete(times, k)
			}
		}
	}
	return now
}

func (m *Memory) replicaLock(replica string) string {
	return filepath.Join(m.dir, "replicas", replica+".lock")
}

// sweepReplicas removes the lock files of replicas that are gone (lockHeld removes a free one).
func (m *Memory) sweepReplicas() {
	entries, err := os.ReadDir(filepath.Join(m.dir, "replicas"))
	if err != nil {
		m.log.Warn("state: listing replica lock files", zap.Error(err))
		return
	}
	for _, e := range entries {
		replica, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || replica == m.self {
			continue
		}
		if _, err := lockHeld(m.replicaLock(replica)); err != nil {
			m.log.Warn("state: checking a replica's lock file", zap.String("replica", replica), zap.Error(err))
		}
	}
}

// validReplica keeps a replica id from naming a path outside the replicas directory.
func validReplica(replica string) bool {
	return replica != "" && !strings.ContainsAny(replica, `/\`) && replica != "." && replica != ".."
}
