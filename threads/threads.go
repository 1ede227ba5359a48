// Package threads is the bot's short-lived memory of the threads it takes part in, so that an answer
// need not read its thread from Slack again (conversations.replies is Tier 3: about 50 calls a minute
// for the whole workspace). An entry is one thread (a channel and a thread ts; a DM's top level is
// its channel with no thread ts): its messages with their metadata (the marks), as the bot last knew
// them. It is a cache, not an index or an export: entries expire (a TTL, hours), each is bounded in
// bytes (the bound of a thread read) and the store in entries.
//
// What goes in:
//   - a read (Replies, History): a thread not held, or held but not to be trusted, is read from Slack
//     once and the entry filled from the read;
//   - a new thread (a top-level mention, a top-level DM message: in the agent pane each starts a
//     thread) is whole from its event alone: nothing was said in it before. A second delivery of that
//     event leaves the entry as it is;
//   - the events the bot receives (Message: new messages, edits and deletions) change the entries held;
//     a thread not held is left alone;
//   - the bot's own writes (Posted, Updated, Deleted): the text and mark it wrote. A message put without a
//     mark keeps the one held: Slack's events carry none, and an edit without one keeps the message's.
//
// When an entry is trusted (Replies and History use it instead of reading): it was filled, and nothing
// that changes it can have been missed since it was begun. Every message event is applied before the
// answer it starts reads its thread, and changes made while a read runs win over the read (the store
// keeps what they did; a second read begun meanwhile makes the first one's fill void). What could be
// missed is a change that reached no replica's store: events that came while a connection was down (a
// gap: a replica's start counts), or a change that could not be written to the store (Redis away). Both
// bump the store's epoch (Gap; the state package's FallbackThreads bumps Redis's once it answers again),
// and an entry of an older epoch is not trusted: it is read again. A Redis that cannot be reached
// holds nothing: the answers read Slack, as they did without a cache.
package threads

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/state"
)

// Store holds the entries (state.MemoryThreads, state.FallbackThreads).
type Store interface {
	// Bump makes every entry begun before it stale.
	Bump(ctx context.Context) (int64, error)
	// Begin starts entry key afresh, root kept whatever its age, as gen's to fill; with onlyNew,
	// not when the entry is held (false).
	Begin(ctx context.Context, key, root, gen string, onlyNew bool) (bool, error)
	// Fill puts a read's messages into entry key unless another Begin came since gen's.
	Fill(ctx context.Context, key, gen string, leftOut int, msgs []state.ThreadMessage) (bool, error)
	// Apply makes ops in entry key if it is held.
	Apply(ctx context.Context, key string, ops []state.ThreadOp) error
	// Load returns entry key.
	Load(ctx context.Context, key string) (state.ThreadEntry, bool, error)
}

// Miss reasons (Hooks.Miss).
const (
	MissAbsent     = "absent"     // never seen, expired or dropped
	MissStale      = "stale"      // of an epoch before a gap
	MissIncomplete = "incomplete" // begun, not filled (a read under way, or one that failed)
	MissError      = "error"      // the store failed: read from Slack
)

// Hooks observe the cache (metrics live in the caller). Optional; must not block.
type Hooks struct {
	// Hit is called when a read was answered from an entry: a Slack call saved ("replies" or
	// "history").
	Hit func(kind string)
	// Miss is called when a read went to Slack, with why (Miss* constants).
	Miss func(kind, reason string)
}

// Options make a Cache.
type Options struct {
	Store Store
	// BotUserID and BotID are the bot's (auth.test): its writes are its messages.
	BotUserID, BotID string
	// Key signs what the cache stores (state.DeriveKey of the bot token: every replica has it, the
	// store never sees it); nil: nothing is signed (a store in this process's memory).
	Key   []byte
	Hooks Hooks
	Log   *zap.Logger
}

// Cache is the bot's memory of its threads. Safe for concurrent use. A nil *Cache holds nothing:
// every read goes to Slack, and events and writes are dropped.
type Cache struct {
	opt  Options
	log  *zap.Logger
	seal sealer

	mu sync.Mutex
	// where is the thread ts of each message the bot posted lately, so that an update, which
	// names only the message, finds its entry. Bounded: past whereMax the oldest half goes.
	where    map[string]string
	whereOld map[string]string
}

const whereMax = 4096

// New returns a Cache over opt.Store.
func New(opt Options) *Cache {
	log := opt.Log
	if log == nil {
		log = zap.NewNop()
	}
	return &Cache{opt: opt, log: log, seal: sealer{key: opt.Key}, where: make(map[string]string)}
}

// Key is the entry of a thread: channel and thread ts; a DM's top level is its channel and "".
func Key(channel, threadTS string) string { return channel + "/" + threadTS }

// isDM reports whether channel is a DM (its id begins with D).
func isDM(channel string) bool { return strings.HasPrefix(channel, "D") }

// Replies returns the thread threadTS of channel, parent first, and how many of its older messages
// are left out: from its entry when it is trusted, else from read (conversations.replies within the
// read budget), which then fills the entry.
func (c *Cache) Replies(ctx context.Context, channel, threadTS string, read func(context.Context) ([]slack.Message, int, error)) ([]slack.Message, int, error) {
	if c == nil {
		return read(ctx)
	}
	key := Key(channel, threadTS)
	if msgs, left, ok := c.trusted(ctx, "replies", key); ok {
		return msgs, left, nil
	}
	gen, begun := c.begin(ctx, key, threadTS, false)
	msgs, left, err := read(ctx)
	if err != nil {
		return nil, 0, err
	}
	if begun {
		c.fill(ctx, key, gen, left, msgs)
	}
	return msgs, left, nil
}

// History returns a DM's last limit top-level messages, oldest first: from its entry when it is
// trusted and holds them, else from read (conversations.history), which then fills the entry. Only
// for a DM: a channel's top level is no thread of the bot's.
func (c *Cache) History(ctx context.Context, channel string, limit int, read func(context.Context) ([]slack.Message, error)) ([]slack.Message, error) {
	if c == nil || !isDM(channel) {
		return read(ctx)
	}
	key := Key(channel, "")
	if msgs, _, ok := c.trusted(ctx, "history", key); ok {
		if len(msgs) > limit {
			msgs = msgs[len(msgs)-limit:]
		}
		return msgs, nil
	}
	gen, begun := c.begin(ctx, key, "", false)
	msgs, err := read(ctx)
	if err != nil {
		return nil, err
	}
	if begun {
		left := 0
		if len(msgs) >= limit {
			left = 1 // there may be older ones: changes to them are not held
		}
		c.fill(ctx, key, gen, left, msgs)
	}
	return msgs, nil
}

// started records a new thread whose only message is m (its parent): nothing was said in it before,
// so it is whole without a read. A thread held already (the event delivered again) is left as it is.
func (c *Cache) started(ctx context.Context, channel string, m slack.Message) {
	key := Key(channel, m.Timestamp)
	gen, begun := c.begin(ctx, key, m.Timestamp, true)
	if begun {
		c.fill(ctx, key, gen, 0, []slack.Message{m})
	}
}

// trusted returns entry key's messages when the entry may stand for a read.
func (c *Cache) trusted(ctx context.Context, kind, key string) ([]slack.Message, int, bool) {
	e, ok, err := c.opt.Store.Load(ctx, key)
	reason := ""
	switch {
	case err != nil:
		c.log.Debug("thread cache: load failed; reading", zap.String("key", key), zap.Error(err))
		reason = MissError
	case !ok:
		reason = MissAbsent
	case e.Epoch != e.Current:
		reason = MissStale
	case !e.Done:
		reason = MissIncomplete
	}
	var msgs []slack.Message
	if reason == "" {
		msgs, err = c.decodeAll(key, e.Messages)
		if err != nil {
			c.log.Warn("thread cache: an entry could not be decoded; reading", zap.String("key", key), zap.Error(err))
			reason = MissError
		}
	}
	if reason != "" {
		if c.opt.Hooks.Miss != nil {
			c.opt.Hooks.Miss(kind, reason)
		}
		return nil, 0, false
	}
	if c.opt.Hooks.Hit != nil {
		c.opt.Hooks.Hit(kind)
	}
	return msgs, e.LeftOut, true
}

// begin begins entry key for a read about to start; false when the store failed (the read is then
// not kept).
func (c *Cache) begin(ctx context.Context, key, root string, onlyNew bool) (gen string, ok bool) {
	gen = newGen()
	begun, err := c.opt.Store.Begin(ctx, key, root, gen, onlyNew)
	if err != nil {
		c.log.Debug("thread cache: begin failed", zap.String("key", key), zap.Error(err))
		return "", false
	}
	return gen, begun
}

// fill puts a read into entry key (begun by gen).
func (c *Cache) fill(ctx context.Context, key, gen string, left int, msgs []slack.Message) {
	enc := make([]state.ThreadMessage, 0, len(msgs))
	for _, m := range msgs {
		tm, err := encode(m)
		if err != nil {
			c.log.Warn("thread cache: a message could not be encoded; the thread is not kept", zap.String("key", key), zap.Error(err))
			return
		}
		enc = append(enc, c.sealed(key, tm))
	}
	if _, err := c.opt.Store.Fill(ctx, key, gen, left, enc); err != nil {
		c.log.Debug("thread cache: fill failed", zap.String("key", key), zap.Error(err))
	}
}

// Gap makes every entry stale: events may have been missed (a Socket Mode connection came up after
// none was: at the start too).
func (c *Cache) Gap(ctx context.Context) error {
	if c == nil {
		return nil
	}
	if _, err := c.opt.Store.Bump(ctx); err != nil {
		return fmt.Errorf("thread cache gap: %w", err)
	}
	return nil
}

// eventTimeout bounds what an event's changes may take: they are applied in the bot's event loop.
const eventTimeout = time.Second

// Event applies an Events API event to the entries it changes (a message, or an app_mention); any
// other is no message of a thread. Apply it before the event is routed: the answer it may start
// reads its thread after it.
func (c *Cache) Event(ctx context.Context, e slackevents.EventsAPIEvent) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, eventTimeout)
	defer cancel()
	switch ev := e.InnerEvent.Data.(type) {
	case *slackevents.MessageEvent:
		c.Message(ctx, ev)
	case *slackevents.AppMentionEvent:
		c.Mention(ctx, ev)
	}
}

// Message applies a message event (a new message, message_changed, message_deleted) to the
// entries of its thread that are held.
func (c *Cache) Message(ctx context.Context, ev *slackevents.MessageEvent) {
	if c == nil {
		return
	}
	switch ev.SubType {
	case "message_deleted":
		prev := slack.Message{}
		if ev.PreviousMessage != nil {
			prev.Msg = *ev.PreviousMessage
		}
		prev.Timestamp = ev.DeletedTimeStamp
		c.apply(ctx, ev.Channel, prev, state.ThreadOp{Kind: state.ThreadDelete, ThreadMessage: state.ThreadMessage{TS: ev.DeletedTimeStamp}})
		return
	case "message_replied", "channel_join", "channel_leave", "group_join", "group_leave":
		return // no message of a thread (message_replied only tells the parent's reply count)
	}
	if ev.Message == nil || ev.Message.Timestamp == "" {
		return
	}
	m := slack.Message{Msg: *ev.Message}
	if m.Channel == "" {
		m.Channel = ev.Channel
	}
	if isDM(ev.Channel) && m.ThreadTimestamp == "" && newMessage(ev.SubType) && !c.own(m) {
		c.started(ctx, ev.Channel, m) // in the agent pane, every message starts a thread
	}
	c.put(ctx, ev.Channel, m)
}

// newMessage reports whether a message event of subtype says a new message.
func newMessage(subtype string) bool {
	switch subtype {
	case "", "file_share", "me_message", "thread_broadcast", "bot_message":
		return true
	}
	return false
}

// own reports whether the bot wrote m.
func (c *Cache) own(m slack.Message) bool {
	return c.opt.BotUserID != "" && m.User == c.opt.BotUserID || c.opt.BotID != "" && m.BotID == c.opt.BotID
}

// Mention applies an app_mention (a message in its thread, as its message event would).
func (c *Cache) Mention(ctx context.Context, ev *slackevents.AppMentionEvent) {
	if c == nil {
		return
	}
	if ev.Edited != nil {
		return // its message_changed says more
	}
	m := slack.Message{Msg: slack.Msg{Type: "message", Channel: ev.Channel, User: ev.User, BotID: ev.BotID,
		Text: ev.Text, Timestamp: ev.TimeStamp, ThreadTimestamp: ev.ThreadTimeStamp, Blocks: ev.Blocks,
		Attachments: ev.Attachments, Files: ev.Files, Team: ev.UserTeam}}
	if m.ThreadTimestamp == "" {
		c.started(ctx, ev.Channel, m) // a top-level mention starts the thread the bot answers in
	}
	c.put(ctx, ev.Channel, m)
}

// Posted records a message the bot posted (or began streaming) at ts in thread threadTS ("": top
// level): its text and mark (metadata; zero: none). Its later edits find its thread by its ts.
func (c *Cache) Posted(ctx context.Context, channel, threadTS, ts, text string, mark slack.SlackMetadata) {
	if c == nil {
		return
	}
	c.remember(channel, ts, threadTS)
	c.wrote(ctx, channel, threadTS, ts, text, mark)
}

// Updated records an edit of the bot's message ts (or the end of its stream): its text and mark. A
// message not posted by this process lately is left to its message_changed event.
func (c *Cache) Updated(ctx context.Context, channel, ts, text string, mark slack.SlackMetadata) {
	if c == nil {
		return
	}
	if threadTS, ok := c.threadOf(channel, ts); ok {
		c.wrote(ctx, channel, threadTS, ts, text, mark)
	}
}

// Deleted records that the bot deleted its message ts (one not posted by this process lately is
// left to its message_deleted event).
func (c *Cache) Deleted(ctx context.Context, channel, ts string) {
	if c == nil {
		return
	}
	if threadTS, ok := c.threadOf(channel, ts); ok {
		m := slack.Message{Msg: slack.Msg{Timestamp: ts, ThreadTimestamp: threadTS}}
		c.apply(ctx, channel, m, state.ThreadOp{Kind: state.ThreadDelete, ThreadMessage: state.ThreadMessage{TS: ts}})
	}
}

// wrote puts the bot's message as it wrote it.
func (c *Cache) wrote(ctx context.Context, channel, threadTS, ts, text string, mark slack.SlackMetadata) {
	m := slack.Message{Msg: slack.Msg{Type: "message", Channel: channel, User: c.opt.BotUserID, BotID: c.opt.BotID,
		Text: text, Timestamp: ts, ThreadTimestamp: threadTS, Metadata: mark}}
	c.put(ctx, channel, m)
}

// put applies m (an event's or a write's) to the entries it belongs to.
func (c *Cache) put(ctx context.Context, channel string, m slack.Message) {
	tm, err := encode(m)
	if err != nil {
		c.log.Warn("thread cache: a message could not be encoded", zap.Error(err))
		return
	}
	c.apply(ctx, channel, m, state.ThreadOp{Kind: state.ThreadPut, ThreadMessage: tm})
}

// apply makes op in the entries m belongs to: its thread (a top-level message is the parent of its
// own, if it has one), and a DM's top level for a top-level message of a DM.
func (c *Cache) apply(ctx context.Context, channel string, m slack.Message, op state.ThreadOp) {
	thread := m.ThreadTimestamp
	if thread == "" {
		thread = m.Timestamp
	}
	keys := []string{Key(channel, thread)}
	if isDM(channel) && (thread == m.Timestamp || m.SubType == "thread_broadcast") {
		keys = append(keys, Key(channel, ""))
	}
	for _, key := range keys {
		op := state.ThreadOp{Kind: op.Kind, ThreadMessage: c.sealed(key, op.ThreadMessage)}
		if err := c.opt.Store.Apply(ctx, key, []state.ThreadOp{op}); err != nil {
			c.log.Debug("thread cache: apply failed", zap.String("key", key), zap.Error(err))
		}
	}
}

// remember notes that the bot's message ts is in thread threadTS ("": top level).
func (c *Cache) remember(channel, ts, threadTS string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.where) >= whereMax/2 {
		c.whereOld, c.where = c.where, make(map[string]string)
	}
	c.where[channel+"/"+ts] = threadTS
}

// threadOf is the thread of the bot's message ts ("": top level), if remembered.
func (c *Cache) threadOf(channel, ts string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.where[channel+"/"+ts]; ok {
		return t, true
	}
	t, ok := c.whereOld[channel+"/"+ts]
	return t, ok
}

// encode splits m into its body and its mark.
func encode(m slack.Message) (state.ThreadMessage, error) {
	mark := m.Metadata
	m.Metadata = slack.SlackMetadata{}
	body, err := json.Marshal(m)
	if err != nil {
		return state.ThreadMessage{}, fmt.Errorf("encode message: %w", err)
	}
	tm := state.ThreadMessage{TS: m.Timestamp, Body: body}
	if mark.EventType != "" {
		if tm.Mark, err = json.Marshal(mark); err != nil {
			return state.ThreadMessage{}, fmt.Errorf("encode mark: %w", err)
		}
	}
	return tm, nil
}

// sealed is tm signed for entry key.
func (c *Cache) sealed(key string, tm state.ThreadMessage) state.ThreadMessage {
	return state.ThreadMessage{TS: tm.TS, Body: c.seal.seal(key, tm.TS, 'm', tm.Body), Mark: c.seal.seal(key, tm.TS, 'k', tm.Mark)}
}

// decodeAll is the messages of entry key, each opened (see sealer) and decoded.
func (c *Cache) decodeAll(key string, tms []state.ThreadMessage) ([]slack.Message, error) {
	out := make([]slack.Message, 0, len(tms))
	for _, tm := range tms {
		body, err := c.seal.open(key, tm.TS, 'm', tm.Body)
		if err != nil {
			return nil, fmt.Errorf("message %s: %w", tm.TS, err)
		}
		mark, err := c.seal.open(key, tm.TS, 'k', tm.Mark)
		if err != nil {
			return nil, fmt.Errorf("mark %s: %w", tm.TS, err)
		}
		var m slack.Message
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("decode message %s: %w", tm.TS, err)
		}
		if len(mark) > 0 {
			if err := json.Unmarshal(mark, &m.Metadata); err != nil {
				return nil, fmt.Errorf("decode mark %s: %w", tm.TS, err)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// newGen names one Begin.
func newGen() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
