package handlers

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
)

// How an answer is closed. Its last writes must leave Slack showing a finished answer, or a note
// saying why there is none, with the fewest calls the budgets can serve: planClose decides which
// writes from what is known when the answer closes, and closeAnswer carries them out, trying each
// way in turn until one has closed the answer.

// ending is why the answer is being closed.
type ending int

const (
	// endFinished: the answer is complete, failed, or was stopped; it is closed in full, as long as
	// Slack lets the closing writes land.
	endFinished ending = iota
	// endShutdown: the bot is shutting down. Every answer in flight closes at once by the end of the
	// grace period, and chat.update (about 50 a minute for the whole workspace) or chat.stopStream
	// (about 20) serves only a few of them: an answer showing nothing yet is withdrawn through
	// budgets of their own, and one showing text whose last write gets no turn soon enough is
	// followed by a note in its thread (the channel's post budget).
	endShutdown
)

func (e ending) String() string { return [...]string{"finished", "shutdown"}[e] }

// showing is what Slack shows of the answer when it is closed.
type showing int

const (
	showsNothing     showing = iota // no message yet (edit mode, before the placeholder or the first text)
	showsPlaceholder                // the bare placeholder, or a streamed message without text
	showsText                       // part of the answer
	showsStopped                    // a streamed message the user stopped in Slack
	showsBroken                     // a streamed message whose appends failed: what it shows is unknown
)

func (s showing) String() string {
	return [...]string{"nothing", "placeholder", "text", "stopped", "broken"}[s]
}

// closeStep is one way of closing an answer.
type closeStep int

const (
	// stepFinal writes the whole answer and its note: in edit mode the final edit of each part and a
	// post for each part not shown yet (and a repost of a last part whose message refuses the edit);
	// in stream mode the rest appended and the stream stopped. It fails at once on a broken stream.
	stepFinal closeStep = iota + 1
	// stepFinalInTime is stepFinal whose waits for a turn end halfway to the shutdown deadline, so the
	// note below (stepInterruptedNote) still fits in the rest.
	stepFinalInTime
	// stepTellAsker tells the asker privately that the question was not answered (chat.postEphemeral).
	stepTellAsker
	// stepWithdraw is stepTellAsker, then the placeholder (or the empty stream) deleted.
	stepWithdraw
	// stepInterruptedNote posts the note that the answer above was interrupted, below it.
	stepInterruptedNote
	// stepCloseStopped gives a stream the user stopped in Slack its note and mark.
	stepCloseStopped
	// stepRescue posts a stream's whole answer as ordinary messages and deletes its streamed messages.
	stepRescue
	// stepStopAsItStands stops the open stream with what it shows. It never closes the answer: the
	// note still has to follow.
	stepStopAsItStands
	// stepStopUnfinished stops the open stream with the note that the rest of the answer is missing:
	// the last resort, which leaves the answer unfinished (it never counts as closed).
	stepStopUnfinished
)

var closeStepNames = map[closeStep]string{
	stepFinal: "final", stepFinalInTime: "final in time", stepTellAsker: "tell asker",
	stepWithdraw: "withdraw", stepInterruptedNote: "interrupted note", stepCloseStopped: "close stopped",
	stepRescue: "rescue", stepStopAsItStands: "stop as it stands", stepStopUnfinished: "stop unfinished",
}

func (s closeStep) String() string { return closeStepNames[s] }

// planClose is how an answer in mode, closed for end while Slack shows shows, is closed: the ways
// to try, in order, until one has closed it.
func planClose(mode ReplyMode, end ending, shows showing) []closeStep {
	if end == endShutdown {
		switch shows {
		case showsNothing:
			return []closeStep{stepTellAsker, stepFinal}
		case showsPlaceholder:
			return append([]closeStep{stepWithdraw}, planClose(mode, endFinished, shows)...)
		case showsStopped:
			return []closeStep{stepCloseStopped, stepInterruptedNote}
		case showsBroken:
			return []closeStep{stepStopAsItStands, stepInterruptedNote}
		}
		return []closeStep{stepFinalInTime, stepInterruptedNote}
	}
	switch {
	case mode == ModeStream && shows == showsStopped:
		return []closeStep{stepCloseStopped}
	case mode == ModeStream:
		return []closeStep{stepFinal, stepRescue, stepStopUnfinished}
	}
	return []closeStep{stepFinal}
}

// repostRefused reports whether the final write posts a part anew in place of its message, which
// refused the final edit, rather than stopping there. Only the answer's last message is replaced (a
// part with later messages after it cannot be posted anew without repeating or reordering text), not
// one someone deleted (nor is the rest of its answer written), and not when the final write has no
// time left or must leave the rest of it to the note that follows (stepFinalInTime).
func repostRefused(last, deleted, timeLeft, noteFollows bool) bool {
	return last && !deleted && timeLeft && !noteFollows
}

// closingSink is the sink as the closing writes use it.
type closingSink interface {
	// mode is how the sink writes the answer.
	mode() ReplyMode
	// shows is what Slack shows of the answer now.
	shows() showing
	// placeholderTS is the message stepWithdraw deletes: the bare placeholder or the empty stream.
	placeholderTS() string
	// stoppedByUser says the person stopped the answer in Slack (a session's Stop), which also
	// halted the stream: nothing more is appended, the answer closes with its note.
	stoppedByUser()
	// closeStep carries out one of the sink's own ways of closing the answer c (see planClose), on ctx
	// (detached from cancellation and time-boxed). Called after the writer goroutine has ended.
	closeStep(ctx context.Context, step closeStep, c closing) (closed bool, err error)
}

// closing is the answer a closing step writes: its text, its note and mark kind, and at shutdown
// when the waits for a turn end (turnBy; zero: they wait as long as the step's context lets them).
type closing struct {
	md, note string
	kind     convo.MarkKind
	turnBy   time.Time
}

// closeAnswer closes the answer written by s for end, within ctx (which ends at closeBy at
// shutdown). It returns the error of the step that closed the answer, or every step's error when
// none could.
func (a *answer) closeAnswer(ctx context.Context, s closingSink, end ending, closeBy time.Time, c closing) error {
	if end == endShutdown {
		c.turnBy = halfway(time.Now(), closeBy)
	}
	plan := planClose(s.mode(), end, s.shows())
	var errs []error
	for _, step := range plan {
		closed, err := a.closeStep(ctx, s, step, c)
		if closed {
			if len(errs) > 0 {
				a.log.Info("answer closed another way", zap.Stringer("by", step), zap.Error(errors.Join(errs...)))
			}
			return err
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeStep carries out step: the ways every sink closes alike here, the others by the sink.
func (a *answer) closeStep(ctx context.Context, s closingSink, step closeStep, c closing) (closed bool, err error) {
	switch step {
	case stepTellAsker:
		if err := a.writes.tellNotAnswered(ctx, c.turnBy); err != nil {
			a.log.Info("shutdown: the asker could not be told privately", zap.Error(err))
			return false, nil
		}
		a.log.Info("shutdown before any text; asker told privately")
		return true, nil
	case stepWithdraw:
		if err := a.writes.withdraw(ctx, c.turnBy, s.placeholderTS()); err != nil {
			a.log.Info("shutdown: could not withdraw the placeholder; closing it", zap.Error(err))
			return false, nil
		}
		a.log.Info("shutdown: placeholder deleted, asker told privately")
		return true, nil
	case stepInterruptedNote:
		if err := a.writes.postInterrupted(ctx); err != nil {
			return false, err
		}
		return true, nil
	}
	return s.closeStep(ctx, step, c)
}
