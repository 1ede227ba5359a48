package handlers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/watch"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/slackmd"
)

// streamSink writes an answer with Slack's native streaming: chat.startStream when the answer opens,
// chat.appendStream with the safe-to-append Markdown (slackmd.MarkdownStream) paced by the appends
// scheduler, chat.stopStream with the rest and the mark. A message that would pass slackmd.MarkdownLimit is
// stopped and the answer continues in a new streamed message.
//
// Slack ends a stream by itself after about five minutes (whether of age or of silence is not
// known), and the message is then stuck until chat.update rewrites it. So a streamed message is
// also stopped, to go on in a new one, once it is ReplyOptions.StreamRollover old or has had no
// append for StreamIdle (while the model is silent, the writer stops it then: idle); and one Slack
// has ended all the same is finished with chat.update from what it took (finishExpired), the
// answer going on in a new message. The rescue (re-posting the whole answer) stays the last resort.
type streamSink struct {
	answer   *answer
	lane     *pace.Lane
	ms       *slackmd.MarkdownStream
	fed      int       // bytes of the answer fed to ms
	pend     string    // ms output not yet appended
	ts       string    // the streamed message being written ("" after it was stopped to continue in a new one)
	sent     int       // characters in it
	shown    string    // the markdown Slack took into it (what chat.update finishes it with if Slack ends it)
	opened   time.Time // when it was started
	wrote    time.Time // its last start or append
	firstTS  string    // the answer's first streamed message, which later ones name (Mark.First)
	streamed []string  // every streamed message of the answer (rescue deletes them)

	interimFailures
	// state is where the stream's writes are (streamState).
	state streamState

	starts  int
	appends int
	expired int // streamed messages Slack ended by itself, finished by chat.update
	rescued bool
	// modelShown: the model task was marked done (its first words came, or the answer closed)
	modelShown bool

	// appendWait, when set (by the final write), is waited for before each chat.appendStream: the
	// appends budget (the lane), which interim writes wait for before they write.
	appendWait func(ctx context.Context) error
}

// streamState is where the writes of a natively streamed answer are; the transitions are drawn in
// lifecycle.go.
type streamState int

const (
	streamLive    streamState = iota // appends go on
	streamBroken                     // appends failed repeatedly (not transiently), or one may have landed unseen: the final write rescues the answer
	streamStopped                    // the person stopped it in Slack, which ended the stream: it closes with its note
)

func (s *streamSink) feed(md string) {
	if len(md) > s.fed {
		s.pend += s.ms.Feed(md[s.fed:])
		s.fed = len(md)
	}
}

// idleDue is when the open streamed message must be stopped, before Slack ends it, if no text has
// come to go on in a new message: StreamRollover after its start, StreamIdle after its last
// append. Zero while it shows no text yet (nothing to keep) or once it is stopped: a native stream
// shows life from its start, so nothing else is done while the model is silent.
func (s *streamSink) idleDue() time.Time {
	if s.ts == "" || s.sent == 0 || s.state != streamLive {
		return time.Time{}
	}
	o := s.answer.r.opt
	due := s.opened.Add(o.StreamRollover)
	if idle := s.wrote.Add(o.StreamIdle); idle.Before(due) {
		due = idle
	}
	return due
}

// idle stops the open streamed message, due (idleDue) while the model is silent: the answer goes
// on in a new message with its next text.
func (s *streamSink) idle(ctx context.Context) {
	a := s.answer
	if s.idleDue().IsZero() {
		return
	}
	err := s.stopFull(ctx, a.writes.callCtx)
	if ra, limited := gateway.RateLimited(err); limited {
		s.throttled(err, ra)
	}
	if err != nil && ctx.Err() == nil {
		a.log.Debug("streamed message not stopped before Slack's limit", zap.Error(err))
		s.wrote = time.Now() // tried: the next try after StreamIdle, or the expiry is finished by chat.update
	}
}

// due reports whether the open streamed message is to be stopped before the next append.
func (s *streamSink) due(now time.Time) bool {
	d := s.idleDue()
	return !d.IsZero() && !now.Before(d)
}

func (s *streamSink) interim(ctx, wctx context.Context, snap snapshot, mb *mailbox) {
	a := s.answer
	s.modelDone(ctx, gateway.TaskComplete)
	s.feed(snap.md)
	for s.pend != "" && s.state == streamLive {
		prio := pace.Pending
		if s.sent == 0 {
			prio = pace.First
		}
		if err := s.lane.Wait(wctx, prio, snap.since); err != nil {
			return
		}
		snap = mb.latest(snap)
		s.feed(snap.md)
		// A call under way is not cancelled by a Stop; a retry goes on from what Slack did not take.
		n, err := s.write(ctx, a.writes.callCtx, s.pend)
		s.pend = s.pend[n:]
		if err == nil {
			if a.firstText == 0 {
				a.firstText = time.Since(a.start)
			}
			s.pend = ""
			s.succeeded()
			continue
		}
		if ctx.Err() != nil {
			return
		}
		switch gateway.SlackErr(err) {
		case "stopped_by_user":
			s.state = streamStopped
			a.cancel(ErrStopped) // ends the model request; the answer closes with "Stopped."
			return
		}
		if ra, ok := gateway.RateLimited(err); ok {
			s.throttled(err, ra)
			continue
		}
		a.log.Debug("interim append", zap.Error(err))
		if errors.Is(err, context.DeadlineExceeded) {
			// Slack may have taken it: the stream's text is unknown now, and another append could show
			// it twice. The final write rescues the answer (rescue).
			s.state = streamBroken
			return
		}
		pause, broken := s.failed(err)
		if broken {
			s.state = streamBroken // the loop ends: the final write rescues the answer
		}
		if pause > 0 && watch.Sleep(wctx, pause) != nil {
			return
		}
	}
}

// write appends text to the streamed message, continuing in a new one when it would grow too long. It
// returns how many bytes of text Slack took, so that a retry (after a 429) goes on from there instead of
// repeating them; the sink's state always matches what Slack shows. ctx bounds the waits for budgets;
// each call goes with call(ctx) (callCtx for interim writes: a call Slack may already have carried out
// is not abandoned when the answer is cancelled).
func (s *streamSink) write(ctx context.Context, call gateway.CallCtxFunc, text string) (int, error) {
	done := 0
	for _, piece := range slackmd.SplitLines(text, slackmd.MarkdownLimit) {
		if err := s.writePiece(ctx, call, piece); err != nil {
			return done, err
		}
		done += len(piece)
	}
	return done, nil
}

// writePiece appends piece to the streamed message, or starts a new one with it when none is open or
// the open one is full (stopped first).
func (s *streamSink) writePiece(ctx context.Context, call gateway.CallCtxFunc, piece string) error {
	if s.ts != "" && s.sent > 0 && (s.sent+len(piece) > slackmd.MarkdownLimit || s.due(time.Now())) {
		if err := s.stopFull(ctx, call); err != nil {
			return err
		}
	}
	if s.ts == "" {
		return s.startWith(ctx, call, piece)
	}
	err := s.appendPiece(ctx, call, piece)
	if !streamEnded(err) {
		return err
	}
	// Slack ended the stream by itself: the message keeps what it took, and the answer goes on.
	if err := s.finishExpired(ctx, call, s.shown, s.mark(convo.MarkAnswer, ""), nil); err != nil {
		return err
	}
	return s.startWith(ctx, call, piece)
}

// streamEnded reports the error of a call on a stream Slack has ended by itself.
func streamEnded(err error) bool { return gateway.SlackErr(err) == "message_not_in_streaming_state" }

// stopFull stops the open streamed message, full or due: the next piece starts a new one. One
// Slack has ended meanwhile is finished with chat.update.
func (s *streamSink) stopFull(ctx context.Context, call gateway.CallCtxFunc) error {
	a := s.answer
	if err := a.r.paced.StreamTurn().Wait(ctx); err != nil {
		return err
	}
	cctx, cancel := call(ctx)
	defer cancel()
	err := a.r.streamer.StopStream(cctx, a.req.Channel, s.ts, "", s.mark(convo.MarkAnswer, ""), nil)
	if streamEnded(err) {
		return s.finishExpired(ctx, call, s.shown, s.mark(convo.MarkAnswer, ""), nil)
	}
	if err != nil {
		return startStopError{fmt.Errorf("chat.stopStream: %w", err)}
	}
	s.ts, s.sent, s.shown = "", 0, ""
	return nil
}

// finishExpired finishes the open streamed message, which Slack has ended by itself, with
// chat.update: md (what it took, and the rest of the answer when that is where it ends), mark and
// buttons. The answer goes on in a new message. The edit waits for the chat.update budget.
func (s *streamSink) finishExpired(ctx context.Context, call gateway.CallCtxFunc, md string, mark convo.Mark, buttons []gateway.Button) error {
	a := s.answer
	a.log.Info("Slack ended a streamed message by itself; finishing it with chat.update",
		zap.Duration("age", time.Since(s.opened)), zap.Duration("idle", time.Since(s.wrote)))
	if err := a.r.paced.EditWait(ctx); err != nil {
		return err
	}
	cctx, cancel := call(ctx)
	defer cancel()
	if err := a.r.streamer.FinishStream(cctx, a.req.Channel, s.ts, md, mark, buttons); err != nil {
		return fmt.Errorf("finish ended stream: %w", err)
	}
	s.ts, s.sent, s.shown = "", 0, ""
	s.expired++
	return nil
}

// startWith starts a new streamed message of the answer with piece.
func (s *streamSink) startWith(ctx context.Context, call gateway.CallCtxFunc, piece string) error {
	a := s.answer
	if err := a.r.paced.StartTurn(a.req.Channel).Wait(ctx); err != nil {
		return err
	}
	cctx, cancel := call(ctx)
	defer cancel()
	ts, err := a.r.streamer.StartStream(cctx, a.streamStart(piece))
	if err != nil {
		return startStopError{fmt.Errorf("chat.startStream: %w", err)}
	}
	a.writes.posted(ts)
	s.ts, s.sent, s.shown = ts, len(piece), piece
	s.opened = time.Now()
	s.wrote = s.opened
	s.streamed = append(s.streamed, ts)
	s.starts++
	return nil
}

// appendPiece appends piece to the open streamed message, after appendWait when set.
func (s *streamSink) appendPiece(ctx context.Context, call gateway.CallCtxFunc, piece string) error {
	a := s.answer
	if s.appendWait != nil {
		if err := s.appendWait(ctx); err != nil {
			return err
		}
	}
	cctx, cancel := call(ctx)
	defer cancel()
	if err := a.r.streamer.AppendStream(cctx, a.req.Channel, s.ts, piece); err != nil {
		return fmt.Errorf("chat.appendStream: %w", err)
	}
	s.sent += len(piece)
	s.shown += piece
	s.wrote = time.Now()
	s.appends++
	return nil
}

// startStopError is an error of chat.startStream or chat.stopStream in write, whose 429 is charged to
// their budget (ReplyOptions.Streams), not to the appends'.
type startStopError struct{ err error }

func (e startStopError) Error() string { return e.err.Error() }
func (e startStopError) Unwrap() error { return e.err }

// throttled records the 429 of a call made by write in that call's budget: the answer's lane of the
// appends scheduler for chat.appendStream, Streams for chat.startStream and chat.stopStream (a long
// answer continues in a new message), so that the budget that was spent is the one that pauses.
func (s *streamSink) throttled(err error, retryAfter time.Duration) {
	if errors.As(err, new(startStopError)) {
		s.answer.r.paced.StreamTurn().Throttled(retryAfter)
		return
	}
	s.lane.Throttled(retryAfter)
}

func (s *streamSink) mode() ReplyMode { return ModeStream }

func (s *streamSink) shows() showing {
	switch {
	case s.state == streamStopped:
		return showsStopped
	case s.starts == 1 && s.sent == 0 && s.ts != "":
		return showsPlaceholder
	case s.state == streamBroken:
		return showsBroken
	}
	return showsText
}

func (s *streamSink) placeholderTS() string { return s.ts }

// stoppedByUser: Slack halted the stream when its session was stopped, as when its stop was
// pressed (stopped_by_user).
func (s *streamSink) stoppedByUser() {
	if s.ts != "" {
		s.state = streamStopped
	}
}

// closeStep carries out the ways of closing that only a stream has (see planClose).
func (s *streamSink) closeStep(ctx context.Context, step closeStep, c closing) (bool, error) {
	switch step {
	case stepFinal, stepFinalInTime:
		if step == stepFinal {
			c.turnBy = time.Time{} // the whole final write, rescued if need be: no note follows it
		}
		err := streamClose{s}.final(ctx, c)
		return err == nil, err
	case stepCloseStopped:
		err := streamClose{s}.closeStopped(ctx, c)
		return err == nil, err
	case stepRescue:
		s.rescued = true
		err := streamClose{s}.rescue(ctx, c.md, c.note, c.kind)
		return err == nil, err
	case stepStopAsItStands:
		return false, errors.Join(errAppendsRefused, streamClose{s}.stopAsItStands(ctx, "", c.turnBy))
	case stepStopUnfinished:
		// The open streamed message is stopped as it stands, saying the rest is missing.
		return false, streamClose{s}.stopAsItStands(ctx, textUnfinished, time.Time{})
	}
	return false, fmt.Errorf("closing a stream: no step %v", step)
}

var errAppendsRefused = errors.New("chat.appendStream refused repeatedly")

// mark is the Mark of the streamed message being written.
func (s *streamSink) mark(kind convo.MarkKind, note string) convo.Mark {
	return s.answer.marks.mark(kind, note, s.starts-1, s.firstTS) // starts counts the messages started
}

// doneMark is the mark of the answer's last streamed message, stopped by a closing write: the
// answer ends there (convo.Mark.Done).
func (s *streamSink) doneMark(kind convo.MarkKind, note string) convo.Mark {
	m := s.mark(kind, note)
	m.Done = true
	return m
}

// buttons of the finished answer's last message: Regenerate (Slack's own stop serves while it streams).
func (s *streamSink) buttons() []gateway.Button {
	if bs := s.answer.marks.buttons(true); len(bs) > 0 {
		return bs
	}
	return nil
}

func (s *streamSink) close() { s.lane.Close() }

func (s *streamSink) writes() int { return s.appends }

func (s *streamSink) fields() []zap.Field {
	return []zap.Field{zap.String("mode", string(ModeStream)), zap.Int("appends", s.appends),
		zap.Int("streams", s.starts), zap.Int("streams_ended_by_slack", s.expired), zap.Bool("rescued", s.rescued),
		zap.Bool("stopped_by_user", s.state == streamStopped)}
}
