package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/llmbot/llmbot/internal/watch"
	"github.com/llmbot/llmbot/pace"
)

// Writer is how the replies' calls get through Slack's rate limits. It holds every method's budget
// (Budgets), and it is the one place that waits for a turn in them, records a 429 there (which
// pauses that budget for every reply) and retries a call under a policy (retry.go: attempts, an
// outage window, a rate-limit window). A write's wait for its turn may end sooner than the write
// (Turn.By: a closing write's deadline, derived once when the answer is cancelled).
// The use cases (the answers' sinks) decide what to write and when; the writer decides how it gets through.
type Writer struct {
	Budgets Budgets   // every method's budget, shared with the other use cases' writers
	Msgs    Messenger // the Slack the writes go to (fenced, for an answer's)
}

// Do waits for its turn t and calls write, retrying under pol until the write succeeds, ctx ends
// or pol gives up. o is the outage the write shares with others (nil: its own).
func (w *Writer) Do(ctx context.Context, pol RetryPolicy, o *Outage, t Turn, write func(context.Context) error) error {
	if o == nil {
		o = new(Outage)
	}
	r := retries{policy: pol, outage: o, backoff: FirstBackoff}
	for {
		if err := t.Wait(ctx); err != nil {
			return err
		}
		err := write(ctx)
		if err == nil {
			o.End()
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		if ra, ok := RateLimited(err); ok {
			if !r.waitOut() {
				return err
			}
			t.Throttled(ra)
			continue
		}
		if !Transient(err) {
			return err
		}
		pause, ok := r.retry()
		if !ok || watch.Sleep(ctx, pause) != nil {
			return err
		}
	}
}

// Post posts msg in channel (in thread, "" for the top level) at its turn t (PostTurn, maybe
// bounded), retried under pol within outage o (nil: its own), and returns its ts (the last
// attempt's).
func (w *Writer) Post(ctx context.Context, pol RetryPolicy, o *Outage, t Turn, channel, thread string, msg Msg) (string, error) {
	var ts string
	err := w.Do(ctx, pol, o, t, func(ctx context.Context) (err error) {
		ts, err = w.Msgs.Post(ctx, channel, thread, msg)
		return err
	})
	return ts, err
}

// Update writes msg into message ts at its turn t (EditTurn, or a turn it holds), retried under pol
// within outage o (nil: its own). An edit that timed out is repeated: it does no harm twice.
func (w *Writer) Update(ctx context.Context, pol RetryPolicy, o *Outage, t Turn, channel, ts string, msg Msg) error {
	return w.Do(ctx, pol, o, t, func(ctx context.Context) error {
		return Idempotent(w.Msgs.Update(ctx, channel, ts, msg))
	})
}

// Delete deletes message ts, retried under pol; its wait for the Deletes budget ends at by (unless
// zero). A message already gone counts as deleted, so a timed-out delete is repeated: one that
// landed answers message_not_found the next time.
func (w *Writer) Delete(ctx context.Context, pol RetryPolicy, by time.Time, channel, ts string) error {
	err := w.Do(ctx, pol, nil, BucketTurn(w.Budgets.Deletes).By(by), func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, WriteCallTimeout)
		defer cancel()
		err := w.Msgs.Delete(ctx, channel, ts)
		if SlackErr(err) == "message_not_found" {
			return nil
		}
		return Idempotent(err)
	})
	if err != nil {
		return fmt.Errorf("chat.delete: %w", err)
	}
	return nil
}

// DeleteHeld deletes message ts, its turn taken already (TryDelete), each call on a context of
// call(ctx); it reports whether the message is gone. A call that timed out or failed in passing is
// made once more (a delete that landed answers message_not_found then): thought still there, a
// deleted message would be edited in vain.
func (w *Writer) DeleteHeld(ctx context.Context, call CallCtxFunc, channel, ts string) bool {
	for range 2 {
		cctx, cancel := call(ctx)
		err := w.Msgs.Delete(cctx, channel, ts)
		cancel()
		if err == nil || SlackErr(err) == "message_not_found" {
			return true
		}
		if ra, limited := RateLimited(err); limited {
			w.Budgets.Deletes.Throttled(ra) // every delete waits it out; this one is not tried again
			return false
		}
		if ctx.Err() != nil || !Transient(Idempotent(err)) {
			return false
		}
	}
	return false
}

// Ephemeral shows text to user alone in channel (in thread), retried under pol; its wait for the
// Ephemerals budget ends at by (unless zero).
func (w *Writer) Ephemeral(ctx context.Context, pol RetryPolicy, by time.Time, channel, user, thread, text string) error {
	err := w.Do(ctx, pol, nil, BucketTurn(w.Budgets.Ephemerals).By(by), func(ctx context.Context) error {
		return w.Msgs.Ephemeral(ctx, channel, user, thread, text)
	})
	if err != nil {
		return fmt.Errorf("chat.postEphemeral: %w", err)
	}
	return nil
}

// Turn is where a Slack write waits for its turn, and records a 429 for every answer: the budget of
// its method, or the budgets it takes a slot in one after the other.
type Turn struct {
	Wait      func(context.Context) error
	Throttled func(time.Duration)
}

// BucketTurn is a turn in budget b.
func BucketTurn(b *pace.Bucket) Turn { return Turn{Wait: b.Wait, Throttled: b.Throttled} }

// By is t with its wait ended at by (unless zero): a wait for a turn bounded more tightly than the
// write that follows it.
func (t Turn) By(by time.Time) Turn {
	if by.IsZero() {
		return t
	}
	wait := t.Wait
	t.Wait = func(ctx context.Context) error { return waitBy(ctx, by, wait) }
	return t
}

// Held is t whose next wait returns at once when *taken is set (the turn was taken earlier, for
// this write), clearing it.
func (t Turn) Held(taken *bool) Turn {
	wait := t.Wait
	t.Wait = func(ctx context.Context) error {
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

// EditTurn is a turn in lane l of the edit budget (or of the appends budget, for a stream's lane)
// at prio, for text waiting since since.
func (w *Writer) EditTurn(l *pace.Lane, prio pace.Priority, since time.Time) Turn {
	return Turn{Wait: func(ctx context.Context) error { return l.Wait(ctx, prio, since) }, Throttled: l.Throttled}
}

// EditLane is a new answer's place in the fair edit budget (chat.update); AppendLane in the
// appends budget (chat.appendStream).
func (w *Writer) EditLane() *pace.Lane   { return w.Budgets.Edits.Lane() }
func (w *Writer) AppendLane() *pace.Lane { return w.Budgets.Appends.Lane() }

// Scheduler is the budget an answer writes its text from: the appends' for a native stream, else
// the edits'.
func (w *Writer) Scheduler(stream bool) *pace.Scheduler {
	if stream {
		return w.Budgets.Appends
	}
	return w.Budgets.Edits
}

// EditSpacing is how far apart one answer's edits come while the answers in flight share the edit
// budget (pace.Scheduler.Spacing).
func (w *Writer) EditSpacing() time.Duration { return w.Budgets.Edits.Spacing() }

// EditWait waits for a chat.update token outside the answers' lanes (a stream Slack ended, finished
// by an edit).
func (w *Writer) EditWait(ctx context.Context) error { return w.Budgets.Edits.Bucket().Wait(ctx) }

// PostTurn is a turn to post in channel: the channel's post budget, then the workspace's (PostWait).
func (w *Writer) PostTurn(channel string) Turn {
	return Turn{
		Wait:      func(ctx context.Context) error { return w.PostWait(ctx, channel) },
		Throttled: func(d time.Duration) { w.PostThrottled(channel, d) },
	}
}

// PostWait waits for a chat.postMessage (or chat.startStream) slot: the channel's, then the workspace's.
// When the channel gets a 429 while the post queues for the workspace, the channel's slot it holds was
// handed out before that 429 said the channel's budget is spent: it queues for the channel again. (Else
// every post holding a slot would go as the pause ends, and draw another 429: seen in the load benchmark
// when Slack's budgets were spent at start-up.)
//
// The workspace's slot taken in a round that goes back to the channel's line is not given back (a token
// returned to a bucket with waiters could put two calls on one slot); a round costs one only after a
// 429 in the channel.
func (w *Writer) PostWait(ctx context.Context, channel string) error {
	for {
		slot, err := w.Budgets.Posts.WaitSlot(ctx, channel)
		if err != nil {
			return err
		}
		if err := w.Budgets.PostsWorkspace.Wait(ctx); err != nil {
			return err
		}
		if !slot.Stale() {
			return nil
		}
	}
}

// EndClaim is a live answer's claim on the post of its end, in its channel's budget and the
// workspace's (pace.Bucket.Reserve): the answer's posts that only show progress (its next part)
// leave the claimed posts to the ends (SpareWait).
type EndClaim struct {
	w                   *Writer
	channel             string
	inChannel, anywhere *pace.Reservation
}

// ClaimEnd claims the post of the end of an answer live in channel; Release gives it up.
func (w *Writer) ClaimEnd(channel string) *EndClaim {
	return &EndClaim{w: w, channel: channel,
		inChannel: w.Budgets.Posts.Reserve(channel), anywhere: w.Budgets.PostsWorkspace.Reserve()}
}

// SpareWait is PostWait for a post that only shows progress: it leaves the posts claimed for the
// ends of the answers live in the channel and the workspace.
func (c *EndClaim) SpareWait(ctx context.Context) error {
	for {
		slot, err := c.w.Budgets.Posts.WaitSpare(ctx, c.channel)
		if err != nil {
			return err
		}
		if _, err := c.w.Budgets.PostsWorkspace.WaitSpare(ctx); err != nil {
			return err
		}
		if !slot.Stale() {
			return nil
		}
	}
}

// Release gives the claim up.
func (c *EndClaim) Release() {
	c.inChannel.Release()
	c.anywhere.Release()
}

// PostThrottled records a post's 429 in both budgets: Slack does not say which limit was hit.
func (w *Writer) PostThrottled(channel string, retryAfter time.Duration) {
	w.Budgets.Posts.Throttled(channel, retryAfter)
	w.Budgets.PostsWorkspace.Throttled(retryAfter)
}

// StreamTurn is a turn for chat.startStream or chat.stopStream (Budgets.Streams); StartTurn is the
// whole turn of a start: that budget, then the channel's post budgets.
func (w *Writer) StreamTurn() Turn { return BucketTurn(w.Budgets.Streams) }

func (w *Writer) StartTurn(channel string) Turn {
	streams := w.StreamTurn()
	return Turn{Wait: func(ctx context.Context) error {
		if err := streams.Wait(ctx); err != nil {
			return err
		}
		return w.PostWait(ctx, channel)
	}, Throttled: streams.Throttled}
}

// Read makes a thread or history read within the shared read budget: it waits for a token, and a
// 429 pauses every reader for its Retry-After (and lowers the rate) before this one tries again, so
// concurrent replies queue for reads instead of retrying into a storm. Only 429s are retried (at
// most maxRateLimited), until ctx ends.
func (w *Writer) Read(ctx context.Context, f func(context.Context) error) error {
	for limited := 0; ; {
		if err := w.Budgets.Reads.Wait(ctx); err != nil {
			return err
		}
		err := f(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		ra, ok := RateLimited(err)
		if limited++; !ok || limited == maxRateLimited {
			return err
		}
		w.Budgets.Reads.Throttled(ra)
	}
}

// ReadOnce makes one read if a read token is free at once (ok false when none is); a 429 pauses
// every reader, and is not retried.
func (w *Writer) ReadOnce(ctx context.Context, f func(context.Context) error) (ok bool, err error) {
	if !w.Budgets.Reads.TryTake() {
		return false, nil
	}
	err = f(ctx)
	if ra, limited := RateLimited(err); limited {
		w.Budgets.Reads.Throttled(ra)
	}
	return true, err
}

// Calls that are made only when their budget has a token at once, because they are courtesies or
// have a way around: a native stream (else the answer is edited), an agent session's "processing",
// a stream's task cards, a placeholder withdrawn under load (the thinking status: package pane).
func (w *Writer) TryStream() bool  { return w.Budgets.Streams.TryTake() }
func (w *Writer) TrySession() bool { return w.Budgets.Sessions.TryTake() }
func (w *Writer) TryAppend() bool  { return w.Budgets.Appends.Bucket().TryTake() }
func (w *Writer) TryDelete() bool  { return w.Budgets.Deletes.TryTake() }

// SessionTurn is a turn for agents.sessions.setStatus.
func (w *Writer) SessionTurn() Turn { return BucketTurn(w.Budgets.Sessions) }

// CallCtxFunc gives a Slack call its context from the context of the waits before it.
type CallCtxFunc func(context.Context) (context.Context, context.CancelFunc)

// WriteCallTimeout bounds one interim Slack write once it holds its slot (handlers.callCtx).
const WriteCallTimeout = 10 * time.Second
