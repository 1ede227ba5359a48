package handlers

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/route"
)

// An answer's paced Slack writes outside the sinks' own: each waits for its turn in its method's
// budget (Budgets), records a 429 there for every answer, and is retried under a policy (retry.go)
// within the context its caller gives it, whose deadline derives from closeBy once the answer is
// cancelled (deadline.go).

// postRetry posts msg in the answer's thread under the channel's post budgets, retried under pol
// within outage o (nil: its own), and returns its ts (the last attempt's).
func (a *answer) postRetry(ctx context.Context, pol retryPolicy, o *outage, msg Msg) (string, error) {
	var ts string
	err := retryWrite(ctx, pol, o, a.r.postTurn(a.req.Channel),
		func(ctx context.Context) (err error) {
			ts, err = a.r.msgs.Post(ctx, a.req.Channel, a.threadTS, msg)
			return err
		})
	if err == nil {
		a.posted(ts)
	}
	return ts, err
}

// closedInJournal removes the answer from the journal of answers in progress: Slack shows it closed.
func (a *answer) closedInJournal() {
	if a.r.opt.Journal == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	if err := a.r.opt.Journal.CloseAnswer(ctx, route.AnswerID(a.req.Channel, a.req.TS)); err != nil {
		a.log.Warn("answer journal record not removed", zap.Error(err))
	}
}

// posted records a message the answer posted in the journal of answers in progress.
func (a *answer) posted(ts string) {
	if a.r.opt.Journal == nil || ts == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
	defer cancel()
	if err := a.r.opt.Journal.AddMessage(ctx, route.AnswerID(a.req.Channel, a.req.TS), ts); err != nil {
		a.log.Warn("answer message not journaled", zap.Error(err))
	}
}

// postTurn is a turn to post in channel: the channel's post budget, then the workspace's (postWait).
func (r *Replies) postTurn(channel string) turn {
	return turn{
		wait:      func(ctx context.Context) error { return r.postWait(ctx, channel) },
		throttled: func(d time.Duration) { r.postThrottled(channel, d) },
	}
}

// writeCallTimeout bounds one interim Slack write once it holds its slot (callCtx).
const writeCallTimeout = 10 * time.Second

// callCtx is the context of an interim Slack write that holds its slot: cancelling the answer (Stop,
// shutdown) ends the waits for slots, not a call under way, which Slack may already have carried out
// (a post abandoned then would be posted again by the final write, and its Stop button would stay).
// The call is bounded by writeCallTimeout, and once the answer is cancelled by half of its closing
// time (halfway to closeBy, counted from the cancellation), so at shutdown, where the final write's time
// box counts from the cancellation too, the final write still fits in the rest.
func (a *answer) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	octx, ocancel := a.afterCancel(ctx, func(cause error, cancelled time.Time) time.Time {
		return halfway(cancelled, a.r.closeBy(cause, cancelled, cancelled))
	})
	cctx, cancel := context.WithTimeout(octx, writeCallTimeout)
	return cctx, func() { cancel(); ocancel() }
}

// deleteMessage deletes one of the answer's messages, retried under pol; its wait for the Deletes
// budget ends at by (unless zero). A message already gone counts as deleted, so a timed-out delete is
// repeated: one that landed answers message_not_found the next time.
func (a *answer) deleteMessage(ctx context.Context, pol retryPolicy, by time.Time, ts string) error {
	err := retryWrite(ctx, pol, nil, bucketTurn(a.r.opt.Budgets.Deletes).by(by),
		func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, writeCallTimeout)
			defer cancel()
			err := a.r.msgs.Delete(ctx, a.req.Channel, ts)
			if slackErr(err) == "message_not_found" {
				return nil
			}
			return idempotent(err)
		})
	if err != nil {
		return fmt.Errorf("chat.delete: %w", err)
	}
	return nil
}

// withdraw takes back a bare placeholder at shutdown: it tells the asker privately that the question
// was not answered, then deletes the placeholder. Waits for either budget end at by; the writes
// themselves may use all of ctx. When the private word cannot be sent the placeholder is kept (the
// caller edits it), so the asker is never left with nothing.
func (a *answer) withdraw(ctx context.Context, by time.Time, ts string) error {
	if err := a.tellNotAnswered(ctx, by); err != nil {
		return err
	}
	return a.deleteMessage(ctx, interimRetry, by, ts)
}

// tellNotAnswered tells the asker privately (chat.postEphemeral, the Ephemerals budget) that the
// question was not answered because the bot is restarting. The wait for the budget ends at by
// (unless zero); the write may use all of ctx.
func (a *answer) tellNotAnswered(ctx context.Context, by time.Time) error {
	err := retryWrite(ctx, interimRetry, nil, bucketTurn(a.r.opt.Budgets.Ephemerals).by(by),
		func(ctx context.Context) error {
			return a.r.msgs.Ephemeral(ctx, a.req.Channel, a.req.User, a.threadTS, textNotAnswered)
		})
	if err != nil {
		return fmt.Errorf("chat.postEphemeral: %w", err)
	}
	return nil
}

// notAnswered is for an answer shut down before it opened (no placeholder or stream yet): the asker
// is told privately, on a context detached from the cancelled ctx and bounded like a closing write
// at shutdown (closeBy, within the bot's grace period).
func (a *answer) notAnswered(ctx context.Context) error {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), a.r.closeBy(ErrShutdown, a.cancelledAt(), time.Now()))
	defer cancel()
	if err := a.tellNotAnswered(ctx, time.Time{}); err != nil {
		return fmt.Errorf("shutdown before the placeholder: %w", err)
	}
	a.log.Info("shutdown before the placeholder; asker told privately")
	return nil
}

// waitBy runs wait on ctx, ended at by unless by is zero: a wait for a slot bounded more tightly than
// the write that follows it.
func waitBy(ctx context.Context, by time.Time, wait func(context.Context) error) error {
	if by.IsZero() {
		return wait(ctx)
	}
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	return wait(ctx)
}
