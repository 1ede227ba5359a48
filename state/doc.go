// Package state holds what the bot's replicas share: dedupe claims, flags and daily counters with a TTL,
// groups of counters (Tallies: numbers only, a hash per group in Redis, in memory and STATE_DIR otherwise),
// token buckets for Slack's write budgets, per-thread leases, the journal of answers in progress, and messages
// between replicas. Three stores have the same parts, each with the same methods and the same behaviour (one
// contract test runs against all of them): the store itself runs the replica (Run, Close) and holds its leases
// and liveness; Keys are its claims, marks, counters and token buckets; Answers is its journal of open answers
// and the fence of their writes; Inbox is its messages between replicas; Records are small documents kept
// until deleted, by collection and id (a Memory with a directory writes them to records/<collection>.json).
// Each consumer is handed the part it
// uses:
//
//   - Memory: one process, in memory; given a directory, its journal of open answers lives there (a JSON file
//     per answer under answers/) and its liveness is an flock on replicas/<self>.lock, so a restarted process
//     finds the answers its previous life left open and closes them in Slack.
//   - Redis: shared by every replica through one Redis 7 or Valkey server (REDIS_URL).
//   - Fallback: Redis, served from a Memory while Redis cannot be reached.
//
// A replica is alive while it runs Run: in Redis a heartbeat renews its liveness key, in Memory it holds its
// lock file. A lease or an open answer belongs to its holder only while the holder is alive, so a crashed
// replica's leases free themselves and its answers become orphans that a survivor (or the restarted process)
// adopts and closes. A replica whose heartbeats do not reach Redis fences itself (Fence): its answers' writes
// wait from half the liveness TTL on, before anyone can take it for dead.
//
// Redis keys, all under the namespace given to NewRedis (the wiring uses "llmbot:<app_id>:<team_id>:", so two
// bots never share a key):
//
//	alive:<replica>   "1", PX 15 s, renewed every 5 s by Run, deleted when Run ends
//	inbox:<replica>   list of messages for a replica (RPUSH, BLPOP); its TTL is renewed with its liveness
//	claim:<key>       Claim (SET NX PX)
//	mark:<key>        Mark
//	count:<key>       Add (INCRBY; the TTL is set when the key is created)
//	tally:<group>     hash: Tallies' counters of a group, such as a day's usage (HINCRBY; EXPIRE NX at creation)
//	bucket:<name>     a token bucket's theoretical arrival time (GCRA), microseconds of Redis's clock
//	pause:<name>      the end of a bucket's pause, microseconds of Redis's clock
//	lease:<key>       the replica holding a thread; a safety TTL of 15 min (LeaseTTL), renewed by its holder
//	answer:<id>       hash: an open answer (the Answer's fields); a safety TTL of 24 h, renewed on each change
//	answers           set of the ids of open answers
//	adopted:<id>      the replica that adopted answer id, PX 24 h: a cut-off owner learns it was adopted (Fence)
//	thread:<key>, thread-epoch, thread-entries, thread-sizes, thread-bytes
//	                  the thread cache's entries and their accounts (RedisThreads)
//	rec:<collection>  hash: Records, kept until deleted (a channel's instructions, its scheduled prompts)
//
// What a Redis outage means: a Fallback serves every call from its Memory until Redis answers again, and says
// so (FallbackHooks, a warning in the log). Meanwhile each replica dedupes, counts, paces and leases on its own:
// an event may be answered twice, a quota and the Slack budgets are per replica, and a click for another
// replica's answer cannot reach it. A duplicate is better than silence, so no call fails because Redis is
// down. What was written to the Memory during the outage is not copied to Redis afterwards.
package state

import (
	"errors"
	"time"
)

// Answer is the journal's record of one answer in progress.
type Answer struct {
	ID       string // channel + "/" + the asked message's ts
	Team     string
	Channel  string
	ThreadTS string
	TS       string // the asked message
	Asker    string
	Mode     string   // "edit" or "stream"
	Messages []string // ts of the messages the answer posted, in order
	Owner    string   // the replica writing it
	Started  time.Time
	Updated  time.Time
}

// ErrNoReplica is returned by Send for a replica that is not alive (or, for a Memory, any replica but itself).
var ErrNoReplica = errors.New("state: no such replica alive")

// errInvalid marks errors in a call's arguments: they are the caller's, so a Fallback passes them on rather
// than taking them for an outage.
var errInvalid = errors.New("invalid argument")

// Times shared by the stores. Liveness and the heartbeat are fields of each store so tests can shorten them.
const (
	heartbeat = 5 * time.Second
	answerTTL = 24 * time.Hour // an orphan nobody adopted for a day is not worth closing any more
)

// AliveTTL is how long a replica sharing Redis counts as alive after its last heartbeat: another
// replica may adopt its answers only then. A Memory's liveness is a lock the kernel releases when the
// process ends.
const AliveTTL = 15 * time.Second

// LeaseTTL is how long a thread's lease lasts unless its holder takes it again (Lease renews it):
// against a holder that never releases it, through a bug. A holder whose answer runs longer renews
// it well within this.
const LeaseTTL = 15 * time.Minute
