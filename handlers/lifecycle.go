package handlers

// An answer's lifecycle. Replies.Reply decides whether a message is for the bot and starts an
// answer; answer.run below then takes it through these states in this order, each done by a part of
// the answer in a file of its own:
//
//	received ─▶ opening ─▶ reading ─▶ generating ─▶ closing ─┬─▶ done
//	(Reply)     (open)     (prepare)  (generate)    (finish) ├─▶ stopped      (Stop: ErrStopped)
//	               │          │                      ▲       ├─▶ failed       (the model or Slack)
//	               │          └── nothing to ask ────┘       └─▶ interrupted  (shutdown: ErrShutdown)
//	               └── shut down before anything shows: the asker is told privately ─▶ interrupted
//
//	opening     reply.go: answer.open, the sink opened (edit.go, stream.go)
//	reading     reading.go: contextRead (the files through attach.Reader)
//	generating  generate.go, tools.go: generation, its writer goroutine driving the sink's interim writes
//	closing     closing.go: planClose and closeAnswer; the sinks' own steps (edit_final.go, stream_close.go);
//	            the answer's own writes (writes.go: answerWrites) within the deadline (deadline.go)
//
// Opening shows life at once (a placeholder, a native stream, or nothing until the first text when
// ReplyOptions.PlaceholderAfter allows); reading reads the thread and builds the model's request;
// generating streams the model's answer while one writer goroutine writes it into Slack as it grows;
// closing writes the whole answer with a note saying how it ended, by the ways planClose decides.
// Once the answer is cancelled (Stop, shutdown), its closing writes have until closeBy.
//
// Where a sink's writes are is one value. An answer written by editing (editPhase; what Slack shows of
// it, nothing, the placeholder or text, is its messages', editMessages):
//
//	writing ──┬── interim writes fail (maxInterimFailures) ─▶ broken ──┐
//	(generating)                                                        ├─ final write ─▶ closing ⇄ closed
//	          ├── an interim post times out, may have landed ─▶ lost ──┤  (lost: the part is looked for
//	          └─────────────────────────────────────────────────────────┘   first, then as broken)
//
// closing ⇄ closed: the final write has written a part, not the last / the last, with the note (a
// second final write at shutdown writes them again). A natively streamed answer (streamState):
//
//	live ──┬── appends fail, or one times out ─▶ broken ─▶ (closing: rescued, or stopped unfinished)
//	       └── the person stops it in Slack ───▶ stopped ─▶ (closing: stopped with its note)
//	broken ── the person stops it in Slack ──▶ stopped

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/attach"
	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/watch"
	"github.com/llmbot/llmbot/route"
)

// answerBase is what every part of one answer shares: the request, the thread it is answered in, its
// log and when it began.
type answerBase struct {
	r        *Replies
	req      route.ReplyRequest
	threadTS string
	log      *zap.Logger
	start    time.Time
}

// answer is one answer in progress, from the request to its closing writes. Its concerns are parts of
// their own, built with it: reading the context (contextRead), the model's rounds (generation), its
// marks and buttons (answerMarks), and its own Slack writes with their deadline (answerWrites); the
// sink writes its text.
type answer struct {
	*answerBase
	read   *contextRead
	gen    *generation
	marks  *answerMarks
	writes *answerWrites

	// cancel ends the answer's context with a cause; the writer calls it with ErrStopped when the user
	// presses stop on a streamed message.
	cancel context.CancelCauseFunc

	// replacesAbove: a Regenerate could not be written in place of the old answer (its message
	// refused the edit), so the new answer, posted below it, says that it replaces it.
	replacesAbove bool

	// thinkingSince is when the thread was given the answer's "is thinking…" status (pane; zero:
	// it was not), a sign of life until the answer's first message is posted, or Slack drops it
	// (thinkingLasts).
	thinkingSince time.Time

	// readStatus is how reading the thread ended, for its task card ("": it was not read).
	readStatus string

	firstText time.Duration
	// unshown is when the oldest answer text Slack does not show yet arrived (zero: none known), set when
	// the writer stops; the final write waits its turn by it (max lag first, like every write).
	unshown time.Time
}

// newAnswer is the answer to req in thread threadTS, with its parts; leftOut is how many of the
// thread's older messages a read made for the request left out.
func newAnswer(r *Replies, req route.ReplyRequest, threadTS string, log *zap.Logger, leftOut int) *answer {
	base := &answerBase{r: r, req: req, threadTS: threadTS, log: log, start: time.Now()}
	systemPrompt, model := r.opt.SystemPrompt, r.opt.Model
	if f := r.opt.ChannelSettings; f != nil {
		sp, m := f(req.Channel)
		systemPrompt, model = cmp.Or(sp, systemPrompt), cmp.Or(m, model)
	}
	a := &answer{answerBase: base, marks: &answerMarks{answerBase: base}, writes: &answerWrites{answerBase: base}}
	a.read = &contextRead{answerBase: base, marks: a.marks, systemPrompt: systemPrompt, model: model, leftOut: leftOut}
	a.gen = &generation{answerBase: base, host: a, model: model, keepImages: r.opt.Files.Vision(req.Channel) == attach.VisionOn}
	return a
}

func (a *answer) noteUnshown(since time.Time) {
	if a.unshown.IsZero() || since.Before(a.unshown) {
		a.unshown = since
	}
}

// run takes the answer through its lifecycle, and always ends with its closing writes once
// anything shows.
func (a *answer) run(parent context.Context, thread []slack.Message) (err error) {
	a.writes.fence = &gateway.FenceMark{ID: route.AnswerID(a.req.Channel, a.req.TS)}
	ctx, cancel := context.WithCancelCause(gateway.WithFence(parent, a.writes.fence))
	defer cancel(nil)
	a.cancel = cancel
	stopWatch := context.AfterFunc(ctx, func() { a.writes.cancelledAt() })
	defer stopWatch()

	thread, old := a.read.replaced(ctx, thread)
	s, err := a.open(ctx, old)
	if err != nil {
		return a.notOpened(ctx, err)
	}
	defer s.close()
	defer func() {
		if r := recover(); r != nil {
			err = a.panicked(ctx, s.closing, asPanic(r))
		}
	}()
	a.session(ctx, s.round.mode(), route.SessionProcessing)
	a.pane(ctx)
	defer func() { a.session(ctx, s.round.mode(), endStatus(context.Cause(ctx))) }()

	if thread == nil && !a.read.startsThread() { // the thread is read: that is shown
		s.round.progress(ctx, gateway.Task{ID: taskRead, Title: titleRead, Status: gateway.TaskInProgress})
	}
	stopIdle := a.idleDuring(ctx, s.round)
	defer stopIdle() // a panic in prepare must not leave it running
	res, early, err := a.read.prepare(ctx, thread)
	stopIdle()
	if thread == nil && !a.read.startsThread() {
		a.readStatus = doneStatus(err)
	}
	if early != nil {
		return errors.Join(err, unclosed(a.finish(ctx, s.closing, *early)))
	}
	a.gen.firstTasks = a.readTasks()
	md, finishReason, serr := a.gen.generate(ctx, res, s.round)
	a.modelDone()
	note, kind, serr := a.outcome(ctx, md, finishReason, serr)
	if a.gen.imagesUnseen && kind == convo.MarkAnswer {
		note = strings.TrimSpace(attach.TextImagesSeen + " " + note)
	}
	if a.gen.toolsUnavailable && kind == convo.MarkAnswer {
		note = strings.TrimSpace(textToolsUnavailable + " " + note)
	}
	ferr := a.finish(ctx, s.closing, closing{md: md, note: note, kind: kind})
	if ferr == nil {
		a.writes.closedInJournal() // at once: a replica that dies now must not leave it to be closed as interrupted
	}
	a.report(s.counts, res, md, finishReason, note, ferr)
	if ferr != nil {
		ferr = fmt.Errorf("final write: %w", unclosed(ferr))
	}
	return errors.Join(serr, ferr)
}

// unclosed marks err, from an answer's closing write, as ErrUnclosed (nil stays nil).
func unclosed(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrUnclosed, err)
}

// panicked closes an answer whose code panicked (a renderer, a decoder or a goroutine of its own
// meeting bytes it could not take): the stack goes to the log, the asker sees a short note where the
// answer stands, with Regenerate, and the bot goes on. A second panic while closing goes up to the
// bot, which tells the asker privately.
func (a *answer) panicked(ctx context.Context, s closingSink, pe *panicError) error {
	a.log.Error("answer panicked", pe.fields()...)
	a.modelDone()
	err := a.finish(ctx, s, closing{note: textPanicked, kind: convo.MarkError})
	if err == nil {
		a.writes.closedInJournal()
	}
	return errors.Join(fmt.Errorf("answer: %w", pe), unclosed(err))
}

// modelDone tells the bot, once, that the answer asks the model no more (route.ReplyRequest.ModelDone):
// its place goes to the next question in line while its last writes go on.
func (a *answer) modelDone() {
	if a.req.ModelDone != nil {
		a.req.ModelDone()
		a.req.ModelDone = nil
	}
}

// idleDuring has an answer in edit mode post its placeholder when it falls due while the answer is
// still being prepared, before the writer starts: a thread read waits for the read budget (Tier 3,
// about 50 a minute for the whole workspace), so under load it may take long, and the asker must
// not be left without a sign meanwhile. A goroutine of its own, the only one to touch the sink until
// stop returns, waits for each time the placeholder is due (a thinking status moves it on); it waits
// at most continueWait for the placeholder's post turn (else it stays due, for the writer), so stop,
// which ends its waits and waits for it, holds the model's request back a second at most. stop may
// be called more than once.
func (a *answer) idleDuring(ctx context.Context, s roundSink) (stop func()) {
	e, ok := s.(*editSink)
	if !ok || e.idleDue().IsZero() {
		return func() {}
	}
	prepared, callOff := context.WithCancel(ctx)
	done := make(chan struct{})
	var perr error // a panic of the goroutine's, raised again by stop in the answer's goroutine
	go func() {
		defer close(done)
		defer caught(&perr, nil)
		for due := e.idleDue(); !due.IsZero(); due = e.idleDue() {
			if watch.Sleep(prepared, time.Until(due)) != nil {
				return
			}
			if e.idleBy(ctx, time.Now().Add(continueWait)); e.idleDue().Equal(due) {
				return // no post turn soon: the writer posts it
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			callOff()
			<-done
			if perr != nil {
				panic(perr)
			}
		})
	}
}

// notOpened ends an answer that could not show life. Shut down before anything was shown (the
// placeholder still waited for the post budget), the asker is told privately rather than left with
// no answer and no reason.
func (a *answer) notOpened(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShutdown) {
		return errors.Join(err, a.writes.notAnswered(ctx))
	}
	return err
}

// finish closes the answer c. The last write always lands: it may wait its turn in the budget as
// long as the answer lives, and once the answer is cancelled it still has until closeBy. Its
// transient failures are retried within that (gateway.ClosingRetry), for at most gateway.FinalOutage.
func (a *answer) finish(ctx context.Context, s closingSink, c closing) error {
	if a.replacesAbove && c.kind == convo.MarkAnswer {
		c.note = strings.TrimSpace(textReplacesAbove + " " + c.note)
	}
	if errors.Is(context.Cause(ctx), ErrStopped) {
		s.stoppedByUser() // a stream's session was stopped in Slack: its text so far stays as it is
	}
	began := time.Now()
	closeBy := func(cause error, cancelled time.Time) time.Time { return a.r.closeBy(cause, cancelled, began) }
	fctx, fcancel := a.writes.afterCancel(ctx, closeBy)
	defer fcancel()
	shutdown := func() bool { return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShutdown) }
	if shutdown() {
		return a.closeAnswer(fctx, s, endShutdown, closeBy(ErrShutdown, a.writes.cancelledAt()), c)
	}
	// A shutdown while this write waits for its turn leaves it half the closing time, and the
	// shutdown rule the other half (a message left "Thinking…" would say nothing).
	hctx, hcancel := a.writes.afterCancel(ctx, func(cause error, cancelled time.Time) time.Time {
		if errors.Is(cause, ErrShutdown) {
			return halfway(cancelled, closeBy(cause, cancelled))
		}
		return closeBy(cause, cancelled)
	})
	defer hcancel()
	err := a.closeAnswer(hctx, s, endFinished, time.Time{}, c)
	if err == nil || !shutdown() {
		return err
	}
	a.log.Debug("shutdown during the final write", zap.Error(err))
	return errors.Join(context.Cause(ctx), a.closeAnswer(fctx, s, endShutdown, closeBy(ErrShutdown, a.writes.cancelledAt()), c))
}

// report logs the finished answer and tells ReplyOptions.Written about it.
func (a *answer) report(s writeCounts, res convo.Result, md, finishReason, note string, ferr error) {
	a.log.Info("reply done", append([]zap.Field{
		zap.Duration("duration", time.Since(a.start)),
		zap.Duration("llm_ttft", a.gen.ttft), zap.Duration("first_text", a.firstText),
		zap.Int("chunks", a.gen.chunks), zap.Int("chars", len(md)), zap.String("finish_reason", finishReason),
		zap.Int("messages", len(res.Messages)), zap.Int("omitted", res.Omitted), zap.String("note", note),
	}, s.fields()...)...)
	a.log.Debug("reply text", zap.String("text", md))
	if f := a.r.opt.Written; f != nil {
		first := a.firstText
		if first == 0 && md != "" && ferr == nil {
			first = time.Since(a.start) // the answer's first text came with the final write
		}
		f(first, s.writes())
	}
}
