package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/slackmd"
)

// sink is where an answer is written, post-and-edit (editSink) or Slack's native streaming
// (streamSink), as the steps of the answer's lifecycle use it: each takes only the calls it makes,
// the model's rounds a roundSink (generate.go), the closing a closingSink (closing.go), the report
// its counts; close releases the sink's lane once the answer is closed.
type sink struct {
	round   roundSink
	closing closingSink
	counts  writeCounts
	close   func()
}

// editing is e as an answer's sink.
func editing(e *editSink) sink { return sink{round: e, closing: e, counts: e, close: e.close} }

// streaming is s as an answer's sink.
func streaming(s *streamSink) sink { return sink{round: s, closing: s, counts: s, close: s.close} }

// writeCounts are what the report of a finished answer tells of its sink.
type writeCounts interface {
	fields() []zap.Field
	// writes is the number of interim and final Slack writes made (chat.update / chat.appendStream).
	writes() int
}

// open shows life at once: for a Regenerate the old answer's first message turned placeholder (old,
// see openInPlace), else a native stream when allowed (falling back by itself when Slack refuses it),
// else a placeholder message.
func (a *answer) open(ctx context.Context, old []string) (sink, error) {
	if len(old) > 0 {
		e, err := a.openInPlace(ctx, old)
		if err == nil {
			return editing(e), nil
		}
		if ctx.Err() != nil {
			return sink{}, err
		}
		a.replacesAbove = gateway.SlackErr(err) != "message_not_found"
		a.log.Info("regenerate: the old answer cannot be edited; answering in a new message", zap.Error(err))
	}
	if a.threadTS != "" && a.r.streams(a.req) {
		if !a.r.paced.TryStream() {
			a.log.Debug("native streaming budget used up; answering by editing")
			return a.openEdit(ctx)
		}
		s, err := a.openStream(ctx)
		if err == nil {
			return streaming(s), nil
		}
		if ctx.Err() != nil {
			return sink{}, fmt.Errorf("chat.startStream: %w", err)
		}
		switch ra, limited := gateway.RateLimited(err); {
		case limited:
			a.r.paced.StreamTurn().Throttled(ra)
			a.log.Info("native streaming rate limited; answering by editing", zap.Error(err))
		case gateway.RefusesStreaming(err):
			a.r.streaming.Refuse(a.r.opt.StreamRefusal)
			a.log.Warn("native streaming refused; answering by editing", zap.Error(err),
				zap.Duration("for", a.r.opt.StreamRefusal))
		default:
			a.log.Info("native streaming failed; answering by editing", zap.Error(err))
		}
	}
	return a.openEdit(ctx)
}

// openEdit opens an answer in edit mode: with PlaceholderAfter, nothing is posted yet (the first
// text will be, or the placeholder once PlaceholderAfter has passed without text); else the
// placeholder is posted now.
func (a *answer) openEdit(ctx context.Context) (sink, error) {
	if after := a.r.opt.PlaceholderAfter; after > 0 {
		e := a.editSink(a.r.paced.EditLane(), "")
		e.placeholderDue = a.start.Add(after)
		return editing(e), nil
	}
	ts, err := a.writes.postRetry(ctx, gateway.InterimRetry, nil, a.marks.placeholder())
	if err != nil {
		return sink{}, fmt.Errorf("post placeholder: %w", err)
	}
	e := a.editSink(a.r.paced.EditLane(), ts)
	e.posts = 1
	return editing(e), nil
}

// editSink writes the answer into the placeholder ts ("": none posted yet) and the messages it
// continues in.
func (a *answer) editSink(lane *pace.Lane, ts string) *editSink {
	limit := slackmd.MrkdwnLimit
	if a.r.opt.Buttons {
		limit = buttonPartLimit
	}
	e := &editSink{
		answer:        a,
		lane:          lane,
		editRendering: editRendering{pager: slackmd.NewPager(slackmd.FormatMrkdwn, limit)},
		end:           a.r.paced.ClaimEnd(a.req.Channel),
	}
	if ts == "" {
		e.postDue = true // the first write posts the first part
		return e
	}
	e.ts, e.shown, e.btn = []string{ts}, []string{""}, []string{buttonKey(a.marks.buttons(false))}
	return e
}

// openInPlace starts a Regenerate where the old answer stands (old: its messages, first first), so
// the thread ends with one answer: the first message becomes the placeholder (an edit, like the
// answer's first text, at that priority) and the others are deleted; the new answer continues in
// new messages when it is longer. Returned errors are the edit's: the caller then answers in a new
// message. An old part that cannot be deleted stays (logged).
func (a *answer) openInPlace(ctx context.Context, old []string) (*editSink, error) {
	lane := a.r.paced.EditLane()
	err := a.r.paced.Update(ctx, gateway.InterimRetry, nil, a.r.paced.EditTurn(lane, pace.First, time.Now()), a.req.Channel, old[0], a.marks.placeholder())
	if err != nil {
		lane.Close()
		return nil, fmt.Errorf("chat.update old answer: %w", err)
	}
	for _, ts := range old[1:] {
		if err := a.writes.deleteMessage(ctx, gateway.ReplaceRetry, time.Time{}, ts); err != nil {
			a.log.Warn("regenerate: a part of the old answer could not be deleted", zap.Error(err))
		}
	}
	e := a.editSink(lane, old[0])
	e.inPlace = true
	return e, nil
}

func (a *answer) openStream(ctx context.Context) (*streamSink, error) {
	if err := a.r.paced.PostWait(ctx, a.req.Channel); err != nil {
		return nil, err
	}
	ts, err := a.r.streamer.StartStream(ctx, a.streamStart(""))
	if err != nil {
		return nil, err
	}
	a.writes.posted(ts)
	now := time.Now()
	return &streamSink{answer: a, lane: a.r.paced.AppendLane(), ms: slackmd.NewMarkdownStream(), ts: ts, firstTS: ts,
		streamed: []string{ts}, starts: 1, opened: now, wrote: now}, nil
}

func (a *answer) streamStart(md string) gateway.StreamStart {
	team := a.req.Team
	if team == "" {
		team = a.r.opt.TeamID
	}
	return gateway.StreamStart{Channel: a.req.Channel, ThreadTS: a.threadTS, RecipientUserID: a.req.User,
		RecipientTeamID: team, Markdown: md}
}

// askerName is the asker's display name for a stop note: resolve's cache, else one look-up of at
// most stopNameTimeout (a thread one person started needs no names, so the asker may not be cached).
// ctx is the answer's own, already cancelled by the stop.
func (a *answer) askerName(ctx context.Context) (string, bool) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopNameTimeout)
	defer cancel()
	return a.r.names.Resolve(lctx, a.log, []string{a.req.User}).Name(a.req.User)
}

// outcome decides the status note and mark kind of a finished stream, and the error Reply returns.
func (a *answer) outcome(ctx context.Context, md, finishReason string, streamErr error) (string, convo.MarkKind, error) {
	empty := strings.TrimSpace(md) == ""
	kind := convo.MarkAnswer
	var note string
	var err error
	switch {
	case streamErr == nil && (finishReason != "" || ctx.Err() == nil):
		note = finishNote(finishReason, empty)
	case ctx.Err() != nil: // shutdown, stop button, or the caller's own cancellation
		cause := context.Cause(ctx)
		if note = stopNote(cause); note == "" {
			note = "Interrupted."
		}
		if errors.Is(cause, ErrStopped) {
			if n, ok := a.askerName(ctx); ok {
				note = "Stopped by " + n + "." // only the asker may stop an answer
			}
		}
		if empty {
			kind = convo.MarkNotice
		}
		return note, kind, fmt.Errorf("answer: %w", cause)
	case errors.Is(streamErr, notes.ErrStalled):
		note, err = notes.Stalled, fmt.Errorf("chat stream: no data for %s: %w", a.r.opt.StallTimeout, streamErr)
	default:
		note, err = notes.Model(streamErr, !empty), fmt.Errorf("chat stream: %w", streamErr)
	}
	if empty && note != "" {
		kind = convo.MarkError
	}
	return note, kind, err
}
