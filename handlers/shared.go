package handlers

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/threads"
)

// threadReads reads conversations within the read budget: the pieces of reading that answers and
// /summarize share (each use case holds its own, over the same budgets). With a cache (the
// answers'), a thread it holds is not read again.
type threadReads struct {
	thread Thread
	paced  *writer
	cache  *threads.Cache // nil: none
}

// replies reads a thread (conversations.replies) within the read budget (read), and says how many
// of its older messages the read left out (Thread.Replies): from the cache when it may stand for a
// read.
func (t threadReads) replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	return t.cache.Replies(ctx, channel, threadTS, func(ctx context.Context) ([]slack.Message, int, error) {
		return t.read(ctx, channel, threadTS)
	})
}

// read is replies without the cache.
func (t threadReads) read(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	var msgs []slack.Message
	var leftOut int
	err := t.paced.read(ctx, func(ctx context.Context) (err error) {
		msgs, leftOut, err = t.thread.Replies(ctx, channel, threadTS)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("conversations.replies: %w", err)
	}
	return msgs, leftOut, nil
}

// history reads a channel's last limit messages up to latest ("": now) within the read budget
// (read); a DM's latest ones from the cache when it may stand for a read.
func (t threadReads) history(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error) {
	if latest == "" {
		return t.cache.History(ctx, channel, limit, func(ctx context.Context) ([]slack.Message, error) {
			return t.readHistory(ctx, channel, limit, latest)
		})
	}
	return t.readHistory(ctx, channel, limit, latest)
}

// readHistory is history without the cache.
func (t threadReads) readHistory(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error) {
	var msgs []slack.Message
	err := t.paced.read(ctx, func(ctx context.Context) (err error) {
		msgs, err = t.thread.History(ctx, channel, limit, latest)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("conversations.history: %w", err)
	}
	return msgs, nil
}

// Names resolves user ids to display names (users.info) within the look-ups budget, remembering
// them for nameCacheTTL. One Names serves the use cases that show people's names (the answers and
// /summarize), so a name looked up for one is known to the other.
type Names struct {
	users     Users
	lookups   *pace.Bucket      // users.info (Budgets.Lookups)
	cache     *ttlCache[string] // user id -> display name
	botUserID string            // convo names the bot itself
}

// NewNames returns Names looking people up with u, paced by lookups (Budgets.Lookups; nil: a budget
// of its own), leaving the bot itself (botUserID) to convo.
func NewNames(u Users, lookups *pace.Bucket, botUserID string) *Names {
	if lookups == nil {
		lookups = pace.NewBucket(lookupsPerMinute*pace.RateMargin, lookupBurst)
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
	if ra, ok := rateLimited(err); ok {
		n.lookups.Throttled(ra)
	}
	return name, true, err
}

type nameMap map[string]string

func (m nameMap) Name(id string) (string, bool) { n, ok := m[id]; return n, ok }
