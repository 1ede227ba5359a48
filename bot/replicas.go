package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/watch"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// Replicas is what the bot shares with its other replicas (the state package: Redis with a local
// fallback, or this process's memory alone): which messages are being answered anywhere, one
// answer at a time per thread, the journal of answers in progress, and a way to hand a click to
// the replica whose answer it is.
type Replicas interface {
	Self() string
	// Claim is true the first time key is claimed within ttl, by any replica.
	Claim(ctx context.Context, key string, ttl time.Duration) (first bool, err error)
	// Lease takes the thread key for this replica if it is free (or its holder died) and returns
	// the holder; Release frees it.
	Lease(ctx context.Context, key string) (holder string, err error)
	Holder(ctx context.Context, key string) (string, error)
	Release(ctx context.Context, key string) error
	// Open records an answer in progress, CloseAnswer removes it, Abandon hands it over for adoption,
	// Get finds it.
	Open(ctx context.Context, a state.Answer) error
	CloseAnswer(ctx context.Context, id string) error
	Abandon(ctx context.Context, id string) error
	Get(ctx context.Context, id string) (state.Answer, bool, error)
	Alive(ctx context.Context, replica string) (bool, error)
	// Send hands msg to replica; Receive returns the next message handed to this one.
	Send(ctx context.Context, replica string, msg []byte) error
	Receive(ctx context.Context) ([]byte, error)
}

const (
	// claimTTL is how long a message answered by any replica is remembered: Slack has been seen
	// retrying an event minutes after its first delivery, to any of the app's connections.
	claimTTL = time.Hour
	// leasePoll is how often an answer waits to see its thread's lease free, while another
	// replica answers there (a holder that dies frees it within the state package's liveness TTL).
	leasePoll = 500 * time.Millisecond
	// leaseRenew is how often an answer renews its thread's lease while it runs: a third of its TTL,
	// so an answer that runs long (tools, approvals) keeps it through two failed renewals.
	leaseRenew = state.LeaseTTL / 3
	// sharedTimeout bounds one call to the shared state; the state package answers from this
	// process's memory when Redis is slow or gone, so this is a last resort.
	sharedTimeout = 3 * time.Second
)

// claim reports whether this replica is the first to answer the message of req: false for a
// redelivery that another replica (or this one, before a restart) answers already. Only events
// are redelivered; a click or a shortcut (Regenerate, Summarize thread) answers a message again
// on purpose.
func (b *Bot) claim(ctx context.Context, req *route.Request, log *zap.Logger) bool {
	rr := req.Reply
	if req.Kind != route.Message {
		return true
	}
	key := "answer:" + route.AnswerID(rr.Channel, rr.TS)
	if rr.Edited {
		key += ":edited"
	}
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	first, err := b.shared.Claim(ctx, key, claimTTL)
	if err != nil {
		log.Warn("shared dedupe failed: answering", zap.Error(err)) // a duplicate is better than silence
		return true
	}
	if !first {
		b.duplicate("message", log)
	}
	return first
}

// lease waits until this replica holds the thread's lease: another replica may be answering there.
// It returns a func that releases it.
func (b *Bot) lease(ctx context.Context, key string, log *zap.Logger) (release func(), err error) {
	var t *time.Timer
	for {
		holder, err := b.callShared(ctx, func(ctx context.Context) (string, error) { return b.shared.Lease(ctx, "thread:"+key) })
		switch {
		case ctx.Err() != nil:
			return nil, context.Cause(ctx) // shutting down
		case err != nil:
			log.Warn("thread lease failed: answering", zap.Error(err))
			return func() {}, nil
		case holder == b.shared.Self():
			return func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
				defer cancel()
				if err := b.shared.Release(ctx, "thread:"+key); err != nil {
					log.Warn("thread lease not released (it ends with this replica)", zap.Error(err))
				}
			}, nil
		}
		if t == nil {
			log.Debug("another replica answers in the thread: waiting", zap.String("holder", holder))
			t = time.NewTimer(leasePoll)
			defer t.Stop()
		} else {
			t.Reset(leasePoll)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// holdLease renews the thread's lease every Options.leaseRenew while the answer runs (until ctx ends
// or stop is called; stop waits for the renewing goroutine). A renewal that finds another replica
// holding the thread (this one was taken for dead meanwhile, and the other took the thread for a later
// question) is logged, and the answer goes on: if another replica adopted it, the fence stops its next
// write; if not, it is still this replica's and answers an earlier question its asker waits for, and
// stopping it would only leave that question with a half answer. The two answers then overlap in the
// thread once, the later one written without the earlier one's end in its context.
func (b *Bot) holdLease(ctx context.Context, key string, log *zap.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(b.opt.leaseRenew)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			holder, err := b.callShared(ctx, func(ctx context.Context) (string, error) { return b.shared.Lease(ctx, "thread:"+key) })
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				log.Warn("thread lease not renewed", zap.Error(err))
			case holder != b.shared.Self():
				log.Warn("thread lease held by another replica", zap.String("holder", holder))
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func (b *Bot) callShared(ctx context.Context, f func(context.Context) (string, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	return f(ctx)
}

// journal records rr's answer as in progress on this replica, and returns a func that ends the
// record once the answer has run (runErr: how it ended). A replica that dies leaves its record: a live
// replica, or this one restarted, closes the answer in Slack (handlers.OrphanCloser.CloseOrphans). An answer
// whose closing write did not land (handlers.ErrUnclosed: a Slack outage longer than the final write's,
// a Stop while its writes waited for the fence) or whose handler panicked may show unfinished: its
// record is handed over for adoption rather than removed, so that the next sweep closes it with the
// interrupted note (or leaves it, if its last message shows it done after all).
func (b *Bot) journal(ctx context.Context, rr *route.ReplyRequest, log *zap.Logger) (endRecord func(runErr error)) {
	id := route.AnswerID(rr.Channel, rr.TS)
	a := state.Answer{ID: id, Team: rr.Team, Channel: rr.Channel, ThreadTS: rr.ThreadTS, TS: rr.TS, Asker: rr.User,
		Started: time.Now()}
	if rr.Replace != "" {
		a.Messages = []string{rr.Replace} // regenerated in place: the old answer's message is this one's
	}
	octx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	if err := b.shared.Open(octx, a); err != nil {
		log.Warn("answer not journaled", zap.Error(err))
	}
	return func(runErr error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
		defer cancel()
		if errors.Is(runErr, handlers.ErrUnclosed) || errors.Is(runErr, errPanic) {
			if err := b.shared.Abandon(ctx, id); err != nil {
				log.Warn("unfinished answer's journal record not handed over", zap.Error(err))
			}
			return
		}
		if err := b.shared.CloseAnswer(ctx, id); err != nil {
			log.Warn("answer journal record not removed", zap.Error(err))
		}
	}
}

// forward hands req to the replica writing the answer id, if another live replica does: the one
// the journal names, or, when no record has that id (the answer to a later message in the
// thread), the one holding req's thread. It reports whether it did; false: no other replica
// writes there (the answer has ended).
func (b *Bot) forward(ctx context.Context, req *route.Request, id string) (bool, error) {
	if req.From != "" {
		return false, nil // forwarded here already: the answer has ended since
	}
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	owner, err := b.writer(ctx, req, id)
	if err != nil || owner == "" || owner == b.shared.Self() {
		return false, err
	}
	if alive, err := b.shared.Alive(ctx, owner); err != nil || !alive {
		return false, err
	}
	h, err := handoverOf(req, b.shared.Self(), owner, time.Now())
	if err != nil {
		return false, fmt.Errorf("forward: %w", err)
	}
	msg, err := seal(b.opt.InboxKey, h)
	if err != nil {
		return false, err
	}
	if err := b.shared.Send(ctx, owner, msg); err != nil {
		return false, fmt.Errorf("forward to %s: %w", owner, err)
	}
	return true, nil
}

// writer is the replica writing the answer id ("": none): its journal record's owner, else the
// holder of req's thread.
func (b *Bot) writer(ctx context.Context, req *route.Request, id string) (string, error) {
	a, ok, err := b.shared.Get(ctx, id)
	if err != nil || ok {
		return a.Owner, err
	}
	return b.shared.Holder(ctx, "thread:"+threadKey(req.Channel, req.ThreadTS))
}

// receive reads the requests other replicas hand to this one and passes them to the loop, until
// ctx ends. The loop dispatches them as if Slack had sent them here; only hand-overs signed with
// the inbox key, fresh and for this replica, are passed on (inbox.go).
func (b *Bot) receive(ctx context.Context, out chan<- *route.Request) {
	for {
		msg, err := b.shared.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			b.log.Warn("replica inbox", zap.Error(err))
			if watch.Sleep(ctx, time.Second) != nil {
				return
			}
			continue
		}
		h, err := unseal(b.opt.InboxKey, msg, b.shared.Self(), time.Now())
		if err == nil {
			err = b.firstDelivery(ctx, msg)
		}
		if err != nil {
			// Not from a replica of this bot, too old to act on, or a copy: whoever can write to
			// Redis could have pushed it. Its contents are not logged.
			b.log.Warn("replica inbox: message refused", zap.String("reason", err.Error()), zap.Int("bytes", len(msg)))
			continue
		}
		req := h.request()
		select {
		case out <- req:
		case <-ctx.Done():
			return
		}
	}
}

// firstDelivery refuses a signed hand-over this replica has had before (a copy pushed again while
// it is fresh), by claiming its signature for as long as it could be accepted. When the claim
// cannot be made, the hand-over goes through: a Stop or an approval acts at most once anyway.
func (b *Bot) firstDelivery(ctx context.Context, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	first, err := b.shared.Claim(ctx, "handover:"+string(msg[:macLen]), 2*handoverMaxAge)
	switch {
	case err != nil:
		b.log.Warn("replica inbox: hand-over not checked for copies", zap.Error(err))
	case !first:
		return errors.New("a copy of a hand-over already received")
	}
	return nil
}

// alone is Replicas for a bot with nobody to share with (Options.Replicas nil: tests, tools): the
// loop's own dedupe and thread turns are all there is, and nothing is journaled.
type alone struct{}

func (alone) Self() string                                               { return "" }
func (alone) Claim(context.Context, string, time.Duration) (bool, error) { return true, nil }
func (alone) Lease(context.Context, string) (string, error)              { return "", nil }
func (alone) Holder(context.Context, string) (string, error)             { return "", nil }
func (alone) Release(context.Context, string) error                      { return nil }
func (alone) Open(context.Context, state.Answer) error                   { return nil }
func (alone) CloseAnswer(context.Context, string) error                  { return nil }
func (alone) Abandon(context.Context, string) error                      { return nil }
func (alone) Get(context.Context, string) (state.Answer, bool, error) {
	return state.Answer{}, false, nil
}
func (alone) Alive(context.Context, string) (bool, error) { return false, nil }
func (alone) Send(context.Context, string, []byte) error  { return state.ErrNoReplica }
func (alone) Receive(ctx context.Context) ([]byte, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}
