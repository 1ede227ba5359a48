package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmbot/llmbot/internal/watch"
)

// ErrFenced is Fence's answer for an answer this replica may no longer write: its liveness lapsed, and
// meanwhile another replica adopted the answer (or it was closed).
var ErrFenced = errors.New("state: this replica was taken for dead; another replica owns the answer now")

// fencePoll is how often Fence looks whether the liveness was renewed.
const fencePoll = 100 * time.Millisecond

// Self-fencing. Another replica adopts an answer once its owner's liveness key has expired (aliveTTL
// after the owner's last heartbeat). A replica cut off from Redis must therefore stop writing its
// answers before that can happen: Fence holds a write back while the last heartbeat that reached
// Redis is half the TTL old or older, until one does again. A write already on its way then has the
// other half to land; the adopter waits for an answer's messages to be quiet for a TTL before it
// closes them (handlers), so such a write never lands over its note.
//
// When the liveness has lapsed (a heartbeat reached Redis more than the TTL after the previous one),
// another replica may have adopted the answer meanwhile: its writes go on only if the journal still
// names this replica as its owner, and adoption cannot happen any more once the heartbeat is back.

// beatAt records a heartbeat that reached Redis, begun at start: the liveness key lives aliveTTL from
// a moment after it. A heartbeat that comes more than the TTL after the previous one marks a lapse.
func (r *Redis) beatAt(start time.Time) {
	prev := r.beaten.Swap(start.UnixNano())
	if prev != 0 && start.Sub(time.Unix(0, prev)) > r.aliveTTL {
		r.lapsed.Store(start.UnixNano())
	}
}

// fresh reports whether the last heartbeat that reached Redis began less than half the TTL ago.
func (r *Redis) fresh() bool {
	b := r.beaten.Load()
	return b != 0 && time.Since(time.Unix(0, b)) < r.aliveTTL/2
}

// Fence waits until this replica may write to its answer id: at once while its liveness in Redis was
// renewed within half the TTL, else until a heartbeat renews it (or ctx ends: ctx's cause). After a
// lapse of the liveness it is ErrFenced unless the journal still names this replica as the answer's
// owner.
func (r *Redis) Fence(ctx context.Context, id string) error {
	for !r.fresh() {
		if err := watch.Sleep(ctx, fencePoll); err != nil {
			return fmt.Errorf("fence: %w", err)
		}
	}
	lapsed := r.lapsed.Load()
	if lapsed == 0 {
		return nil
	}
	if v, ok := r.owned.Load(id); ok && v.(int64) == lapsed {
		return nil
	}
	a, ok, err := r.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	if !ok || a.Owner != r.self {
		return ErrFenced
	}
	r.owned.Store(id, lapsed) // still ours: nobody can adopt it while the liveness is fresh
	return nil
}

// Fence of a Memory never waits: its liveness is a lock the kernel holds for the process.
func (m *Memory) Fence(context.Context, string) error { return nil }

// Fence is Redis's Fence for an answer whose record is in Redis. One opened while Redis could not be
// reached is in the local store, which no other replica sees: it is never fenced.
func (f *Fallback) Fence(ctx context.Context, id string) error {
	if f.primary.fresh() && f.primary.lapsed.Load() == 0 {
		return nil // the usual case, without a look at the local journal (a file read with STATE_DIR)
	}
	if _, local, err := f.local.Get(ctx, id); err == nil && local {
		return nil
	}
	return f.primary.Fence(ctx, id)
}
