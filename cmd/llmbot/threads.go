package main

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/state"
	"github.com/llmbot/llmbot/threads"
)

// Bounds of the thread cache. An entry holds what a thread read holds (bot.ThreadHeldBytes of
// CONTEXT_TOKENS); all of them at most threadCacheBytes, so that with Redis the cache never
// crowds out the replicas' state (the Kubernetes kit's Redis has 64 MB and evicts nothing), and
// at most threadCacheEntries threads.
const (
	threadCacheBytes   = 16 << 20
	threadCacheEntries = 10000
)

// openThreads makes the thread cache over the shared state: in Redis when the replicas share it
// (nothing held while it cannot be reached), else in this process's memory. nil when
// THREAD_CACHE_TTL is 0: every answer reads its thread.
func openThreads(cfg Config, shared sharedState, id bot.Identity, metrics *ops.Metrics, log *zap.Logger) (*threads.Cache, error) {
	if cfg.ThreadCacheTTL <= 0 {
		return nil, nil
	}
	lim := state.ThreadLimits{TTL: cfg.ThreadCacheTTL, Bytes: bot.ThreadHeldBytes(cfg.ContextTokens),
		Entries: threadCacheEntries, Total: threadCacheBytes}
	store, err := shared.threads(lim)
	if err != nil {
		return nil, fmt.Errorf("thread cache: %w", err)
	}
	// Signed with a key Redis never sees: whoever can write there cannot put words in a thread.
	key := state.DeriveKey(cfg.SlackBotToken, "llmbot thread cache v1")
	return threads.New(threads.Options{Store: store, BotUserID: id.UserID, BotID: id.BotID, Key: key,
		Hooks: metrics.ThreadCacheHooks(), Log: log.Named("threads")}), nil
}
