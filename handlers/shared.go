package handlers

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"
	"go.uber.org/zap"
)

// threadReads reads conversations within the read budget: the pieces of reading that answers and
// /summarize share (each use case holds its own, over the same budgets).
type threadReads struct {
	thread Thread
	paced  *writer
}

// replies reads a thread (conversations.replies) within the read budget (read), and says how many
// of its older messages the read left out (Thread.Replies).
func (t threadReads) replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
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
// (read).
func (t threadReads) history(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error) {
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

// names resolves user ids to display names (users.info) within the look-ups budget, remembering
// them for nameCacheTTL.
type names struct {
	users     Users
	paced     *writer
	cache     *ttlCache[string] // user id -> display name
	botUserID string            // convo names the bot itself
}

func newNames(u Users, paced *writer, botUserID string) *names {
	return &names{users: u, paced: paced, cache: newTTLCache[string](nameCacheSize, nameCacheTTL), botUserID: botUserID}
}

// resolve returns the display names of ids, from the cache or users.info (failures are left out: convo
// then shows the id).
func (n *names) resolve(ctx context.Context, log *zap.Logger, ids []string) nameMap {
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
		var name string
		turn, err := n.paced.lookup(ctx, func(ctx context.Context) (err error) {
			name, err = n.users.Name(ctx, id)
			return err
		})
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

type nameMap map[string]string

func (m nameMap) Name(id string) (string, bool) { n, ok := m[id]; return n, ok }
