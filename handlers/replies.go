package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/attach"
	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/ttlcache"
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
	FollowUps                         bool // answer thread messages without a mention in bot threads
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
	// Threads tells every replica the threads the bot answers in, so that a follow-up that lands
	// on another replica than the answer is known there. nil: this process knows its own.
	Threads ThreadMarks
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
	threadCacheSize = 10000
	threadCacheTTL  = 6 * time.Hour
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

	botThreads *ttlcache.Cache[bool] // channel/thread_ts -> the bot takes part (positive and negative)
	names      *gateway.Names
	// approvals ask about the tool calls that need a click and keep the tools allowed for a thread.
	approvals Approver

	// What Slack refused lately, not tried again for StreamRefusal: native streaming and
	// agents.sessions.setStatus (the app is not an agent, or the place does not allow it).
	streaming, sessions gateway.Refused
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
	approvals := opt.Approvals
	if approvals == nil {
		approvals = noApprovals{}
	}
	return &Replies{
		reads: gateway.ThreadReads{Thread: t, Writer: paced, Cache: opt.ThreadCache}, msgs: m, streamer: s, chat: c, log: log, opt: opt,
		paced:      paced,
		botThreads: ttlcache.New[bool](threadCacheSize, threadCacheTTL),
		names:      names,
		approvals:  approvals,
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
		if !r.mayFollowUp(req, threadTS) {
			return ErrIgnored
		}
		known, fetched, n, err := r.botThread(ctx, req.Channel, threadTS)
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
		r.joined(ctx, req.Channel+"/"+threadTS)
	}
	a := newAnswer(r, req, threadTS, log, leftOut)
	return a.run(ctx, thread)
}

// Triage says, without I/O, whether the bot should run req, and whether it keeps quiet about it
// when it cannot (the bot is full or restarting). A message with a mention, a DM or a Regenerate
// runs and is told. A thread message without a mention runs only when it may be for the bot (see
// mayFollowUp) and its thread is not remembered as one the bot has no part in, so that people
// talking among themselves never take a place in the bot's queue; it is quiet unless its thread is
// remembered as one of the bot's (KnownFollowUp).
func (r *Replies) Triage(req route.ReplyRequest) (run, quiet bool) {
	quiet = !r.KnownFollowUp(req)
	if !req.FollowUp {
		return true, quiet
	}
	if !r.mayFollowUp(req, req.ThreadTS) {
		return false, quiet
	}
	known, remembered := r.remembered(req.Channel + "/" + req.ThreadTS)
	return !remembered || known, quiet
}

// KnownFollowUp reports, without I/O, whether Reply would answer the follow-up req as far as is
// known now: follow-ups are on, it is a reply in a thread, it is not addressed to someone else, and
// the thread is remembered as one the bot takes part in. Triage uses it to tell the asker when the
// bot cannot answer (busy, shutting down) instead of dropping a follow-up silently, and the access
// rules to count only refusals of follow-ups that would have been answered.
func (r *Replies) KnownFollowUp(req route.ReplyRequest) bool {
	if !req.FollowUp {
		return true
	}
	if !r.mayFollowUp(req, req.ThreadTS) {
		return false
	}
	known, ok := r.botThreads.Get(req.Channel + "/" + req.ThreadTS)
	return ok && known
}

// mayFollowUp reports whether the follow-up req, in thread threadTS, may be for the bot, before
// the thread is looked at: follow-ups are on, it replies in a thread, it does not address someone
// else, and it is more than thanks or an emoji.
func (r *Replies) mayFollowUp(req route.ReplyRequest, threadTS string) bool {
	return r.opt.FollowUps && threadTS != "" && threadTS != req.TS && !r.addressedToOthers(req.Text) &&
		(len(req.Files) > 0 || len(req.Attachments) > 0 || !acknowledgement(req.Text))
}

// acknowledgement reports a message that only thanks or reacts ("thanks!", "thank you so much 🙏",
// ":+1:"): in a thread the bot takes part in, an answer to it would be noise. A question mark (also
// ？, ❓ or :question:), any other word or a mention makes it a message to answer, and so does no
// text at all (a forwarded message, a file).
func acknowledgement(text string) bool {
	t := strings.ToLower(strings.TrimSpace(text))
	if t == "" || strings.ContainsAny(t, "?<？❓❔") || strings.Contains(t, "question:") {
		return false
	}
	for { // :emoji: codes
		i := strings.IndexByte(t, ':')
		j := strings.IndexByte(t[i+1:], ':')
		if i < 0 || j < 0 || strings.ContainsAny(t[i+1:i+1+j], " \n") {
			break
		}
		t = t[:i] + " " + t[i+2+j:]
	}
	words := strings.FieldsFunc(t, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(words) > 5 {
		return false
	}
	thanked := false
	for i, w := range words {
		prev, next := "", ""
		if i > 0 {
			prev = words[i-1]
		}
		if i+1 < len(words) {
			next = words[i+1]
		}
		switch thanksWords[w] {
		case thanks, praise:
			thanked = true
		case filler:
			// "a" only in "a lot" ("perfect, A" picks an option), "you" only after "thank".
			if w == "a" && next != "lot" || w == "lot" && prev != "a" || w == "you" && prev != "thank" && prev != "thanks" {
				return false
			}
		default:
			return false
		}
	}
	return thanked || len(words) == 0 // fillers alone ("a", "so") are no thanks: "A" may pick an option
}

type thanksWord int

const (
	notThanks thanksWord = iota
	thanks               // thanks by itself
	praise               // thanks by itself too ("great" after an answer)
	filler               // only beside one of the others ("thank you so much")
)

// thanksWords are the words of a message that only thanks.
var thanksWords = map[string]thanksWord{
	"thanks": thanks, "thank": thanks, "thx": thanks, "ty": thanks, "tysm": thanks, "cheers": thanks,
	"merci": thanks, "danke": thanks, "gracias": thanks,
	"great": praise, "awesome": praise, "perfect": praise, "nice": praise, "cool": praise, "brilliant": praise,
	"you": filler, "so": filler, "much": filler, "a": filler, "lot": filler, "many": filler,
}

// botThread reports whether the bot takes part in a thread: its parent mentions the bot or the bot has
// written in it. A cache miss fetches the thread once; the messages are returned for reuse as context,
// with how many older ones the read left out.
func (r *Replies) botThread(ctx context.Context, channel, threadTS string) (bool, []slack.Message, int, error) {
	key := channel + "/" + threadTS
	if known, ok := r.remembered(key); ok {
		return known, nil, 0, nil
	}
	thread, leftOut, err := r.reads.Replies(ctx, channel, threadTS)
	if err != nil {
		return false, nil, 0, err
	}
	known := r.involved(thread)
	r.botThreads.Put(key, known)
	return known, thread, leftOut, nil
}

// ThreadMarks are flags every replica sees (the state package's marks).
type ThreadMarks interface {
	Mark(ctx context.Context, key string, ttl time.Duration) error
	Marked(ctx context.Context, key string) (bool, error)
}

// sharedMarkTimeout bounds one look at the shared thread marks: Triage runs in the bot's event
// loop, so a slow Redis must not hold it for long; the state package gives up on Redis sooner
// (500 ms) and answers from memory, so this is a last resort.
const sharedMarkTimeout = time.Second

// joined remembers that the bot answers in the thread key, here and for the other replicas.
func (r *Replies) joined(ctx context.Context, key string) {
	r.botThreads.Put(key, true)
	if r.opt.Threads == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedMarkTimeout)
	defer cancel()
	if err := r.opt.Threads.Mark(ctx, "thread:"+key, threadCacheTTL); err != nil {
		r.log.Warn("thread not marked for the other replicas", zap.Error(err))
	}
}

// remembered is what the process remembers of the thread key (see botThreads), a "no" checked
// against the other replicas' marks: another replica may have answered there since.
func (r *Replies) remembered(key string) (known, ok bool) {
	known, ok = r.botThreads.Get(key)
	if !ok || known || r.opt.Threads == nil {
		return known, ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedMarkTimeout)
	defer cancel()
	if marked, err := r.opt.Threads.Marked(ctx, "thread:"+key); err == nil && marked {
		r.botThreads.Put(key, true)
		return true, true
	}
	return false, true
}

// addressedToOthers reports whether a follow-up mentions people but not the bot: it is meant for them.
func (r *Replies) addressedToOthers(text string) bool {
	return strings.Contains(text, "<@") && !strings.Contains(text, "<@"+r.opt.BotUserID+">")
}

func (r *Replies) involved(thread []slack.Message) bool {
	mention := "<@" + r.opt.BotUserID + ">"
	for i, m := range thread {
		if i == 0 && r.opt.BotUserID != "" && strings.Contains(m.Text, mention) {
			return true
		}
		if r.own(m) {
			return true
		}
	}
	return false
}

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
	return botIdentity{userID: r.opt.BotUserID, botID: r.opt.BotID}.own(m)
}

// botIdentity is who the bot is in Slack (auth.test), to recognise its own messages.
type botIdentity struct{ userID, botID string }

// own reports whether the bot posted m.
func (id botIdentity) own(m slack.Message) bool {
	return (id.userID != "" && m.User == id.userID) || (id.botID != "" && m.BotID == id.botID)
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
