package handlers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

// answerWrites are an answer's own Slack writes outside the sinks' (its journal records, the
// withdrawals and notes of its closing) and the deadline they keep once it is cancelled.
type answerWrites struct {
	*answerBase
	// cancelNanos is when the answer's context was cancelled (Unix ns; 0: not yet; see cancelledAt).
	cancelNanos atomic.Int64
	// outage is the one the answer's closing writes wait out together (gateway.ClosingRetry), however many
	// parts they write.
	outage gateway.Outage
	// fence marks the answer's writes for the Fence (nil: before run).
	fence *gateway.FenceMark
	// unjournaled: the answer's journal record is closed (closedInJournal), which is done once.
	unjournaled bool
}

// An answer's Slack writes outside the sinks' own, through the writer (writer.go), within the
// context its caller gives them, whose deadline derives from closeBy once the answer is cancelled
// (deadline.go).

// postRetry posts msg in the answer's thread under the channel's post budgets, retried under pol
// within outage o (nil: its own), and returns its ts (the last attempt's).
func (a *answerWrites) postRetry(ctx context.Context, pol gateway.RetryPolicy, o *gateway.Outage, msg gateway.Msg) (string, error) {
	ts, err := a.r.paced.Post(ctx, pol, o, a.r.paced.PostTurn(a.req.Channel), a.req.Channel, a.threadTS, msg)
	if err == nil {
		a.posted(ts)
	}
	return ts, err
}

// closedInJournal removes the answer from the journal of answers in progress, once: Slack shows it
// closed. The sinks call it as soon as the answer's closing text has landed, whatever the way (a
// final edit, a continuation post, a stream's stop, a rescue), before any tidying they still do, so
// that a replica dying then leaves nothing for another to mark as interrupted.
func (a *answerWrites) closedInJournal() {
	if a.fence != nil {
		a.fence.Closed.Store(true) // nobody can adopt it now: the writes left are this replica's alone
	}
	if a.r.opt.Journal == nil || a.unjournaled {
		return
	}
	a.unjournaled = true
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	if err := a.r.opt.Journal.CloseAnswer(ctx, route.AnswerID(a.req.Channel, a.req.TS)); err != nil {
		a.log.Warn("answer journal record not removed", zap.Error(err))
	}
}

// posted records a message the answer posted in the journal of answers in progress.
func (a *answerWrites) posted(ts string) {
	if a.r.opt.Journal == nil || ts == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	if err := a.r.opt.Journal.AddMessage(ctx, route.AnswerID(a.req.Channel, a.req.TS), ts); err != nil {
		a.log.Warn("answer message not journaled", zap.Error(err))
	}
}

// callCtx is the context of an interim Slack write that holds its slot: cancelling the answer (Stop,
// shutdown) ends the waits for slots, not a call under way, which Slack may already have carried out
// (a post abandoned then would be posted again by the final write, and its Stop button would stay).
// The call is bounded by gateway.WriteCallTimeout, and once the answer is cancelled by half of its closing
// time (halfway to closeBy, counted from the cancellation), so at shutdown, where the final write's time
// box counts from the cancellation too, the final write still fits in the rest.
func (a *answerWrites) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	octx, ocancel := a.afterCancel(ctx, func(cause error, cancelled time.Time) time.Time {
		return halfway(cancelled, a.r.closeBy(cause, cancelled, cancelled))
	})
	cctx, cancel := context.WithTimeout(octx, gateway.WriteCallTimeout)
	return cctx, func() { cancel(); ocancel() }
}

// deleteMessage deletes one of the answer's messages (Writer.Delete).
func (a *answerWrites) deleteMessage(ctx context.Context, pol gateway.RetryPolicy, by time.Time, ts string) error {
	return a.r.paced.Delete(ctx, pol, by, a.req.Channel, ts)
}

// withdraw takes back a bare placeholder at shutdown: it tells the asker privately that the question
// was not answered, then deletes the placeholder. Waits for either budget end at by; the writes
// themselves may use all of ctx. When the private word cannot be sent the placeholder is kept (the
// caller edits it), so the asker is never left with nothing.
func (a *answerWrites) withdraw(ctx context.Context, by time.Time, ts string) error {
	if err := a.tellNotAnswered(ctx, by); err != nil {
		return err
	}
	return a.deleteMessage(ctx, gateway.InterimRetry, by, ts)
}

// tellNotAnswered tells the asker privately (chat.postEphemeral, the Ephemerals budget) that the
// question was not answered because the bot is restarting. The wait for the budget ends at by
// (unless zero); the write may use all of ctx.
func (a *answerWrites) tellNotAnswered(ctx context.Context, by time.Time) error {
	return a.r.paced.Ephemeral(ctx, gateway.InterimRetry, by, a.req.Channel, a.req.User, a.threadTS, textNotAnswered)
}

// notAnswered is for an answer shut down before it opened (no placeholder or stream yet): the asker
// is told privately, on a context detached from the cancelled ctx and bounded like a closing write
// at shutdown (closeBy, within the bot's grace period).
func (a *answerWrites) notAnswered(ctx context.Context) error {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), a.r.closeBy(ErrShutdown, a.cancelledAt(), time.Now()))
	defer cancel()
	if err := a.tellNotAnswered(ctx, time.Time{}); err != nil {
		return fmt.Errorf("shutdown before the placeholder: %w", err)
	}
	a.log.Info("shutdown before the placeholder; asker told privately")
	return nil
}

// postInterrupted posts the note that the answer above was interrupted as a new message in the
// answer's thread, marked as a notice (never replayed to the model).
func (a *answerWrites) postInterrupted(ctx context.Context) error {
	text := convo.NoteAlone(textInterruptedAbove, slackmd.FormatMrkdwn)
	_, err := a.postRetry(ctx, gateway.ClosingRetry, &a.outage, gateway.Msg{Text: text, Mark: convo.Mark{Kind: convo.MarkNotice, Note: textInterruptedAbove, Done: true}})
	if err != nil {
		return fmt.Errorf("chat.postMessage interrupted note: %w", err)
	}
	return nil
}

// cancelledAt is when the answer's context was cancelled (call it only once it is): fixed by the
// first to ask, so that every time box counts from the same moment.
func (a *answerWrites) cancelledAt() time.Time {
	a.cancelNanos.CompareAndSwap(0, time.Now().UnixNano())
	return time.Unix(0, a.cancelNanos.Load())
}

// afterCancel returns a context that is not cancelled with ctx but at by(cause, when) once ctx is
// (when: the answer's cancelledAt), or by the returned cancel.
func (a *answerWrites) afterCancel(ctx context.Context, by func(cause error, cancelled time.Time) time.Time) (context.Context, context.CancelFunc) {
	octx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer // the deadline's, once ctx is cancelled
	released := false     // the returned cancel was called: no timer starts after it
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !released {
			timer = time.AfterFunc(time.Until(by(context.Cause(ctx), a.cancelledAt())), func() { cancel(context.DeadlineExceeded) })
		}
	})
	return octx, func() {
		stop()
		mu.Lock()
		released = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}
