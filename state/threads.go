package state

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The thread stores hold the bot's short-lived copy of the threads it takes part in (package threads
// decides what goes in and when an entry is trusted). An entry is one thread: its messages by ts, each
// as the caller's bytes (a body and a mark, kept apart so that an event without a mark leaves the mark
// a write recorded), and what the entry knows of itself:
//
//	epoch  the store's epoch when the entry was begun: a later Bump makes it stale for the reader
//	gen    who is filling it (Begin): a Fill of an older Begin is refused
//	root   the ts always kept (a thread's parent; "" for a DM's top level)
//	from   the oldest ts kept after the root: older ones were left out, and changes to them are ignored
//	done   filled: what the read returned is in, and every change applied since Begin
//	left   how many messages were left out (by the read, and by trimming to the byte bound)
//
// Three stores have the same behaviour (one contract test runs against them): MemoryThreads (one
// process), RedisThreads (one hash per thread, expiring) and FallbackThreads (Redis while it answers;
// while it does not, nothing is held, and every read is a miss).

// ThreadLimits bound a thread store.
type ThreadLimits struct {
	TTL time.Duration // an entry expires this long after its last change
	// Bytes bounds one entry (the bytes of its messages' bodies and marks): past it, the oldest
	// messages after the root are dropped, the newest always kept.
	Bytes int
	// Entries and Total bound how many entries are held and the bytes of them all (Total 0:
	// Entries×Bytes): past either, the least recently changed entries are dropped (the one just
	// changed is kept, alone over Total as it may be).
	Entries int
	Total   int
}

// ThreadMessage is one message of an entry.
type ThreadMessage struct {
	TS   string
	Body []byte // the message without its mark
	Mark []byte // its mark (empty: none)
}

// ThreadOpKind is what a ThreadOp does.
type ThreadOpKind byte

const (
	// ThreadPut puts a message (as an event showed it, or as the bot wrote it): its body replaces
	// the one held, and its mark too when it has one. One without a mark leaves the mark held, as
	// Slack does: an edit without metadata keeps the message's, and Slack's events do not carry it.
	ThreadPut ThreadOpKind = 'p'
	// ThreadDelete removes a message, for good: no later op or fill brings it back.
	ThreadDelete ThreadOpKind = 'x'
)

// ThreadOp is one change to an entry.
type ThreadOp struct {
	Kind ThreadOpKind
	ThreadMessage
}

// ThreadEntry is what Load returns.
type ThreadEntry struct {
	Epoch    int64 // when it was begun
	Current  int64 // the store's epoch now
	Done     bool
	LeftOut  int
	Messages []ThreadMessage // oldest first
}

// errThreadLimits is a store made with limits that hold nothing.
func checkThreadLimits(l ThreadLimits) error {
	if l.TTL <= 0 || l.Bytes <= 0 || l.Entries <= 0 {
		return fmt.Errorf("thread limits %+v: %w", l, errInvalid)
	}
	return nil
}

// tsBefore orders Slack timestamps ("1700000000.000100"): by length first, so that it holds for
// any number of digits of the seconds, then by their text. The Lua scripts order them the same way.
func tsBefore(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// MemoryThreads is a thread store in this process's memory. Safe for concurrent use.
type MemoryThreads struct {
	lim ThreadLimits

	mu      sync.Mutex
	epoch   int64
	entries map[string]*memThread
	bytes   int // of every entry
	// summaries are the long threads' summaries (summaries.go), at most Entries.
	summaries map[string]memSummary
}

type memThread struct {
	epoch            int64
	gen, root, from  string
	done             bool
	left, bytes      int
	changed, expires time.Time
	msgs             map[string]ThreadMessage
	deleted          map[string]bool
}

// NewMemoryThreads returns an empty store with the limits lim.
func NewMemoryThreads(lim ThreadLimits) (*MemoryThreads, error) {
	if err := checkThreadLimits(lim); err != nil {
		return nil, err
	}
	if lim.Total <= 0 {
		lim.Total = lim.Entries * lim.Bytes
	}
	return &MemoryThreads{lim: lim, entries: make(map[string]*memThread)}, nil
}

// Bump makes every entry begun before it stale, and returns the new epoch.
func (m *MemoryThreads) Bump(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch++
	return m.epoch, nil
}

// Begin starts entry key afresh (what it held is dropped), with root kept whatever its age, as gen's
// to fill, of the epoch now. With onlyNew, an entry held is left as it is, and Begin reports false.
func (m *MemoryThreads) Begin(_ context.Context, key, root, gen string, onlyNew bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if onlyNew && m.live(key) != nil {
		return false, nil
	}
	m.drop(key)
	m.entries[key] = &memThread{epoch: m.epoch, gen: gen, root: root, changed: now, expires: now.Add(m.lim.TTL),
		msgs: make(map[string]ThreadMessage), deleted: make(map[string]bool)}
	m.evict(key, now)
	return true, nil
}

// Fill puts msgs into entry key if gen began it last (else it returns false): a message an op put or
// deleted since Begin stays as the op left it. Then the entry is done, leftOut more were left out, and
// when some were, the oldest of msgs after the root is where the entry starts.
func (m *MemoryThreads) Fill(_ context.Context, key, gen string, leftOut int, msgs []ThreadMessage) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(key)
	if e == nil || e.gen != gen {
		return false, nil
	}
	before := e.bytes
	for _, msg := range msgs {
		if _, ok := e.msgs[msg.TS]; ok || e.deleted[msg.TS] {
			continue
		}
		e.msgs[msg.TS] = msg
		e.bytes += len(msg.Body) + len(msg.Mark)
	}
	e.done, e.left = true, e.left+leftOut
	if leftOut > 0 {
		e.startAt(oldestAfter(msgs, e.root))
	}
	e.trim(m.lim.Bytes)
	m.changed(key, e, before)
	return true, nil
}

// Apply makes ops in entry key, in order, if it is held; a thread not held is left alone.
func (m *MemoryThreads) Apply(_ context.Context, key string, ops []ThreadOp) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(key)
	if e == nil {
		return nil
	}
	before := e.bytes
	for _, op := range ops {
		e.apply(op)
	}
	e.trim(m.lim.Bytes)
	m.changed(key, e, before)
	return nil
}

// Load returns entry key (false: not held).
func (m *MemoryThreads) Load(_ context.Context, key string) (ThreadEntry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.live(key)
	if e == nil {
		return ThreadEntry{}, false, nil
	}
	out := ThreadEntry{Epoch: e.epoch, Current: m.epoch, Done: e.done, LeftOut: e.left,
		Messages: make([]ThreadMessage, 0, len(e.msgs))}
	for _, msg := range e.msgs {
		out.Messages = append(out.Messages, msg)
	}
	sortThread(out.Messages)
	return out, true, nil
}

// live is entry key unless it expired (then it is dropped). m.mu is held.
func (m *MemoryThreads) live(key string) *memThread {
	e := m.entries[key]
	if e != nil && !time.Now().Before(e.expires) {
		m.drop(key)
		return nil
	}
	return e
}

// drop forgets entry key. m.mu is held.
func (m *MemoryThreads) drop(key string) {
	if e := m.entries[key]; e != nil {
		m.bytes -= e.bytes
		delete(m.entries, key)
	}
}

// changed accounts for a change of entry key, which held before bytes. m.mu is held.
func (m *MemoryThreads) changed(key string, e *memThread, before int) {
	now := time.Now()
	e.changed, e.expires = now, now.Add(m.lim.TTL)
	m.bytes += e.bytes - before
	m.evict(key, now)
}

// evict drops the expired entries, then the least recently changed but keep while there are too
// many or they hold too much. m.mu is held.
func (m *MemoryThreads) evict(keep string, now time.Time) {
	for k, e := range m.entries {
		if !now.Before(e.expires) {
			m.drop(k)
		}
	}
	for len(m.entries) > 1 && (len(m.entries) > m.lim.Entries || m.bytes > m.lim.Total) {
		oldest := ""
		for k, e := range m.entries {
			if k != keep && (oldest == "" || e.changed.Before(m.entries[oldest].changed)) {
				oldest = k
			}
		}
		m.drop(oldest)
	}
}

// apply makes op. A ts left out (before from) or deleted is not put again.
func (e *memThread) apply(op ThreadOp) {
	ts := op.TS
	if e.leftOut(ts) {
		return
	}
	old, held := e.msgs[ts]
	switch {
	case op.Kind == ThreadDelete:
		e.deleted[ts] = true
		if held {
			e.bytes -= len(old.Body) + len(old.Mark)
			delete(e.msgs, ts)
		}
		return
	case e.deleted[ts]:
		return
	}
	next := ThreadMessage{TS: ts, Body: op.Body, Mark: op.Mark}
	if len(op.Mark) == 0 {
		next.Mark = old.Mark
	}
	e.bytes += len(next.Body) + len(next.Mark) - len(old.Body) - len(old.Mark)
	e.msgs[ts] = next
}

// leftOut reports whether ts is before where the entry starts (and no root).
func (e *memThread) leftOut(ts string) bool {
	return ts != e.root && e.from != "" && tsBefore(ts, e.from)
}

// startAt makes the entry start at ts (""; nothing): the messages before it but the root go.
func (e *memThread) startAt(ts string) {
	if ts == "" {
		return
	}
	e.from = ts
	for t, msg := range e.msgs {
		if e.leftOut(t) {
			e.bytes -= len(msg.Body) + len(msg.Mark)
			delete(e.msgs, t)
		}
	}
}

// trim drops the oldest messages after the root until the entry holds at most bound bytes, the
// newest always kept, and counts them as left out.
func (e *memThread) trim(bound int) {
	if e.bytes <= bound {
		return
	}
	var order []string
	for ts := range e.msgs {
		if ts != e.root {
			order = append(order, ts)
		}
	}
	slices.SortFunc(order, compareTS)
	for i := 0; i < len(order)-1 && e.bytes > bound; i++ {
		msg := e.msgs[order[i]]
		e.bytes -= len(msg.Body) + len(msg.Mark)
		delete(e.msgs, order[i])
		e.left++
		e.from = order[i+1]
	}
}

// oldestAfter is the oldest ts of msgs but root ("": none).
func oldestAfter(msgs []ThreadMessage, root string) string {
	oldest := ""
	for _, m := range msgs {
		if m.TS != root && (oldest == "" || tsBefore(m.TS, oldest)) {
			oldest = m.TS
		}
	}
	return oldest
}

func compareTS(a, b string) int {
	switch {
	case tsBefore(a, b):
		return -1
	case tsBefore(b, a):
		return 1
	}
	return 0
}

// sortThread orders msgs oldest first.
func sortThread(msgs []ThreadMessage) {
	slices.SortFunc(msgs, func(a, b ThreadMessage) int { return compareTS(a.TS, b.TS) })
}
