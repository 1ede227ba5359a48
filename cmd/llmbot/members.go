package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/access"
)

// rosterEvery is how often the workspace's people are listed again: before what the last listing
// placed is forgotten (access.MembersOptions.TTL, 1 h).
const rosterEvery = 45 * time.Minute

// placeWorkspace places the workspace's people (users.list) from the start and every rosterEvery
// until ctx ends, so that people new to the bot who ask at once wait for no users.info turn.
// A listing that fails only leaves people to be looked up as they ask.
func placeWorkspace(ctx context.Context, m *access.Members, r access.Roster, log *zap.Logger) {
	for {
		began := time.Now()
		n, err := m.Preload(ctx, r)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("access: the workspace's people not all listed; the others are looked up as they ask",
				zap.Int("placed", n), zap.Error(err))
		case n > 0:
			log.Info("access: the workspace's people placed", zap.Int("people", n), zap.Duration("took", time.Since(began)))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(rosterEvery):
		}
	}
}
