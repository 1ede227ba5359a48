package handlers

import (
	"context"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/pace"
)

// Names resolves user ids to display names (users.info) within the look-ups budget, remembering
// them for nameCacheTTL. One Names serves the use cases that show people's names (the answers and
// /summarize), so a name looked up for one is known to the other.
type Names struct {
	users     gateway.Users
	lookups   *pace.Bucket      // users.info (Budgets.Lookups)
	cache     *ttlCache[string] // user id -> display name
	botUserID string            // convo names the bot itself
}

// NewNames returns Names looking people up with u, paced by lookups (Budgets.Lookups; nil: a budget
// of its own), leaving the bot itself (botUserID) to convo.
func NewNames(u gateway.Users, lookups *pace.Bucket, botUserID string) *Names {
	if lookups == nil {
		lookups = pace.NewBucket(gateway.LookupsPerMinute*pace.RateMargin, gateway.LookupBurst)
	}
	return &Names{users: u, lookups: lookups, cache: newTTLCache[string](nameCacheSize, nameCacheTTL), botUserID: botUserID}
}

// resolve returns the display names of ids, from the cache or users.info (failures are left out: convo
// then shows the id).
func (n *Names) resolve(ctx context.Context, log *zap.Logger, ids []string) nameMap {
	ctx, cancel := context.WithTimeout(ctx, namesTimeout)
	defer cancel()
	got := make(nameMap, len(ids))
	for _, id := range ids {
		if id == n.botUserID {
			continue // convo names the bot itself
		}
		if name, ok := n.cache.get(id); ok {
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
		n.cache.put(id, name)
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
	if ra, ok := gateway.RateLimited(err); ok {
		n.lookups.Throttled(ra)
	}
	return name, true, err
}

type nameMap map[string]string

func (m nameMap) Name(id string) (string, bool) { n, ok := m[id]; return n, ok }
