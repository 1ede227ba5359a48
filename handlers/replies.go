package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/attach"
	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/followup"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/threads"
)

// ReplyMode is how an answer is written into Slack.
type ReplyMode string

// The reply modes.
const (
	// ModeEdit posts a message and edits it as the answer streams (chat.postMessage + chat.update, mrkdwn).
	// Works in every workspace and client.
	ModeEdit ReplyMode = "edit"
	// ModeStream uses Slack's native streaming (chat.startStream / appendStream / stopStream, Markdown).
	// When Slack refuses it, the reply falls back to ModeEdit by itself.
	ModeStream ReplyMode = "stream"
	// ModeAuto streams natively where the asker is the only one reading the answer as it is written
	// (a DM with the bot, the agent pane), and edits elsewhere: in a channel Slack shows a native
	// stream live only to its recipient, and everyone else sees its first words until it ends.
	ModeAuto ReplyMode = "auto"
)

// ReplyOptions configure Replies. Zero values get the documented defaults. The settings of one concern
// are grouped in a struct of their own (what the model is asked, how the answer is written, how long its
// writes may take, what the replicas share), embedded so that a setting reads the same wherever it is
// used (opt.StallTimeout).
type ReplyOptions struct {
	// The bot's identity (auth.test): to recognise its own messages and mentions.
	BotUserID, BotID, BotName, TeamID string
	// FollowUps decides which thread messages without a mention are for the bot, and remembers the
	// threads the bot answers in. nil: none is.
	FollowUps *followup.Tracker
	// Rand is what each request's fence boundary is drawn from (convo.Fence); nil: crypto/rand.
	Rand io.Reader
	// Buttons puts Stop (while writing) and Regenerate (when done) buttons on answers written by
	// editing (see the rules in buttons.go). Parts are then at most 2,600 bytes (a section block
	// holds 3,000 characters).
	Buttons bool

	ContextOptions
	WriteOptions
	Timeouts
	ReplicaOptions

	// Pane, when set, makes DM messages answered in their own thread (the agent pane) get a title
	// and every answer in a thread a thinking status (package pane); nil: none.
	Pane Pane
	// Names resolves the people an answer names, shared with the other use cases that name people
	// (package summarize). nil: Replies' own, over the Users it is given.
	Names *gateway.Names
	// Approvals ask the asker about the tool calls that need a click and keep the tools allowed for
	// a thread (*approvals.Approvals, which the approval buttons' clicks reach too). nil: such calls
	// are denied without asking.
	Approvals Approver
	// Written, when set, is called once per finished reply with the time to its first visible
	// answer text (0: none was shown) and the Slack writes it made (metrics). It must not block.
	Written func(firstText time.Duration, edits int)

	// Budgets pace every Slack method the replies call, shared by every reply; a nil budget gets its
	// default (see Budgets).
	Budgets gateway.Budgets

	// Files reads what answers read of the files people share (text, pictures); nil: files are
	// only noted by name.
	Files *attach.Reader
	Tools ToolOptions // tools the model may use (tools.go); none by default
}

// ContextOptions say what the model is asked: the instructions, the model, and how much of the
// conversation goes with the question.
type ContextOptions struct {
	SystemPrompt string // may contain {bot_name} and {date}; "": convo's default
	Model        string // chat model; "": the client's default
	Budget       int    // context budget in estimated tokens; 0: convo.DefaultBudget
	OtherBots    bool   // include other bots' messages in the context
	HistoryLimit int    // messages of context for a top-level DM; default 20 (defaultHistoryLimit)
	// ChannelSettings, when set, returns a channel's own system prompt and chat model; "" keeps
	// SystemPrompt or Model (per-channel overrides, CHANNEL_CONFIG).
	ChannelSettings func(channel string) (systemPrompt, model string)
	// ThreadCache is the bot's memory of its threads (nil: none): an answer reads its thread from
	// it when it may.
	ThreadCache *threads.Cache
	// ChannelInstructions, when set, returns a channel's standing instructions ("/llmbot
	// instructions"; "": none, or they could not be read): added after the system prompt as the
	// channel's text, not the operator's (convo.Options.ChannelInstructions).
	ChannelInstructions func(ctx context.Context, channel string) string
	// Summaries, when set, make a summary of a long thread's oldest messages (what the budget
	// leaves out), which the request carries with the recent ones in full; nil: the oldest are left
	// out, noted as omitted.
	Summaries ThreadSummaries
}

// WriteOptions say how an answer is written into Slack.
type WriteOptions struct {
	Mode ReplyMode // "": ModeEdit
	// ChannelMode, when set, returns a channel's own reply mode; "" keeps Mode (CHANNEL_CONFIG).
	ChannelMode func(channel string) ReplyMode
	// Feedback puts 👍/👎 (Slack's feedback buttons) under a final answer, with Buttons (see
	// feedback.go).
	Feedback bool
	// PlaceholderAfter is how long an answer in edit mode waits for the model's first text before it
	// shows the "Thinking…" placeholder. The first text is then posted as the answer's message (from
	// the channel's post budget, not the workspace's scarce edit budget), so under load askers see
	// text as soon as the model writes it; a model slow to start still shows life after this long.
	// 0: the placeholder is posted at once.
	PlaceholderAfter time.Duration
	StreamRefusal    time.Duration // how long a refusal of native streaming is remembered; default 10 min
	// StreamRollover and StreamIdle: a natively streamed message is stopped, the answer going on in
	// a new one, once it is StreamRollover old or has had no append for StreamIdle, before Slack
	// ends it by itself (after about five minutes: of age or of silence, sources disagree).
	// Defaults 4 min each.
	StreamRollover, StreamIdle time.Duration
	// Sessions, when set, moves the agent session of a thread the bot streams in with the answer:
	// processing while it is written, active once it has ended (closed at shutdown).
	Sessions Sessions
}

// Timeouts bound an answer's waits: for the model, and for its closing writes once it is cancelled.
type Timeouts struct {
	// StallTimeout is a last resort: the longest time without any chunk (answer, reasoning or usage)
	// before the reply gives up. Keep-alive comments reset the model client's own idle timeout but not
	// this one, so it must exceed the client's header and idle timeouts together (a reasoning model may
	// think for minutes behind keep-alives); the client's limits are the ones that normally fire.
	// Default 5 min.
	StallTimeout time.Duration
	FinalTimeout time.Duration // how long the last write may still take once the reply is cancelled; default 10 s
	// ShutdownTimeout replaces FinalTimeout when the reply is cancelled with ErrShutdown: the
	// interrupted note must land within the bot's grace period (bot.CloseReserve). Default 2 s.
	ShutdownTimeout time.Duration
}

// ReplicaOptions are what the replicas share about the answers in progress.
type ReplicaOptions struct {
	// Journal records the messages each answer posts, so that a replica that dies mid-answer
	// leaves enough for another (or its restart) to close it (package orphans). nil: not recorded.
	Journal Journal
	// Fence, when set, holds back the writes of this replica's answers while other replicas could
	// take it for dead (see Fence); nil: never.
	Fence gateway.Fence
}

// DefaultStreamRollover is ReplyOptions.StreamRollover's and StreamIdle's default: a minute before
// Slack is reported to end a stream.
const DefaultStreamRollover = 4 * time.Minute

// Defaults of ReplyOptions.HistoryLimit and ShutdownTimeout.
const (
	defaultHistoryLimit    = 20
	defaultShutdownTimeout = 2 * time.Second
	// defaultRefusal is ReplyOptions.StreamRefusal's default.
	defaultRefusal = gateway.DefaultRefusal
)

// Bounds of the in-memory caches.
const (
	stopNameTimeout = time.Second // the asker's name for "Stopped by <name>.", looked up after the stop
)

var (
	errWriteDone = errors.New("answer complete") // ends the writer goroutine's waits
	// errWriterFailed ends the model's stream when the writer goroutine panicked: nothing more of
	// the answer could be shown.
	errWriterFailed = errors.New("answer writer failed")
)

// Replies answers mentions, DMs and follow-ups.
type Replies struct {
	reads    gateway.ThreadReads
	msgs     gateway.Messenger
	streamer gateway.Streamer
	chat     Chat
	log      *zap.Logger
	opt      ReplyOptions
	// paced is how every call gets through Slack's rate limits (opt.Budgets).
	paced *gateway.Writer

	followUps *followup.Tracker
	names     *gateway.Names
	// approvals ask about the tool calls that need a click and keep the tools allowed for a thread.
	approvals Approver

	// streaming is what Slack refused lately of native streaming, not tried again for StreamRefusal.
	streaming gateway.Refused
	// sessions move the agent sessions of the answers streamed natively (nil: opt.Sessions unset).
	sessions *gateway.Sessions
}

// NewReplies returns Replies over the given Slack and model interfaces. streamer may be nil when
// opt.Mode is ModeEdit.
func NewReplies(t gateway.Thread, m gateway.Messenger, s gateway.Streamer, u gateway.Users, c Chat, log *zap.Logger, opt ReplyOptions) *Replies {
	if opt.Mode == "" {
		opt.Mode = ModeEdit
	}
	opt.Budgets = opt.Budgets.WithDefaults()
	if opt.Files == nil {
		opt.Files = attach.NewReader(attach.Options{})
	}
	if opt.HistoryLimit <= 0 {
		opt.HistoryLimit = defaultHistoryLimit
	}
	if opt.StallTimeout <= 0 {
		opt.StallTimeout = 5 * time.Minute
	}
	if opt.FinalTimeout <= 0 {
		opt.FinalTimeout = 10 * time.Second
	}
	if opt.ShutdownTimeout <= 0 {
		opt.ShutdownTimeout = defaultShutdownTimeout
	}
	if opt.StreamRefusal <= 0 {
		opt.StreamRefusal = defaultRefusal
	}
	if opt.StreamRollover <= 0 {
		opt.StreamRollover = DefaultStreamRollover
	}
	if opt.StreamIdle <= 0 {
		opt.StreamIdle = DefaultStreamRollover
	}
	if log == nil {
		log = zap.NewNop()
	}
	opt.Tools = opt.Tools.withDefaults()
	if opt.Fence != nil {
		m, s = gateway.FencedMessenger{Messenger: m, Fence: opt.Fence}, gateway.FencedStreamer{Streamer: s, Fence: opt.Fence}
	}
	paced := &gateway.Writer{Budgets: opt.Budgets, Msgs: m}
	names := opt.Names
	if names == nil {
		names = gateway.NewNames(u, opt.Budgets.Lookups, opt.BotUserID)
	}
	followUps := opt.FollowUps
	if followUps == nil {
		followUps = followup.New(followup.Options{})
	}
	approvals := opt.Approvals
	if approvals == nil {
		approvals = noApprovals{}
	}
	var sessions *gateway.Sessions
	if opt.Sessions != nil {
		sessions = gateway.NewSessions(opt.Sessions, paced, opt.StreamRefusal)
	}
	return &Replies{
		sessions: sessions,
		reads:    gateway.ThreadReads{Thread: t, Writer: paced, Cache: opt.ThreadCache}, msgs: m, streamer: s, chat: c, log: log, opt: opt,
		paced:     paced,
		followUps: followUps,
		names:     names,
		approvals: approvals,
	}
}

// Reply answers req in its thread (or DM). It returns ErrIgnored when there is nothing to answer (a
// follow-up in a thread the bot has no part in, or one that mentions other people and not the bot), nil when the answer landed, and otherwise the error that
// spoiled it (model, Slack or a cancellation cause such as ErrShutdown) after showing a short reason in
// Slack: the caller logs it. Reply runs in the caller's goroutine, plus one writer goroutine it starts and
// waits for.
func (r *Replies) Reply(ctx context.Context, req route.ReplyRequest) error {
	threadTS := req.ThreadTS
	if threadTS == "" && req.ChannelType != "im" {
		threadTS = req.TS // a top-level mention outside a DM is answered in its own thread
	}
	log := r.log.With(zap.String("channel", req.Channel), zap.String("thread_ts", threadTS),
		zap.String("ts", req.TS), zap.String("user", req.User))

	var thread []slack.Message
	var leftOut int // of thread's older messages, by its read
	if req.FollowUp {
		if !r.followUps.May(req, threadTS) {
			return ErrIgnored
		}
		known, fetched, n, err := r.followUps.Read(ctx, r.reads, req.Channel, threadTS)
		if err != nil {
			return fmt.Errorf("follow-up check: %w", err)
		}
		if !known {
			return ErrIgnored
		}
		thread, leftOut = fetched, n
	}
	if req.Edited {
		// An edit that added the mention: not when the message was answered already (as a follow-up, for
		// an earlier edit, or as a mention before the mention was edited out and back in).
		var err error
		thread, leftOut, err = r.reads.Replies(ctx, req.Channel, threadTS)
		switch {
		case err != nil:
			// Answered as if the mention were new: the reply reads the thread again (and shows why
			// when that fails too), or a top-level mention needs no read.
			log.Debug("edited mention: the thread read to find an answer failed; answering", zap.Error(err))
			thread = nil
		case r.answered(thread, req.TS):
			return ErrIgnored
		}
	}
	if threadTS != "" {
		r.followUps.Joined(ctx, req.Channel, threadTS)
	}
	a := newAnswer(r, req, threadTS, log, leftOut)
	return a.run(ctx, thread)
}

// Triage says, without I/O, whether the bot should run req, and whether it keeps quiet about it
// when it cannot (followup.Tracker.Triage).
func (r *Replies) Triage(req route.ReplyRequest) (run, quiet bool) { return r.followUps.Triage(req) }

// KnownFollowUp reports, without I/O, whether Reply would answer the follow-up req as far as is
// known now (followup.Tracker.Known): the access rules count only refusals of those.
func (r *Replies) KnownFollowUp(req route.ReplyRequest) bool { return r.followUps.Known(req) }

// answered reports whether thread holds the bot's answer to the message at ts.
func (r *Replies) answered(thread []slack.Message, ts string) bool {
	for _, m := range thread {
		if r.own(m) && convo.AnswersTo(m, ts) {
			return true
		}
	}
	return false
}

// own reports whether the bot posted m.
func (r *Replies) own(m slack.Message) bool {
	return convo.Bot{UserID: r.opt.BotUserID, BotID: r.opt.BotID}.Posted(m)
}

// streams reports whether the answer to req is to be streamed natively: its reply mode (the
// channel's, else Mode) says so there, and Slack has not refused it recently.
func (r *Replies) streams(req route.ReplyRequest) bool {
	mode := r.opt.Mode
	if f := r.opt.ChannelMode; f != nil {
		if m := f(req.Channel); m != "" {
			mode = m
		}
	}
	switch {
	case mode == ModeAuto && req.InDM(), mode == ModeStream:
	default:
		return false
	}
	return r.streamingAllowed()
}

// streamingAllowed reports whether native streaming may be tried (not refused recently).
func (r *Replies) streamingAllowed() bool {
	return r.streamer != nil && r.streaming.Allowed()
}
