package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmbot/llmbot/internal/watch"
)

// ErrFenced is Fence's answer for an answer this replica may no longer write: its liveness lapsed, and
// meanwhile another replica adopted the answer.
var ErrFenced = errors.New("state: this replica was taken for dead; another replica owns the answer now")

// ErrNotRenewed is Fence's answer when its ctx's deadline passed while it waited for this replica's
// liveness to be renewed. It is not context.DeadlineExceeded on purpose: a caller that reads that
// as "Slack may have carried the write out" would be wrong, since nothing was sent.
var ErrNotRenewed = errors.New("state: this replica's liveness in Redis was not renewed in time; nothing was written")

// fencePoll is how often Fence looks whether the liveness was renewed.
const fencePoll = 100 * time.Millisecond

// Self-fencing. Another replica adopts an answer once its owner's liveness key has expired (aliveTTL
// after the owner's last heartbeat landed). A replica cut off from Redis must therefore stop writing its
// answers before that can happen: Fence holds a write back while the last heartbeat that reached
// Redis began half the TTL ago or longer, until one does again, and gives the write that moment as its
// deadline, so a write cannot land after the liveness key could have expired. The adopter waits for an
// answer's messages to be quiet for a TTL before it closes them (handlers).
//
// When the liveness has lapsed (a heartbeat found the key gone, or landed more than the TTL after the
// previous one began), another replica may have adopted any answer open here meanwhile: each of them
// is checked once, at its next write. It is fenced (ErrFenced) if its record names another replica, or
// is gone while an adopter's tombstone says it was adopted; a record that is simply gone (Redis
// restarted without its data, or lost it to eviction or a failover) is opened again, so that the
// answer goes on and stays recoverable. Once every answer is checked, the fast path is back.

// fenceBook is what Fence knows of this replica's answers in Redis: those open (as opened, to open
// them again when Redis lost them), those to check after a lapse, and those found adopted.
type fenceBook struct {
	mu        sync.Mutex
	open      map[string]Answer
	unchecked map[string]bool
	lost      map[string]bool
}

func (b *fenceBook) opened(a Answer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open, b.unchecked, b.lost = map[string]Answer{}, map[string]bool{}, map[string]bool{}
	}
	b.open[a.ID] = a
	delete(b.unchecked, a.ID) // its record names this replica now
	delete(b.lost, a.ID)
}

func (b *fenceBook) closed(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, id)
	delete(b.unchecked, id)
	delete(b.lost, id)
}

// lapse marks every open answer to be checked before its next write.
func (b *fenceBook) lapse() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.open {
		b.unchecked[id] = true
	}
}

// state reports whether id is to be checked, found adopted, and its record as opened.
func (b *fenceBook) state(id string) (unchecked, lost bool, a Answer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unchecked[id], b.lost[id], b.open[id]
}

// settle records the check of id: still this replica's, or lost to another.
func (b *fenceBook) settle(id string, lost bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.unchecked, id)
	if lost {
		b.lost[id] = true
		delete(b.open, id)
	}
}

// quiet reports whether no answer waits for a check or was found adopted.
func (b *fenceBook) quiet() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.unchecked) == 0 && len(b.lost) == 0
}

// beatAt records a heartbeat that began at start and reached Redis by end; missing: it found this
// replica's liveness key gone. The key lives aliveTTL from a moment between start and end, so the
// liveness lapsed if the key was gone, or if this beat may have landed more than the TTL after the
// previous one began. The lapse is recorded before the beat: a Fence that sees this beat's freshness
// sees the lapse too.
func (r *Redis) beatAt(start, end time.Time, missing bool) {
	prev := r.beaten.Load()
	if prev != 0 && (missing || end.Sub(time.Unix(0, prev)) > r.aliveTTL) {
		r.book.lapse()
	}
	r.beaten.Store(start.UnixNano())
}

// freshUntil is when the last heartbeat that reached Redis stops counting as fresh: half the TTL after
// it began (zero: none did yet). A write allowed by the fence must have landed by then.
func (r *Redis) freshUntil() time.Time {
	b := r.beaten.Load()
	if b == 0 {
		return time.Time{}
	}
	return time.Unix(0, b).Add(r.aliveTTL / 2)
}

// fresh reports whether the last heartbeat that reached Redis began less than half the TTL ago.
func (r *Redis) fresh() bool {
	return time.Now().Before(r.freshUntil())
}

// Fence waits until this replica may write to its answer id, and returns the deadline of that write:
// at once while its liveness in Redis was renewed within half the TTL, else until a heartbeat renews
// it (or ctx ends: ErrNotRenewed for its deadline, else its cause). After a lapse of the liveness the
// answer is checked once (see above); ErrFenced when another replica adopted it.
func (j RedisAnswers) Fence(ctx context.Context, id string) (time.Time, error) {
	r := j.r
	for {
		for !r.fresh() {
			if err := watch.Sleep(ctx, fencePoll); err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					return time.Time{}, fmt.Errorf("fence: %w", ErrNotRenewed)
				}
				return time.Time{}, fmt.Errorf("fence: %w", err)
			}
		}
		until := r.freshUntil()
		unchecked, lost, opened := r.book.state(id)
		switch {
		case lost:
			return time.Time{}, ErrFenced
		case !unchecked:
			return until, nil
		}
		if err := j.check(ctx, id, opened); err != nil {
			return time.Time{}, err
		}
		// The check took a while: the liveness must still be fresh, and the deadline is the new one.
	}
}

// check looks, after a lapse, whether answer id (opened as a) is still this replica's, and records
// what it found.
func (j RedisAnswers) check(ctx context.Context, id string, a Answer) error {
	r := j.r
	rec, ok, err := j.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	switch {
	case ok && rec.Owner == r.self:
		r.book.settle(id, false)
		return nil
	case ok:
		r.book.settle(id, true)
		return ErrFenced
	}
	adopter, err := r.c.Get(ctx, r.key("adopted:", id)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("fence: %w", err)
	}
	if adopter != "" && adopter != r.self {
		r.book.settle(id, true) // adopted, closed by its adopter
		return ErrFenced
	}
	// Redis lost the record: nobody could adopt it, and without it nobody could recover the answer.
	if err := j.Open(ctx, a); err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	r.book.settle(id, false)
	return nil
}

// Fence of a Memory never waits and has no deadline: its liveness is a lock the kernel holds for the
// process.
func (MemoryAnswers) Fence(context.Context, string) (time.Time, error) { return time.Time{}, nil }

// Fence is Redis's Fence for an answer whose record is in Redis. One opened while Redis could not be
// reached is in the local store, which no other replica sees: it is never fenced.
func (j FallbackAnswers) Fence(ctx context.Context, id string) (time.Time, error) {
	f := j.f
	if until := f.primary.freshUntil(); time.Now().Before(until) && f.primary.book.quiet() {
		return until, nil // the usual case, without a look at the local journal (a file read with STATE_DIR)
	}
	if _, local, err := f.local.Answers().Get(ctx, id); err == nil && local {
		return time.Time{}, nil
	}
	return f.primary.Answers().Fence(ctx, id)
}
