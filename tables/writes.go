package tables

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/ttlcache"
)

// The outcomes a table is counted by (Options.Observe).
const (
	Sent    = "sent"    // Slack took the message with its table block
	Refused = "refused" // Slack refused the block (invalid_blocks): the message went as text
)

// Options configure Writes.
type Options struct {
	// Refusal is how long tables are not tried after Slack refused one; 0: gateway.DefaultRefusal.
	Refusal time.Duration
	// Observe, when set, hears each table's outcome (Sent, Refused). It must not block.
	Observe func(outcome string)
	Log     *zap.Logger
}

// shownSize and shownFor bound the messages remembered as showing a table block: an edit of one
// without a table must take the block off (Slack keeps a message's blocks when an edit has none).
const (
	shownSize = 5000
	shownFor  = 24 * time.Hour
)

// Writes are w writing an answer's final messages (gateway.Msg.Markdown set) with a native table
// block where one fits (Blocks). When Slack refuses the block with invalid_blocks the same message
// is written again as text (the aligned code block), and no table is tried for a while: Slack
// refuses the block for the app or the workspace (an older client, a block it does not know), not
// for one message. The rewrite is a second call outside the writer's budget turn; it happens once
// per refusal window.
type Writes struct {
	gateway.Writes
	opt     Options
	refused gateway.Refused
	shown   *ttlcache.Cache[bool] // channel/ts of messages this process gave a table block
}

// NewWrites returns w with native tables.
func NewWrites(w gateway.Writes, opt Options) *Writes {
	if opt.Refusal <= 0 {
		opt.Refusal = gateway.DefaultRefusal
	}
	if opt.Log == nil {
		opt.Log = zap.NewNop()
	}
	return &Writes{Writes: w, opt: opt, shown: ttlcache.New[bool](shownSize, shownFor)}
}

// Post posts m, with a table block when it has one that fits.
func (w *Writes) Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (string, error) {
	var ts string
	err := w.write(m, func(m gateway.Msg) (err error) {
		ts, err = w.Writes.Post(ctx, channel, threadTS, m)
		if err == nil && m.Blocks != nil {
			w.shown.Put(channel+"/"+ts, true)
		}
		return err
	})
	return ts, err
}

// Update writes m into message ts, with a table block when it has one that fits; without one, a
// table block the message showed is taken off.
func (w *Writes) Update(ctx context.Context, channel, ts string, m gateway.Msg) error {
	key := channel + "/" + ts
	if _, had := w.shown.Get(key); had && m.Blocks == nil && m.Buttons == nil {
		m.Buttons = []gateway.Button{} // blocks=[]: the text shows again
	}
	return w.write(m, func(m gateway.Msg) error {
		err := w.Writes.Update(ctx, channel, ts, m)
		if err == nil && m.Blocks != nil {
			w.shown.Put(key, true)
		}
		return err
	})
}

// write calls send with m's table block when it has one that fits and tables are not refused
// lately; refused with invalid_blocks, it calls send again with m as text.
func (w *Writes) write(m gateway.Msg, send func(gateway.Msg) error) error {
	if m.Markdown == "" || m.Blocks != nil || !w.refused.Allowed() {
		return send(m)
	}
	blocks, ok := Blocks(m.Text, m.Markdown)
	if !ok {
		return send(m)
	}
	tm := m
	tm.Blocks = blocks
	err := send(tm)
	if gateway.SlackErr(err) != "invalid_blocks" {
		if err == nil {
			w.observe(Sent)
		}
		return err
	}
	w.refused.Refuse(w.opt.Refusal)
	w.observe(Refused)
	w.opt.Log.Warn("Slack refused a table block: answers show tables as code blocks for a while", zap.Error(err),
		zap.Duration("for", w.opt.Refusal))
	return send(m)
}

func (w *Writes) observe(outcome string) {
	if w.opt.Observe != nil {
		w.opt.Observe(outcome)
	}
}
