// Package followup decides whether a thread message without a mention is for the bot: whether it
// may be (it replies in a thread, addresses nobody else, and is more than thanks or an emoji) and
// whether its thread is one the bot takes part in. It owns the threads the bot is known to take
// part in (or not), remembered per process and marked for every replica, so that a follow-up that
// lands on another replica than the answer is known there. It reads no thread itself: the answer
// hands it its read (Tracker.Read). The bot's loop and the access rules ask it, without I/O, through
// the answers' Triage and KnownFollowUp.
package followup

import (
	"context"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/ttlcache"
	"github.com/llmbot/llmbot/route"
)

// Bounds of the threads remembered per process.
const (
	threadCacheSize = 10000
	threadCacheTTL  = 6 * time.Hour
)

// sharedMarkTimeout bounds one look at the shared thread marks: Triage runs in the bot's event
// loop, so a slow Redis must not hold it for long; the state package gives up on Redis sooner
// (500 ms) and answers from memory, so this is a last resort.
const sharedMarkTimeout = time.Second

// Marks are flags every replica sees (the state package's marks).
type Marks interface {
	Mark(ctx context.Context, key string, ttl time.Duration) error
	Marked(ctx context.Context, key string) (bool, error)
}

// Reader reads a thread: its messages and how many older ones the read left out (gateway.ThreadReads).
type Reader interface {
	Replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error)
}

// Options configure a Tracker.
type Options struct {
	// On answers thread messages without a mention in the bot's threads; off, none is for the bot.
	On bool
	// The bot's identity (auth.test): to recognise its own messages and mentions.
	BotUserID, BotID string
	// Marks tells every replica the threads the bot answers in. nil: this process knows its own.
	Marks Marks
	Log   *zap.Logger // nil: no logs
}

// Tracker decides whether thread messages without a mention are for the bot. It is safe for
// concurrent use.
type Tracker struct {
	opt Options
	// threads: channel/thread_ts -> the bot takes part (positive and negative).
	threads *ttlcache.Cache[bool]
}

// New returns a Tracker that remembers nothing yet.
func New(opt Options) *Tracker {
	if opt.Log == nil {
		opt.Log = zap.NewNop()
	}
	return &Tracker{opt: opt, threads: ttlcache.New[bool](threadCacheSize, threadCacheTTL)}
}

// Triage says, without I/O, whether the bot should run req, and whether it keeps quiet about it
// when it cannot (the bot is full or restarting). A message with a mention, a DM or a Regenerate
// runs and is told. A thread message without a mention runs only when it may be for the bot (see
// May) and its thread is not remembered as one the bot has no part in, so that people talking
// among themselves never take a place in the bot's queue; it is quiet unless its thread is
// remembered as one of the bot's (Known).
func (t *Tracker) Triage(req route.ReplyRequest) (run, quiet bool) {
	quiet = !t.Known(req)
	if !req.FollowUp {
		return true, quiet
	}
	if !t.May(req, req.ThreadTS) {
		return false, quiet
	}
	known, remembered := t.remembered(req.Channel + "/" + req.ThreadTS)
	return !remembered || known, quiet
}

// Known reports, without I/O, whether the follow-up req would be answered as far as is known now:
// follow-ups are on, it is a reply in a thread, it is not addressed to someone else, and the thread
// is remembered as one the bot takes part in. Triage uses it to tell the asker when the bot cannot
// answer (busy, shutting down) instead of dropping a follow-up silently, and the access rules to
// count only refusals of follow-ups that would have been answered. Any other message is known.
func (t *Tracker) Known(req route.ReplyRequest) bool {
	if !req.FollowUp {
		return true
	}
	if !t.May(req, req.ThreadTS) {
		return false
	}
	known, ok := t.threads.Get(req.Channel + "/" + req.ThreadTS)
	return ok && known
}

// May reports whether the follow-up req, in thread threadTS, may be for the bot, before the thread
// is looked at: follow-ups are on, it replies in a thread, it does not address someone else, and it
// is more than thanks or an emoji.
func (t *Tracker) May(req route.ReplyRequest, threadTS string) bool {
	return t.opt.On && threadTS != "" && threadTS != req.TS && !t.addressedToOthers(req.Text) &&
		(len(req.Files) > 0 || len(req.Attachments) > 0 || !acknowledgement(req.Text))
}

// Read reports whether the bot takes part in a thread: its parent mentions the bot or the bot has
// written in it. When the thread is not remembered, r reads it once; the messages are returned for
// reuse as context, with how many older ones the read left out.
func (t *Tracker) Read(ctx context.Context, r Reader, channel, threadTS string) (bool, []slack.Message, int, error) {
	key := channel + "/" + threadTS
	if known, ok := t.remembered(key); ok {
		return known, nil, 0, nil
	}
	thread, leftOut, err := r.Replies(ctx, channel, threadTS)
	if err != nil {
		return false, nil, 0, err
	}
	known := t.involved(thread)
	t.threads.Put(key, known)
	return known, thread, leftOut, nil
}

// Joined remembers that the bot answers in the thread, here and for the other replicas.
func (t *Tracker) Joined(ctx context.Context, channel, threadTS string) {
	key := channel + "/" + threadTS
	t.threads.Put(key, true)
	if t.opt.Marks == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedMarkTimeout)
	defer cancel()
	if err := t.opt.Marks.Mark(ctx, "thread:"+key, threadCacheTTL); err != nil {
		t.opt.Log.Warn("thread not marked for the other replicas", zap.Error(err))
	}
}

// remembered is what the process remembers of the thread key (see threads), a "no" checked
// against the other replicas' marks: another replica may have answered there since.
func (t *Tracker) remembered(key string) (known, ok bool) {
	known, ok = t.threads.Get(key)
	if !ok || known || t.opt.Marks == nil {
		return known, ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedMarkTimeout)
	defer cancel()
	if marked, err := t.opt.Marks.Marked(ctx, "thread:"+key); err == nil && marked {
		t.threads.Put(key, true)
		return true, true
	}
	return false, true
}

// addressedToOthers reports whether a follow-up mentions people but not the bot: it is meant for them.
func (t *Tracker) addressedToOthers(text string) bool {
	return strings.Contains(text, "<@") && !strings.Contains(text, "<@"+t.opt.BotUserID+">")
}

// involved reports whether the bot takes part in thread: its parent mentions the bot, or the bot
// wrote in it.
func (t *Tracker) involved(thread []slack.Message) bool {
	mention := "<@" + t.opt.BotUserID + ">"
	for i, m := range thread {
		if i == 0 && t.opt.BotUserID != "" && strings.Contains(m.Text, mention) {
			return true
		}
		if (convo.Bot{UserID: t.opt.BotUserID, BotID: t.opt.BotID}).Posted(m) {
			return true
		}
	}
	return false
}
