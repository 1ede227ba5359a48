package bot

import (
	"context"
	"sync"

	"github.com/llmbot/llmbot/handlers"
)

// actives are the answers being written on this replica, by thread: what a Stop stops.
type actives struct {
	mu sync.Mutex
	m  map[string]activeReply // thread key -> the answer being written there
}

// activeReply is an answer in progress, for StopReply.
type activeReply struct {
	user   string // the asker: the only person who may stop it
	ts     string // the message answered
	cancel context.CancelCauseFunc
}

func newActives() *actives { return &actives{m: make(map[string]activeReply)} }

// set records the answer in progress on key (a zero activeReply: none).
func (a *actives) set(key string, r activeReply) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.cancel == nil {
		delete(a.m, key)
		return
	}
	a.m[key] = r
}

// stop is StopReply for the answer to the message ts ("": whichever runs in the thread), so a
// stale Stop button never stops a later answer in the same thread.
func (a *actives) stop(channel, threadTS, ts, user string) (bool, error) {
	a.mu.Lock()
	r, ok := a.m[threadKey(channel, threadTS)]
	a.mu.Unlock()
	switch {
	case !ok || (ts != "" && r.ts != ts):
		return false, nil
	case r.user != user:
		return false, ErrNotAsker
	}
	r.cancel(handlers.ErrStopped)
	return true, nil
}
