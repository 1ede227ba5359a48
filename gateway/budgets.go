package gateway

import "github.com/llmbot/llmbot/pace"

// Slack's rate limits as the bot paces them, each declared once, here. Slack limits most methods
// per workspace by tier (Tier 2 about 20 calls a minute, Tier 3 about 50, Tier 4 about 100), and
// chat.postMessage to about one a second per channel. A 429 on any method pauses its budget for
// every reply and lowers its rate for a while.
const (
	// chat.update: EDIT_BUDGET_PER_MINUTE, Slack's ~50 a minute per workspace by default.
	DefaultEditsPerMinute = 50
	editBurst             = 5
	appendsPerMinute      = 100 // chat.appendStream: Tier 4
	appendBurst           = 10
	postsPerMinute        = 60 // chat.postMessage and chat.startStream: about one a second per channel
	postBurst             = 3
	// chat.postMessage across channels: Slack says only "several hundred per minute"; 300 stays at the
	// low end so the first texts of a burst of questions in many channels are paced, not 429ed. The
	// burst is 6 s of that rate, as for the other methods whose burst Slack does not publish: the
	// ends of answers that finish together are posted together, not a fifth of a second apart.
	postsWorkspacePerMinute = 300
	PostsWorkspaceBurst     = 30
	readsPerMinute          = 50 // conversations.replies + conversations.history: Tier 3
	readBurst               = 5
	LookupsPerMinute        = 100 // users.info: Tier 4
	LookupBurst             = 10
	streamsPerMinute        = 20 // chat.startStream + chat.stopStream: Tier 2
	streamBurst             = 3
	// chat.delete (Tier 3) withdraws placeholders under load and at shutdown; chat.postEphemeral
	// (Tier 4) tells askers at shutdown. Slack allows short bursts over a tier's rate but publishes
	// no size: 6 s of the rate stays modest (the latter is every private note's: Notices).
	deletesPerMinute    = 50
	deletesBurst        = 5
	ephemeralsPerMinute = 100
	ephemeralsBurst     = 10
	sessionsPerMinute   = 50 // agents.sessions.setStatus: Tier 3
	sessionBurst        = 5
	// assistant.threads.setStatus: Slack publishes no tier ("special"); 100 a minute (Tier 4) stays
	// modest, and a status that gets no token at once is left out.
	StatusesPerMinute = 100
	StatusBurst       = 20
	// assistant.threads.setTitle: Tier 4. A title is a courtesy set as an answer starts: one that gets
	// no token at once is left out, so a burst of new threads draws no 429s.
	TitlesPerMinute = 100
	TitleBurst      = 10
)

// Budgets pace the Slack methods the replies call, one budget per method (or per channel, for
// posts), shared by every reply in flight.
type Budgets struct {
	Edits   *pace.Scheduler // chat.update: the fair edit Scheduler
	Appends *pace.Scheduler // chat.appendStream (native streaming)
	Posts   *pace.Keyed     // chat.postMessage and chat.startStream per channel
	// PostsWorkspace is chat.postMessage and chat.startStream across every channel, waited on after
	// Posts.
	PostsWorkspace *pace.Bucket
	// Reads is conversations.replies + conversations.history: each read waits for a token and a 429
	// pauses every reader for its Retry-After.
	Reads *pace.Bucket
	// Lookups is users.info. Names are a nicety (speaker labels, @mentions): a look-up that cannot be
	// made within the names time limit leaves the user id in place.
	Lookups *pace.Bucket
	// Streams is chat.startStream + chat.stopStream. A reply starts a native stream only when a token
	// is available at once, else it answers by editing; stopStream waits.
	Streams *pace.Bucket
	// Sessions is agents.sessions.setStatus: the "processing" status is set only with a token at
	// once (the stream itself shows Slack the answer is under way); moving it off waits.
	Sessions *pace.Bucket
	// Statuses is assistant.threads.setStatus: "is thinking…" under an answer's thread is set only
	// with a token at once, a sign of life that must cost no answer a moment.
	Statuses *pace.Bucket
	// Deletes (chat.delete) and Ephemerals (chat.postEphemeral) close replies at shutdown that the
	// edit budget cannot serve in time (handlers.planClose). Ephemerals paces the rest of the bot's private
	// notes too (Notices), so the process keeps that method's limit once.
	Deletes, Ephemerals *pace.Bucket
}

// NewBudgets returns Slack's budgets, with chat.update at editsPerMinute (EDIT_BUDGET_PER_MINUTE)
// granted under policy.
func NewBudgets(editsPerMinute float64, policy pace.Policy) Budgets {
	return Budgets{
		Edits:          pace.NewScheduler(editsPerMinute, editBurst, pace.WithPolicy(policy)),
		Appends:        pace.NewScheduler(appendsPerMinute, appendBurst, pace.WithPolicy(policy)),
		Posts:          pace.NewKeyed(postsPerMinute, postBurst),
		PostsWorkspace: pace.NewBucket(postsWorkspacePerMinute, PostsWorkspaceBurst),
		Reads:          pace.NewBucket(readsPerMinute*pace.RateMargin, readBurst),
		Lookups:        pace.NewBucket(LookupsPerMinute*pace.RateMargin, LookupBurst),
		Streams:        pace.NewBucket(streamsPerMinute, streamBurst),
		Sessions:       pace.NewBucket(sessionsPerMinute, sessionBurst),
		Statuses:       pace.NewBucket(StatusesPerMinute, StatusBurst),
		Deletes:        pace.NewBucket(deletesPerMinute*pace.RateMargin, deletesBurst),
		Ephemerals:     pace.NewBucket(ephemeralsPerMinute*pace.RateMargin, ephemeralsBurst),
	}
}

// WithDefaults is b with every nil budget a default one (NewBudgets at Slack's edit rate).
func (b Budgets) WithDefaults() Budgets {
	d := NewBudgets(DefaultEditsPerMinute, pace.PolicyFair)
	b.Edits = or(b.Edits, d.Edits)
	b.Appends = or(b.Appends, d.Appends)
	b.Posts = or(b.Posts, d.Posts)
	b.PostsWorkspace = or(b.PostsWorkspace, d.PostsWorkspace)
	b.Reads = or(b.Reads, d.Reads)
	b.Lookups = or(b.Lookups, d.Lookups)
	b.Streams = or(b.Streams, d.Streams)
	b.Sessions = or(b.Sessions, d.Sessions)
	b.Statuses = or(b.Statuses, d.Statuses)
	b.Deletes = or(b.Deletes, d.Deletes)
	b.Ephemerals = or(b.Ephemerals, d.Ephemerals)
	return b
}

// or is b when a is nil.
func or[T any](a, b *T) *T {
	if a == nil {
		return b
	}
	return a
}

// Share makes every budget take its tokens from s as well, by Slack method name, so that replicas
// together keep to the workspace's limits (pace.Shared). Posts are shared per channel, as Slack
// limits them. Call it before the budgets are used.
func (b Budgets) Share(s pace.Shared) {
	b.Edits.Bucket().Share(s, "chat.update")
	b.Appends.Bucket().Share(s, "chat.appendStream")
	b.Posts.Share(s, "chat.postMessage:")
	b.PostsWorkspace.Share(s, "chat.postMessage")
	b.Reads.Share(s, "conversations.read")
	b.Lookups.Share(s, "users.info")
	b.Streams.Share(s, "chat.startStream")
	b.Sessions.Share(s, "agents.sessions.setStatus")
	b.Statuses.Share(s, "assistant.threads.setStatus")
	b.Deletes.Share(s, "chat.delete")
	b.Ephemerals.Share(s, "chat.postEphemeral")
}
