package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/followup"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/ledger"
	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/orphans"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/schedule"
	"github.com/llmbot/llmbot/state"
	"github.com/llmbot/llmbot/threads"
)

// sharedState is the state package's store as the wiring hands it out, each consumer the part it
// uses: the bot, the replies, the orphans' closer, the approvals, Slack's budgets and the quota.
type sharedState struct {
	run   func(ctx context.Context) error // keeps this replica alive until ctx ends
	close func() error                    // once run has returned

	replicas bot.Replicas
	buckets  pace.Shared
	marks    followup.Marks
	counter  access.Counter
	orphans  orphans.Journal
	journal  handlers.Journal
	fence    gateway.Fence
	tallies  ledger.Tallies
	// threads makes the thread cache's store with the limits given: in Redis (nothing held while it
	// cannot be reached), or in memory.
	threads func(state.ThreadLimits) (threads.Store, error)
	records schedule.Records // the channels' instructions and schedules (instructions.Records is its part)
	claims  schedule.Claims  // each schedule's occurrence run once
}

// Close closes the store, once its run has returned.
func (s sharedState) Close() error { return s.close() }

// sharedMemory is m by its parts.
func sharedMemory(m *state.Memory) sharedState {
	k, a := m.Keys(), m.Answers()
	return sharedState{run: m.Run, close: m.Close,
		replicas: bot.Replicas{Claims: k, Leases: m, Journal: a, Inbox: m.Inbox()},
		buckets:  k, marks: k, counter: k, orphans: a, journal: a, fence: a, tallies: m.Tallies(),
		threads: func(lim state.ThreadLimits) (threads.Store, error) { return state.NewMemoryThreads(lim) },
		records: m.Records(), claims: k}
}

// sharedFallback is f by its parts.
func sharedFallback(f *state.Fallback) sharedState {
	k, a := f.Keys(), f.Answers()
	return sharedState{run: f.Run, close: f.Close,
		replicas: bot.Replicas{Claims: k, Leases: f, Journal: a, Inbox: f.Inbox()},
		buckets:  k, marks: k, counter: k, orphans: a, journal: a, fence: a, tallies: f.Tallies(),
		threads: func(lim state.ThreadLimits) (threads.Store, error) { return f.Threads(lim) },
		records: f.Records(), claims: k}
}

// openState opens what this replica shares with the others: with REDIS_URL, Redis, answered from
// this process's memory while Redis cannot be reached; without it, this process's memory and the
// local journal in STATE_DIR. Keys and the journal's folder are per app (stateOwner) and team, so two bots never
// share them. A journal folder that cannot be made leaves the journal in memory (logged): the bot
// still answers.
func openState(ctx context.Context, cfg Config, id bot.Identity, metrics *ops.Metrics, ready *ops.Readiness, log *zap.Logger) (sharedState, error) {
	self := replicaName()
	log = log.With(zap.String("replica", self))
	owner := stateOwner(id)
	dir := stateDir(cfg.StateDir, owner+"-"+id.TeamID)
	local, err := state.NewMemory(self, dir, log)
	if err != nil {
		log.Warn("STATE_DIR cannot be used: answers cut short by a crash will not be closed after a restart", zap.String("dir", dir), zap.Error(err))
		if local, err = state.NewMemory(self, "", log); err != nil {
			return sharedState{}, err
		}
	}
	if cfg.RedisURL == "" {
		return sharedMemory(local), nil
	}
	redis.SetLogger(redisLog{log.Named("go-redis")}) // its own notices would go to stderr, unstructured
	primary, err := state.OpenRedis(cfg.RedisURL, "llmbot:"+owner+":"+id.TeamID+":", self, log)
	if err != nil {
		return sharedState{}, err
	}
	shared := state.NewFallback(primary, local, log, state.FallbackHooks{
		Degraded: func(d bool) { metrics.StateDegraded(d); ready.Degraded(d) },
		Failed:   metrics.StateFailed,
	})
	pctx, cancel := context.WithTimeout(ctx, redisStartTimeout)
	defer cancel()
	if err := primary.Ping(pctx); err != nil {
		// Redis down must not keep the bot down: it answers with its own state until Redis is back.
		shared.Degrade(err)
		return sharedFallback(shared), nil
	}
	log.Info("replicas share their state in Redis")
	return sharedFallback(shared), nil
}

// stateOwner is who the shared state belongs to within its team: the app, or when bots.info did not
// say which (it needs users:read, and may fail), the bot, which is the app's one bot in the team. An
// empty owner would put two apps of one team under one namespace, each then taking the other's
// messages for ones it has answered already.
func stateOwner(id bot.Identity) string {
	return cmp.Or(id.AppID, id.BotID, id.UserID)
}

// orphanQuiet is how long an orphaned answer's messages must be unchanged before it is closed
// (orphans.Options.Quiet): with Redis the liveness TTL, for its owner may be a replica cut
// off rather than gone; with the local journal none, for its owner was this process before it died.
func orphanQuiet(cfg Config) time.Duration {
	if cfg.RedisURL == "" {
		return 0
	}
	return state.AliveTTL
}

// redisStartTimeout bounds the first PING to Redis at start-up.
const redisStartTimeout = 5 * time.Second

// stateDir is the local journal's folder for the app and team scope: under STATE_DIR, or under
// the user's cache directory, which survives a restart of the process on the same machine.
func stateDir(setting, scope string) string {
	base := setting
	if base == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		base = filepath.Join(cache, "llmbot")
	}
	return filepath.Join(base, scope)
}

// replicaName names this process among the replicas: its host (the pod's name in Kubernetes) and
// a random part, new at each start, so a restarted process is told apart from the one that died.
func replicaName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	if host == "" {
		host = "llmbot"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// redisLog takes go-redis's own notices (dial failures, pool events) into the bot's log, at debug:
// the shared state says once, at warn, that Redis cannot be reached.
type redisLog struct{ log *zap.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...))
}
