package summarize

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// keptResult is a result shown privately to the person who asked for it (a /summarize summary),
// kept so that a button under it can post it to the channel. A button's value holds at most
// 2,000 characters, too few for the result, so the value names it (keptResults).
type keptResult struct {
	User    string // who asked: only they may post it
	Channel string // where it may be posted
	Post    string // the message to post (mrkdwn)
}

// Bounds of the kept results. A result is posted within minutes if at all; an hour leaves room
// for a meeting in between. Each holds one message (a few KB), so memory stays in the MB.
const (
	keptTTL = time.Hour
	keptMax = 1000
)

// keptResults holds results for at most ttl, at most max of them (the oldest goes first when
// full), each under a random id that is no use to guess. Safe for concurrent use.
type keptResults struct {
	ttl time.Duration
	max int

	mu    sync.Mutex
	m     map[string]keptEntry
	order []string // ids, oldest first (some may be gone from m)
}

type keptEntry struct {
	r   keptResult
	exp time.Time
}

func newKeptResults(max int, ttl time.Duration) *keptResults {
	return &keptResults{ttl: ttl, max: max, m: map[string]keptEntry{}}
}

// put keeps r and returns its id.
func (k *keptResults) put(r keptResult) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	id := hex.EncodeToString(b)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.putLocked(id, r, time.Now())
	return id
}

// putBack keeps r again under id (a post that failed: the person may try again), for a full ttl.
func (k *keptResults) putBack(id string, r keptResult) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.putLocked(id, r, time.Now())
}

func (k *keptResults) putLocked(id string, r keptResult, now time.Time) {
	k.pruneLocked(now)
	if _, ok := k.m[id]; !ok {
		k.order = append(k.order, id)
	}
	k.m[id] = keptEntry{r: r, exp: now.Add(k.ttl)}
	for len(k.m) > k.max {
		delete(k.m, k.order[0])
		k.order = k.order[1:]
	}
}

// pruneLocked drops expired results from the front of the order, and ids no longer kept.
func (k *keptResults) pruneLocked(now time.Time) {
	for len(k.order) > 0 {
		e, ok := k.m[k.order[0]]
		if ok && now.Before(e.exp) {
			return
		}
		delete(k.m, k.order[0])
		k.order = k.order[1:]
	}
}

// get returns the result kept under id, if it has not expired.
func (k *keptResults) get(id string) (keptResult, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[id]
	if !ok || !time.Now().Before(e.exp) {
		return keptResult{}, false
	}
	return e.r, true
}

// take returns the result kept under id and forgets it: of two clicks at once, one gets it.
func (k *keptResults) take(id string) (keptResult, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[id]
	delete(k.m, id)
	if !ok || !time.Now().Before(e.exp) {
		return keptResult{}, false
	}
	return e.r, true
}
