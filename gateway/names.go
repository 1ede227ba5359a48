package gateway

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/internal/ttlcache"
	"github.com/llmbot/llmbot/pace"
)

// Names resolves user ids to display names (users.info) within the look-ups budget, remembering
// them for nameCacheTTL. One Names serves the use cases that show people's names (the answers and
// /summarize), so a name looked up for one is known to the other.
type Names struct {
	users     Users
	lookups   *pace.Bucket            // users.info (Budgets.Lookups)
	cache     *ttlcache.Cache[string] // user id -> display name
	botUserID string                  // convo names the bot itself
}

// How many names are remembered, and for how long: a name changes rarely, and a look-up that is not
// made costs a turn in the users.info budget.
const (
	nameCacheSize = 5000
	nameCacheTTL  = time.Hour
	// namesTimeout bounds one Resolve: a name is a nicety, and a busy look-up budget holds nobody
	// longer.
	namesTimeout = 5 * time.Second
)

// NewNames returns Names looking people up with u, paced by lookups (Budgets.Lookups; nil: a budget
// of its own), leaving the bot itself (botUserID) to convo.
func NewNames(u Users, lookups *pace.Bucket, botUserID string) *Names {
	if lookups == nil {
		lookups = pace.NewBucket(LookupsPerMinute*pace.RateMargin, LookupBurst)
	}
	return &Names{users: u, lookups: lookups, cache: ttlcache.New[string](nameCacheSize, nameCacheTTL), botUserID: botUserID}
}

// Resolve returns the display names of ids, from the cache or users.info (failures are left out: convo
// then shows the id).
func (n *Names) Resolve(ctx context.Context, log *zap.Logger, ids []string) NameMap {
	ctx, cancel := context.WithTimeout(ctx, namesTimeout)
	defer cancel()
	got := make(NameMap, len(ids))
	for _, id := range ids {
		if id == n.botUserID {
			continue // convo names the bot itself
		}
		if name, ok := n.cache.Get(id); ok {
			got[id] = name
			continue
		}
		name, turn, err := n.lookup(ctx, id)
		if !turn {
			break // the names time limit: the rest keep their ids
		}
		if err != nil {
			log.Debug("users.info", zap.String("user_id", id), zap.Error(err))
			continue
		}
		n.cache.Put(id, name)
		got[id] = name
	}
	return got
}

// lookup makes one users.info call at its turn in the look-ups budget; a 429 pauses every look-up
// (none is retried: a name is a nicety). turn is false when ctx ended before a turn came.
func (n *Names) lookup(ctx context.Context, id string) (name string, turn bool, err error) {
	if err := n.lookups.Wait(ctx); err != nil {
		return "", false, err
	}
	name, err = n.users.Name(ctx, id)
	if ra, ok := RateLimited(err); ok {
		n.lookups.Throttled(ra)
	}
	return name, true, err
}

// NameMap is resolved names by user id, as convo asks for them (convo.Names).
type NameMap map[string]string

func (m NameMap) Name(id string) (string, bool) { n, ok := m[id]; return n, ok }
