package handlers

// Closing a natively streamed answer (closing.go plans the steps): its final write, the close of a
// stream the person stopped, the rescue of one whose appends failed, and the stop of one as it stands.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/slackmd"
)

// streamClose is the closing writes of a natively streamed answer: one per closing step.
type streamClose struct{ *streamSink }

// closeStopped closes a stream the user stopped in Slack: Slack ended it, so it is stopped with
// the note and the mark if it still takes calls.
func (s streamClose) closeStopped(ctx context.Context, c closing) error {
	a := s.answer
	note := convo.NoteSuffix(c.note, slackmd.FormatMarkdown)
	if s.sent == 0 {
		note = convo.NoteAlone(c.note, slackmd.FormatMarkdown)
	}
	err := a.r.streamer.StopStream(ctx, a.req.Channel, s.ts, note, s.doneMark(c.kind, c.note), s.buttons())
	if err != nil && gateway.SlackErr(err) != "stopped_by_user" && gateway.SlackErr(err) != "message_not_in_streaming_state" {
		return fmt.Errorf("chat.stopStream: %w", err)
	}
	return nil
}

// final appends the rest of the answer c and its note, and stops the stream. What Slack did not
// take waits for a later call (a final write again, at shutdown). Its waits for a turn end at
// c.turnBy (unless zero).
func (s streamClose) final(ctx context.Context, c closing) error {
	a := s.answer
	if c.kind == convo.MarkError {
		s.modelDone(ctx, gateway.TaskError)
	} else {
		s.modelDone(ctx, gateway.TaskComplete)
	}
	s.feed(c.md)
	rest := s.pend + s.ms.Flush()
	s.pend = ""
	if s.state == streamBroken {
		s.pend = rest
		return errAppendsRefused
	}
	text := rest + convo.NoteSuffix(c.note, slackmd.FormatMarkdown)
	if s.sent == 0 && strings.TrimSpace(rest) == "" {
		text = strings.TrimPrefix(text, "\n\n")
		if text == "" {
			text = convo.NoteAlone(textEmpty, slackmd.FormatMarkdown)
		}
	}
	whole := len(text)
	// An append waits for the appends budget (a Retry-After recorded there by anyone's 429 too).
	s.appendWait = a.r.paced.EditTurn(s.lane, pace.Final, time.Time{}).By(c.turnBy).Wait
	var last error // the attempt's error, whose 429 throttled charges
	streams := gateway.Turn{Wait: a.r.paced.StreamTurn().Wait, Throttled: func(d time.Duration) { s.throttled(last, d) }}
	err := a.r.paced.Do(ctx, gateway.ClosingRetry, &a.writes.outage, streams.By(c.turnBy),
		func(ctx context.Context) error {
			last = s.finalAttempt(ctx, &text, c.kind, c.note)
			return last
		})
	if err == nil || gateway.SlackErr(err) == "stopped_by_user" {
		return nil // stopped at the very end: what was streamed stays
	}
	s.pend = rest[min(whole-len(text), len(rest)):]
	return err
}

// stopAsItStands stops the streamed message being written with the text it shows, and note (if any)
// after it. Its waits for a turn end at by (unless zero).
func (s streamClose) stopAsItStands(ctx context.Context, note string, by time.Time) error {
	a := s.answer
	if s.ts == "" && note != "" {
		// No streamed message is open: the note goes in a new one (the budgets of any start).
		var ts string
		err := a.r.paced.Do(ctx, gateway.ClosingRetry, &a.writes.outage, a.r.paced.StartTurn(a.req.Channel).By(by),
			func(ctx context.Context) (err error) {
				ts, err = a.r.streamer.StartStream(ctx, a.streamStart(""))
				return err
			})
		if err != nil {
			return fmt.Errorf("chat.startStream: %w", err)
		}
		s.ts, s.sent = ts, 0
		s.starts++
	}
	if s.ts == "" {
		return nil
	}
	text := convo.NoteSuffix(note, slackmd.FormatMarkdown)
	if s.sent == 0 {
		text = strings.TrimPrefix(text, "\n\n")
	}
	err := a.r.paced.Do(ctx, gateway.ClosingRetry, &a.writes.outage, a.r.paced.StreamTurn().By(by),
		func(ctx context.Context) error {
			mark, bs := s.mark(convo.MarkAnswer, note), []gateway.Button(nil)
			if note != "" {
				mark, bs = s.doneMark(convo.MarkAnswer, note), s.buttons() // the answer's last message
			}
			return a.r.streamer.StopStream(ctx, a.req.Channel, s.ts, text, mark, bs)
		})
	if err != nil {
		return fmt.Errorf("chat.stopStream: %w", err)
	}
	s.ts = ""
	return nil
}

// finalAttempt writes what is left of the answer (*text, shortened by what Slack took) and stops the
// streamed message marked with kind and note.
func (s streamClose) finalAttempt(ctx context.Context, text *string, kind convo.MarkKind, note string) error {
	a := s.answer
	if s.ts == "" || s.sent+len(*text) > slackmd.MarkdownLimit {
		// Too long for this message (or one call), or the next message is not started yet: append it in
		// pieces, continuing in new messages as needed, then stop the last with nothing more to add. A
		// retry goes on from what Slack did not take.
		n, err := s.write(ctx, sameCtx, *text)
		*text = (*text)[n:]
		if err != nil {
			return err
		}
	}
	if s.ts == "" {
		return nil // nothing was left to write: the last message was stopped full
	}
	err := a.r.streamer.StopStream(ctx, a.req.Channel, s.ts, *text, s.doneMark(kind, note), s.buttons())
	switch {
	case streamEnded(err) && s.sent+len(*text) <= slackmd.MarkdownLimit:
		// Slack ended it by itself: it is finished with what it took and the rest, as the answer's last.
		if err := s.finishExpired(ctx, sameCtx, s.shown+*text, s.doneMark(kind, note), s.buttons()); err != nil {
			return err
		}
		*text = ""
		return nil
	case streamEnded(err):
		if err := s.finishExpired(ctx, sameCtx, s.shown, s.mark(convo.MarkAnswer, ""), nil); err != nil {
			return err
		}
		return s.finalAttempt(ctx, text, kind, note) // the rest in a new message
	case err != nil:
		return startStopError{fmt.Errorf("chat.stopStream: %w", err)}
	}
	return nil
}

// sameCtx is write's call for the final write: its calls go with the final write's own time box.
func sameCtx(ctx context.Context) (context.Context, context.CancelFunc) { return ctx, func() {} }

// rescue posts the whole answer (mrkdwn, split into parts) as new thread messages, then deletes the
// streamed messages they replace, so that nothing shows twice (and the answer is replayed once, from
// messages that carry their marks: a streamed message gets its mark only when stopped). A streamed
// message that cannot be deleted is stopped as it stands, if it is the open one.
func (s streamClose) rescue(ctx context.Context, md, note string, kind convo.MarkKind) error {
	a := s.answer
	var parts []string
	if strings.TrimSpace(md) != "" {
		parts = slackmd.Split(md, slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)
	}
	parts = withNote(parts, note)
	var rp rescuePosts
	for i, text := range parts {
		msg := gateway.Msg{Text: text, Mark: a.marks.mark(kind, "", i, rp.first)}
		if i == len(parts)-1 {
			msg.Mark.Note, msg.Mark.Done, msg.Buttons = note, true, s.buttons()
		}
		if err := s.rescuePost(ctx, &rp, i, msg); err != nil {
			// The streamed messages stay (stopped as they stand, with a note): the parts posted would
			// repeat their text.
			s.takeBack(ctx, rp)
			return fmt.Errorf("chat.postMessage part %d: %w", i+1, err)
		}
	}
	a.writes.closedInJournal() // the whole answer shows: deleting the streamed messages is tidying
	s.deleteStreamed(ctx)
	return nil
}

// rescuePosts are the messages a rescue has posted: first is the answer's first (posted anew, the
// later parts name it), and cut: the last post timed out or was cut, so Slack may have posted it.
type rescuePosts struct {
	first  string
	posted []string
	cut    bool
}

// rescuePost posts msg, part i of the rescued answer, and records it in rp.
func (s streamClose) rescuePost(ctx context.Context, rp *rescuePosts, i int, msg gateway.Msg) error {
	a := s.answer
	return a.r.paced.Do(ctx, gateway.ClosingRetry, &a.writes.outage, a.r.paced.PostTurn(a.req.Channel),
		func(ctx context.Context) error {
			ts, err := a.r.msgs.Post(ctx, a.req.Channel, a.threadTS, msg)
			if i == 0 {
				rp.first = ts
			}
			if err == nil {
				rp.posted = append(rp.posted, ts)
				a.writes.posted(ts)
			}
			rp.cut = errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
			return err
		})
}

// takeBack deletes the parts a failed rescue posted. The failed post may have landed, naming the
// first posted part: it is taken back too if the thread shows it (the look is optional: one free read
// token, one try).
func (s streamClose) takeBack(ctx context.Context, rp rescuePosts) {
	a := s.answer
	if len(rp.posted) > 0 && rp.cut {
		strays, _ := a.strayParts(ctx, rp.first, rp.posted)
		rp.posted = append(rp.posted, strays...)
	}
	for _, ts := range rp.posted {
		if err := a.writes.deleteMessage(ctx, gateway.ReplaceRetry, time.Time{}, ts); err != nil {
			a.log.Warn("rescue: a posted part could not be taken back; its text shows twice", zap.Error(err))
		}
	}
}

// deleteStreamed deletes the streamed messages a rescue has posted anew. One that cannot be deleted
// is stopped as it stands, if it is the open one: its text shows twice.
func (s streamClose) deleteStreamed(ctx context.Context) {
	a := s.answer
	for _, ts := range s.streamed {
		err := a.writes.deleteMessage(ctx, gateway.InterimRetry, time.Time{}, ts)
		if err == nil {
			continue
		}
		a.log.Warn("rescue: a streamed message could not be deleted; its text shows twice", zap.Error(err))
		if ts != s.ts {
			continue
		}
		if err := s.stopAsItStands(ctx, "", time.Time{}); err != nil {
			a.log.Debug("rescue: the streamed message could not be stopped either", zap.Error(err))
		}
	}
	s.streamed, s.ts = nil, ""
}
