package access

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DefaultQuotaUsers is how many people a Quota tracks per day when NewQuota is given 0.
const DefaultQuotaUsers = 50000

// Quota is a per-user daily /imagine quota. Days are UTC calendar days: every count starts
// again at 00:00 UTC. Counts live in memory, per process, unless the quota is shared (Share):
// then every replica counts in one place (Redis), and this process's memory counts only while
// that place cannot be reached.
//
// Memory is bounded: at most maxUsers people are tracked per day (about 100 bytes each). Beyond
// that, new people are let through uncounted rather than refused, so the bound can never
// lock anyone out; it takes that many distinct /imagine users in one day to reach it.
//
// Safe for concurrent use. Time is read with time.Now (fake in testing/synctest bubbles).
type Quota struct {
	limit    int
	maxUsers int
	shared   Counter // nil: counted here only

	mu   sync.Mutex
	day  time.Time      // the UTC day the counts are for (midnight)
	used map[string]int // user -> pictures taken today
}

// NewQuota returns a quota of limit pictures per person per day; limit <= 0 is unlimited.
// maxUsers bounds the people tracked per day; 0: DefaultQuotaUsers.
func NewQuota(limit, maxUsers int) *Quota {
	if maxUsers <= 0 {
		maxUsers = DefaultQuotaUsers
	}
	return &Quota{limit: limit, maxUsers: maxUsers}
}

// Limit returns the pictures allowed per person per day (0: unlimited).
func (q *Quota) Limit() int { return max(q.limit, 0) }

// Taken is a picture Take counted, to give back with Refund.
type Taken struct {
	user   string
	day    time.Time // the day it counted on; zero: nothing was counted
	shared string    // the shared counter's key it counted on; "": counted in memory
}

// Counter is a count shared by the replicas (the state package's Add): it adds delta to key and
// returns the new value; ttl is set when the key is created.
type Counter interface {
	Add(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error)
}

// sharedTimeout bounds one call to the shared counter. Take runs in the bot's event loop, so a
// slow Redis must not hold it for long; the state package gives up on Redis sooner (500 ms) and
// answers from memory, so this is a last resort.
const sharedTimeout = time.Second

// Share makes the replicas count pictures together in c. Call it before the quota is used.
func (q *Quota) Share(c Counter) { q.shared = c }

// takeShared counts one picture of user's in the shared counter. ok is false when the counter
// cannot be reached: the caller counts in memory instead.
func (q *Quota) takeShared(user string, now time.Time) (d Decision, t Taken, ok bool) {
	day := now.Truncate(24 * time.Hour)
	key := "imagine:" + day.Format(time.DateOnly) + ":" + user
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	n, err := q.shared.Add(ctx, key, 1, 48*time.Hour) // the day and the next: gone by then
	if err != nil {
		return Decision{}, Taken{}, false
	}
	if n > int64(q.limit) {
		uncount, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		_, _ = q.shared.Add(uncount, key, -1, 48*time.Hour) // not counted: refused
		q.mu.Lock()
		q.rollLocked(now)
		q.mu.Unlock()
		return Decision{Reason: ReasonQuota, Message: q.message(now)}, Taken{}, true
	}
	return allow, Taken{user: user, day: day, shared: key}, true
}

// Take uses one of user's pictures for today, if any is left. When none is, the Decision says so
// and when the quota starts again.
func (q *Quota) Take(user string) (Decision, Taken) {
	if q.limit <= 0 {
		return allow, Taken{}
	}
	now := time.Now().UTC()
	if q.shared != nil {
		if d, t, ok := q.takeShared(user, now); ok {
			return d, t
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rollLocked(now)
	n, tracked := q.used[user]
	switch {
	case n >= q.limit:
		return Decision{Reason: ReasonQuota, Message: q.message(now)}, Taken{}
	case !tracked && len(q.used) >= q.maxUsers:
		return allow, Taken{} // see the type's comment: bounded memory never refuses
	}
	q.used[user] = n + 1
	return allow, Taken{user: user, day: q.day}
}

// Refund gives back the picture t (the job failed or never ran). A refund after the day changed
// does nothing: the picture counted on a day that is over, and the new day's must stay.
func (q *Quota) Refund(t Taken) {
	if q.limit <= 0 || t.day.IsZero() {
		return
	}
	if t.shared != "" {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		defer cancel()
		_, _ = q.shared.Add(ctx, t.shared, -1, 48*time.Hour) // a lost refund costs one picture, not an error
		return
	}
	now := time.Now().UTC()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rollLocked(now)
	if !t.day.Equal(q.day) {
		return
	}
	switch n := q.used[t.user]; {
	case n > 1:
		q.used[t.user] = n - 1
	case n == 1:
		delete(q.used, t.user)
	}
}

// Remaining returns how many pictures user may still make today as counted in this process's
// memory (-1: unlimited); a shared quota counts elsewhere.
func (q *Quota) Remaining(user string) int {
	if q.limit <= 0 {
		return -1
	}
	now := time.Now().UTC()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rollLocked(now)
	return max(q.limit-q.used[user], 0)
}

// rollLocked starts a new day's counts when the UTC day changed. The old map is dropped, not
// cleared, so a busy day's memory is given back.
func (q *Quota) rollLocked(now time.Time) {
	day := now.Truncate(24 * time.Hour) // UTC midnight: Unix time has no leap seconds
	if q.used == nil || !day.Equal(q.day) {
		q.day = day
		q.used = make(map[string]int)
	}
}

func (q *Quota) message(now time.Time) string {
	left := q.day.Add(24 * time.Hour).Sub(now)
	pictures := "pictures"
	if q.limit == 1 {
		pictures = "picture"
	}
	return fmt.Sprintf("You've made your %d /imagine %s for today. You can make more in %s (at 00:00 UTC).",
		q.limit, pictures, roughly(left))
}

// roughly formats d for people: "3h 20m", "45m", "less than a minute".
func roughly(d time.Duration) string {
	d = d.Truncate(time.Minute)
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case h > 0 && m > 0:
		return fmt.Sprintf("%dh %dm", h, m)
	case h > 0:
		return fmt.Sprintf("%dh", h)
	case m > 0:
		return fmt.Sprintf("%dm", m)
	}
	return "less than a minute"
}
