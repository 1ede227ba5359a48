package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/llmbot/llmbot/internal/watch"
	"github.com/llmbot/llmbot/pace"
)

// writer is how the replies' calls get through Slack's rate limits. It holds every method's budget
// (Budgets), and it is the one place that waits for a turn in them, records a 429 there (which
// pauses that budget for every reply) and retries a call under a policy (retry.go: attempts, an
// outage window, a rate-limit window). A write's wait for its turn may end sooner than the write
// (turn.by: a closing write's deadline, derived once from closeBy when the answer is cancelled).
// The sinks decide what to write and when; the writer decides how it gets through.
type writer struct {
	budgets Budgets
	msgs    Messenger
}

// do waits for its turn t and calls write, retrying under pol until the write succeeds, ctx ends
// or pol gives up. o is the outage the write shares with others (nil: its own).
func (w *writer) do(ctx context.Context, pol retryPolicy, o *outage, t turn, write func(context.Context) error) error {
	if o == nil {
		o = new(outage)
	}
	r := retries{policy: pol, outage: o, backoff: firstBackoff}
	for {
		if err := t.wait(ctx); err != nil {
			return err
		}
		err := write(ctx)
		if err == nil {
			o.end()
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		if ra, ok := rateLimited(err); ok {
			if !r.waitOut() {
				return err
			}
			t.throttled(ra)
			continue
		}
		if !transient(err) {
			return err
		}
		pause, ok := r.retry()
		if !ok || watch.Sleep(ctx, pause) != nil {
			return err
		}
	}
}

// post posts msg in channel (in thread, "" for the top level) at its turn t (postTurn, maybe
// bounded), retried under pol within outage o (nil: its own), and returns its ts (the last
// attempt's).
func (w *writer) post(ctx context.Context, pol retryPolicy, o *outage, t turn, channel, thread string, msg Msg) (string, error) {
	var ts string
	err := w.do(ctx, pol, o, t, func(ctx context.Context) (err error) {
		ts, err = w.msgs.Post(ctx, channel, thread, msg)
		return err
	})
	return ts, err
}

// update writes msg into message ts at its turn t (editTurn, or a turn it holds), retried under pol
// within outage o (nil: its own). An edit that timed out is repeated: it does no harm twice.
func (w *writer) update(ctx context.Context, pol retryPolicy, o *outage, t turn, channel, ts string, msg Msg) error {
	return w.do(ctx, pol, o, t, func(ctx context.Context) error {
		return idempotent(w.msgs.Update(ctx, channel, ts, msg))
	})
}

// delete deletes message ts, retried under pol; its wait for the Deletes budget ends at by (unless
// zero). A message already gone counts as deleted, so a timed-out delete is repeated: one that
// landed answers message_not_found the next time.
func (w *writer) delete(ctx context.Context, pol retryPolicy, by time.Time, channel, ts string) error {
	err := w.do(ctx, pol, nil, bucketTurn(w.budgets.Deletes).by(by), func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, writeCallTimeout)
		defer cancel()
		err := w.msgs.Delete(ctx, channel, ts)
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

// deleteHeld deletes message ts, its turn taken already (tryDelete), each call on a context of
// call(ctx); it reports whether the message is gone. A call that timed out or failed in passing is
// made once more (a delete that landed answers message_not_found then): thought still there, a
// deleted message would be edited in vain.
func (w *writer) deleteHeld(ctx context.Context, call callCtxFunc, channel, ts string) bool {
	for range 2 {
		cctx, cancel := call(ctx)
		err := w.msgs.Delete(cctx, channel, ts)
		cancel()
		if err == nil || slackErr(err) == "message_not_found" {
			return true
		}
		if ra, limited := rateLimited(err); limited {
			w.budgets.Deletes.Throttled(ra) // every delete waits it out; this one is not tried again
			return false
		}
		if ctx.Err() != nil || !transient(idempotent(err)) {
			return false
		}
	}
	return false
}

// ephemeral shows text to user alone in channel (in thread), retried under pol; its wait for the
// Ephemerals budget ends at by (unless zero).
func (w *writer) ephemeral(ctx context.Context, pol retryPolicy, by time.Time, channel, user, thread, text string) error {
	err := w.do(ctx, pol, nil, bucketTurn(w.budgets.Ephemerals).by(by), func(ctx context.Context) error {
		return w.msgs.Ephemeral(ctx, channel, user, thread, text)
	})
	if err != nil {
		return fmt.Errorf("chat.postEphemeral: %w", err)
	}
	return nil
}

// turn is where a Slack write waits for its turn, and records a 429 for every answer: the budget of
// its method, or the budgets it takes a slot in one after the other.
type turn struct {
	wait      func(context.Context) error
	throttled func(time.Duration)
}

// bucketTurn is a turn in budget b.
func bucketTurn(b *pace.Bucket) turn { return turn{wait: b.Wait, throttled: b.Throttled} }

// by is t with its wait ended at by (unless zero): a wait for a turn bounded more tightly than the
// write that follows it.
func (t turn) by(by time.Time) turn {
	if by.IsZero() {
		return t
	}
	wait := t.wait
	t.wait = func(ctx context.Context) error { return waitBy(ctx, by, wait) }
	return t
}

// held is t whose next wait returns at once when *taken is set (the turn was taken earlier, for
// this write), clearing it.
func (t turn) held(taken *bool) turn {
	wait := t.wait
	t.wait = func(ctx context.Context) error {
		if *taken {
			*taken = false
			return nil
		}
		return wait(ctx)
	}
	return t
}

// waitBy runs wait on ctx, ended at by unless by is zero.
func waitBy(ctx context.Context, by time.Time, wait func(context.Context) error) error {
	if by.IsZero() {
		return wait(ctx)
	}
	ctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	return wait(ctx)
}

// editTurn is a turn in lane l of the edit budget (or of the appends budget, for a stream's lane)
// at prio, for text waiting since since.
func (w *writer) editTurn(l *pace.Lane, prio pace.Priority, since time.Time) turn {
	return turn{wait: func(ctx context.Context) error { return l.Wait(ctx, prio, since) }, throttled: l.Throttled}
}

// editLane is a new answer's place in the fair edit budget (chat.update); appendLane in the
// appends budget (chat.appendStream).
func (w *writer) editLane() *pace.Lane   { return w.budgets.Edits.Lane() }
func (w *writer) appendLane() *pace.Lane { return w.budgets.Appends.Lane() }

// scheduler is the budget an answer writes its text from: the appends' for a native stream, else
// the edits'.
func (w *writer) scheduler(stream bool) *pace.Scheduler {
	if stream {
		return w.budgets.Appends
	}
	return w.budgets.Edits
}

// editSpacing is how far apart one answer's edits come while the answers in flight share the edit
// budget (pace.Scheduler.Spacing).
func (w *writer) editSpacing() time.Duration { return w.budgets.Edits.Spacing() }

// editWait waits for a chat.update token outside the answers' lanes (a stream Slack ended, finished
// by an edit).
func (w *writer) editWait(ctx context.Context) error { return w.budgets.Edits.Bucket().Wait(ctx) }

// postTurn is a turn to post in channel: the channel's post budget, then the workspace's (postWait).
func (w *writer) postTurn(channel string) turn {
	return turn{
		wait:      func(ctx context.Context) error { return w.postWait(ctx, channel) },
		throttled: func(d time.Duration) { w.postThrottled(channel, d) },
	}
}

// postWait waits for a chat.postMessage (or chat.startStream) slot: the channel's, then the workspace's.
// When the channel gets a 429 while the post queues for the workspace, the channel's slot it holds was
// handed out before that 429 said the channel's budget is spent: it queues for the channel again. (Else
// every post holding a slot would go as the pause ends, and draw another 429: seen in the load benchmark
// when Slack's budgets were spent at start-up.)
//
// The workspace's slot taken in a round that goes back to the channel's line is not given back (a token
// returned to a bucket with waiters could put two calls on one slot); a round costs one only after a
// 429 in the channel.
func (w *writer) postWait(ctx context.Context, channel string) error {
	for {
		slot, err := w.budgets.Posts.WaitSlot(ctx, channel)
		if err != nil {
			return err
		}
		if err := w.budgets.PostsWorkspace.Wait(ctx); err != nil {
			return err
		}
		if !slot.Stale() {
			return nil
		}
	}
}

// endClaim is a live answer's claim on the post of its end, in its channel's budget and the
// workspace's (pace.Bucket.Reserve): the answer's posts that only show progress (its next part)
// leave the claimed posts to the ends (spareWait).
type endClaim struct {
	w                   *writer
	channel             string
	inChannel, anywhere *pace.Reservation
}

// claimEnd claims the post of the end of an answer live in channel; release gives it up.
func (w *writer) claimEnd(channel string) *endClaim {
	return &endClaim{w: w, channel: channel,
		inChannel: w.budgets.Posts.Reserve(channel), anywhere: w.budgets.PostsWorkspace.Reserve()}
}

// spareWait is postWait for a post that only shows progress: it leaves the posts claimed for the
// ends of the answers live in the channel and the workspace.
func (c *endClaim) spareWait(ctx context.Context) error {
	for {
		slot, err := c.w.budgets.Posts.WaitSpare(ctx, c.channel)
		if err != nil {
			return err
		}
		if _, err := c.w.budgets.PostsWorkspace.WaitSpare(ctx); err != nil {
			return err
		}
		if !slot.Stale() {
			return nil
		}
	}
}

// release gives the claim up.
func (c *endClaim) release() {
	c.inChannel.Release()
	c.anywhere.Release()
}

// postThrottled records a post's 429 in both budgets: Slack does not say which limit was hit.
func (w *writer) postThrottled(channel string, retryAfter time.Duration) {
	w.budgets.Posts.Throttled(channel, retryAfter)
	w.budgets.PostsWorkspace.Throttled(retryAfter)
}

// streamTurn is a turn for chat.startStream or chat.stopStream (Budgets.Streams); startTurn is the
// whole turn of a start: that budget, then the channel's post budgets.
func (w *writer) streamTurn() turn { return bucketTurn(w.budgets.Streams) }

func (w *writer) startTurn(channel string) turn {
	streams := w.streamTurn()
	return turn{wait: func(ctx context.Context) error {
		if err := streams.wait(ctx); err != nil {
			return err
		}
		return w.postWait(ctx, channel)
	}, throttled: streams.throttled}
}

// read makes a thread or history read within the shared read budget: it waits for a token, and a
// 429 pauses every reader for its Retry-After (and lowers the rate) before this one tries again, so
// concurrent replies queue for reads instead of retrying into a storm. Only 429s are retried (at
// most maxRateLimited), until ctx ends.
func (w *writer) read(ctx context.Context, f func(context.Context) error) error {
	for limited := 0; ; {
		if err := w.budgets.Reads.Wait(ctx); err != nil {
			return err
		}
		err := f(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		ra, ok := rateLimited(err)
		if limited++; !ok || limited == maxRateLimited {
			return err
		}
		w.budgets.Reads.Throttled(ra)
	}
}

// readOnce makes one read if a read token is free at once (ok false when none is); a 429 pauses
// every reader, and is not retried.
func (w *writer) readOnce(ctx context.Context, f func(context.Context) error) (ok bool, err error) {
	if !w.budgets.Reads.TryTake() {
		return false, nil
	}
	err = f(ctx)
	if ra, limited := rateLimited(err); limited {
		w.budgets.Reads.Throttled(ra)
	}
	return true, err
}

// Calls that are made only when their budget has a token at once, because they are courtesies or
// have a way around: a native stream (else the answer is edited), an agent session's "processing",
// a stream's task cards, a placeholder withdrawn under load (the thinking status: AgentPane).
func (w *writer) tryStream() bool  { return w.budgets.Streams.TryTake() }
func (w *writer) trySession() bool { return w.budgets.Sessions.TryTake() }
func (w *writer) tryAppend() bool  { return w.budgets.Appends.Bucket().TryTake() }
func (w *writer) tryDelete() bool  { return w.budgets.Deletes.TryTake() }

// sessionTurn is a turn for agents.sessions.setStatus.
func (w *writer) sessionTurn() turn { return bucketTurn(w.budgets.Sessions) }
