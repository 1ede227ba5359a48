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
// fallback, or this process's memory alone), by part: which messages are being answered anywhere
// (Claims), one answer at a time per thread (Leases), the journal of answers in progress (Journal),
// and a way to hand a click to the replica whose answer it is (Inbox). A nil part is this replica's
// alone: nobody shares it.
type Replicas struct {
	Claims  Claims
	Leases  Leases
	Journal Journal
	Inbox   Inbox
}

// Claims dedupes the messages of every replica.
type Claims interface {
	// Claim is true the first time key is claimed within ttl, by any replica.
	Claim(ctx context.Context, key string, ttl time.Duration) (first bool, err error)
}

// Leases are the threads' leases, and who holds them is alive.
type Leases interface {
	Self() string
	// Lease takes the thread key for this replica if it is free (or its holder died) and returns
	// the holder; Release frees it.
	Lease(ctx context.Context, key string) (holder string, err error)
	Holder(ctx context.Context, key string) (string, error)
	Release(ctx context.Context, key string) error
	Alive(ctx context.Context, replica string) (bool, error)
}

// Journal records the answers in progress: Open records one, CloseAnswer removes it, Abandon hands
// it over for adoption, Get finds it.
type Journal interface {
	Open(ctx context.Context, a state.Answer) error
	CloseAnswer(ctx context.Context, id string) error
	Abandon(ctx context.Context, id string) error
	Get(ctx context.Context, id string) (state.Answer, bool, error)
}

// Inbox carries messages between replicas: Send hands msg to replica; Receive returns the next
// message handed to this one.
type Inbox interface {
	Send(ctx context.Context, replica string, msg []byte) error
	Receive(ctx context.Context) ([]byte, error)
}

// replicas is the bot's coordination with its other replicas: the claims of the messages it
// answers, the leases of their threads, the journal of its answers, and the hand-over of clicks
// (Stop, approvals) between replicas through their inboxes.
type replicas struct {
	shared   Replicas
	inboxKey []byte        // Options.InboxKey
	renew    time.Duration // Options.leaseRenew
	log      *zap.Logger
	notices  *notices // where a click that could not be handed over is told
	// duplicate reports a message another replica (or this one before a restart) answers already.
	duplicate func(kind string, log *zap.Logger)
}

// withAlone is r with each nil part this replica's alone.
func (r Replicas) withAlone() Replicas {
	if r.Claims == nil {
		r.Claims = alone{}
	}
	if r.Leases == nil {
		r.Leases = alone{}
	}
	if r.Journal == nil {
		r.Journal = alone{}
	}
	if r.Inbox == nil {
		r.Inbox = alone{}
	}
	return r
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
func (r *replicas) claim(ctx context.Context, req *route.Request, log *zap.Logger) bool {
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
	first, err := r.shared.Claims.Claim(ctx, key, claimTTL)
	if err != nil {
		log.Warn("shared dedupe failed: answering", zap.Error(err)) // a duplicate is better than silence
		return true
	}
	if !first {
		r.duplicate("message", log)
	}
	return first
}

// lease waits until this replica holds the thread's lease: another replica may be answering there.
// It returns a func that releases it.
func (r *replicas) lease(ctx context.Context, key string, log *zap.Logger) (release func(), err error) {
	var t *time.Timer
	for {
		holder, err := r.callShared(ctx, func(ctx context.Context) (string, error) { return r.shared.Leases.Lease(ctx, "thread:"+key) })
		switch {
		case ctx.Err() != nil:
			return nil, context.Cause(ctx) // shutting down
		case err != nil:
			log.Warn("thread lease failed: answering", zap.Error(err))
			return func() {}, nil
		case holder == r.shared.Leases.Self():
			return func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
				defer cancel()
				if err := r.shared.Leases.Release(ctx, "thread:"+key); err != nil {
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
func (r *replicas) holdLease(ctx context.Context, key string, log *zap.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.renew)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			holder, err := r.callShared(ctx, func(ctx context.Context) (string, error) { return r.shared.Leases.Lease(ctx, "thread:"+key) })
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				log.Warn("thread lease not renewed", zap.Error(err))
			case holder != r.shared.Leases.Self():
				log.Warn("thread lease held by another replica", zap.String("holder", holder))
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func (r *replicas) callShared(ctx context.Context, f func(context.Context) (string, error)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	return f(ctx)
}

// journal records rr's answer as in progress on this replica, and returns a func that ends the
// record once the answer has run (runErr: how it ended). A replica that dies leaves its record: a live
// replica, or this one restarted, closes the answer in Slack (orphans.Closer.CloseOrphans). An answer
// whose closing write did not land (handlers.ErrUnclosed: a Slack outage longer than the final write's,
// a Stop while its writes waited for the fence) or whose handler panicked may show unfinished: its
// record is handed over for adoption rather than removed, so that the next sweep closes it with the
// interrupted note (or leaves it, if its last message shows it done after all).
func (r *replicas) journal(ctx context.Context, rr *route.ReplyRequest, log *zap.Logger) (endRecord func(runErr error)) {
	id := route.AnswerID(rr.Channel, rr.TS)
	a := state.Answer{ID: id, Team: rr.Team, Channel: rr.Channel, ThreadTS: rr.ThreadTS, TS: rr.TS, Asker: rr.User,
		Started: time.Now()}
	if rr.Replace != "" {
		a.Messages = []string{rr.Replace} // regenerated in place: the old answer's message is this one's
	}
	octx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	if err := r.shared.Journal.Open(octx, a); err != nil {
		log.Warn("answer not journaled", zap.Error(err))
	}
	return func(runErr error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedTimeout)
		defer cancel()
		if errors.Is(runErr, handlers.ErrUnclosed) || errors.Is(runErr, errPanic) {
			if err := r.shared.Journal.Abandon(ctx, id); err != nil {
				log.Warn("unfinished answer's journal record not handed over", zap.Error(err))
			}
			return
		}
		if err := r.shared.Journal.CloseAnswer(ctx, id); err != nil {
			log.Warn("answer journal record not removed", zap.Error(err))
		}
	}
}

// forward hands req to the replica writing the answer id, if another live replica does: the one
// the journal names, or, when no record has that id (the answer to a later message in the
// thread), the one holding req's thread. It reports whether it did; false: no other replica
// writes there (the answer has ended).
func (r *replicas) forward(ctx context.Context, req *route.Request, id string) (receipt string, err error) {
	if req.From != "" {
		return "", nil // forwarded here already: the answer has ended since
	}
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	owner, err := r.writer(ctx, req, id)
	if err != nil || owner == "" || owner == r.shared.Leases.Self() {
		return "", err
	}
	if alive, err := r.shared.Leases.Alive(ctx, owner); err != nil || !alive {
		return "", err
	}
	h, err := handoverOf(req, r.shared.Leases.Self(), owner, time.Now())
	if err != nil {
		return "", fmt.Errorf("forward: %w", err)
	}
	msg, err := seal(r.inboxKey, h)
	if err != nil {
		return "", err
	}
	if err := r.shared.Inbox.Send(ctx, owner, msg); err != nil {
		return "", fmt.Errorf("forward to %s: %w", owner, err)
	}
	return receiptOf(msg), nil
}

// receiptOf is the claim a replica makes on a hand-over as it takes it (firstDelivery): named by
// the hand-over's signature.
func receiptOf(msg []byte) string { return "handover:" + string(msg[:macLen]) }

// receiptWait is how long the replica a click was handed to has to take it before its sender
// checks: taking one is a pop from its inbox and a claim, milliseconds while it is alive.
const receiptWait = 3 * time.Second

// taken reports whether the replica a hand-over was sent to took it (claimed receipt) within
// receiptWait. A replica that died before its liveness ran out never will, and nobody else reads
// its inbox: the sender then claims the receipt itself, which both tells it so and keeps the
// hand-over from acting if that replica comes back to it. So either the click acts or its person
// is told, never neither. Unsure (the shared state failed, or this replica is shutting down):
// taken, as before the check.
func (r *replicas) taken(receipt string) bool {
	if watch.Sleep(r.notices.closing, receiptWait) != nil {
		return true
	}
	ctx, cancel := context.WithTimeout(r.notices.closing, sharedTimeout)
	defer cancel()
	claim := r.shared.Claims.Claim
	if c, ok := r.shared.Claims.(sharedClaims); ok {
		claim = c.ClaimShared // this process's memory alone cannot see the receiver's claim
	}
	first, err := claim(ctx, receipt, 2*handoverMaxAge)
	return err != nil || !first
}

// sharedClaims are Claims that can tell when the shared store did not decide a claim
// (state.FallbackKeys: an error then, not an answer from this process's memory).
type sharedClaims interface {
	ClaimShared(ctx context.Context, key string, ttl time.Duration) (first bool, err error)
}

// writer is the replica writing the answer id ("": none): its journal record's owner, else the
// holder of req's thread.
func (r *replicas) writer(ctx context.Context, req *route.Request, id string) (string, error) {
	a, ok, err := r.shared.Journal.Get(ctx, id)
	if err != nil || ok {
		return a.Owner, err
	}
	return r.shared.Leases.Holder(ctx, "thread:"+threadKey(req.Channel, req.ThreadTS))
}

// receive reads the requests other replicas hand to this one and passes them to out, until ctx
// ends; then it closes out. The loop, then the drain, dispatches them as if Slack had sent them here;
// only hand-overs signed with the inbox key, fresh and for this replica, are passed on (inbox.go).
// A message popped is always passed on, even as ctx ends: its receipt is claimed (firstDelivery), so
// its sender takes it as delivered, and out is read until it is closed.
func (r *replicas) receive(ctx context.Context, out chan<- *route.Request) {
	defer close(out)
	for {
		msg, err := r.shared.Inbox.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("replica inbox", zap.Error(err))
			if watch.Sleep(ctx, time.Second) != nil {
				return
			}
			continue
		}
		h, err := unseal(r.inboxKey, msg, r.shared.Leases.Self(), time.Now())
		if err == nil {
			err = r.firstDelivery(context.WithoutCancel(ctx), msg)
		}
		if err != nil {
			// Not from a replica of this bot, too old to act on, or a copy: whoever can write to
			// Redis could have pushed it. Its contents are not logged.
			r.log.Warn("replica inbox: message refused", zap.String("reason", err.Error()), zap.Int("bytes", len(msg)))
			continue
		}
		out <- h.request()
	}
}

// firstDelivery refuses a signed hand-over this replica has had before (a copy pushed again while
// it is fresh), by claiming its signature for as long as it could be accepted. When the claim
// cannot be made, the hand-over goes through: a Stop or an approval acts at most once anyway.
func (r *replicas) firstDelivery(ctx context.Context, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, sharedTimeout)
	defer cancel()
	first, err := r.shared.Claims.Claim(ctx, receiptOf(msg), 2*handoverMaxAge)
	switch {
	case err != nil:
		r.log.Warn("replica inbox: hand-over not checked for copies", zap.Error(err))
	case !first:
		return errors.New("a copy of a hand-over already received")
	}
	return nil
}

// stopElsewhere hands a stop to the replica writing the answer id, or calls ended when none is.
func (r *replicas) stopElsewhere(req *route.Request, id string, log *zap.Logger, ended func()) {
	r.elsewhere(req, id, handoff{what: "stop", failed: handlers.TextStopFailed, ended: ended}, log)
}

// elsewhere hands a click on the answer id (Stop, a tool approval) to the replica writing that answer,
// or tells the person why it could not.
func (r *replicas) elsewhere(req *route.Request, id string, h handoff, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(r.notices.closing, sharedTimeout)
	defer cancel()
	receipt, err := r.forward(ctx, req, id)
	switch {
	case err != nil:
		log.Warn(h.what+": could not reach the replica writing the answer", zap.Error(err))
		r.notices.tell(req.Channel, req.User, req.ThreadTS, h.failed, log)
	case receipt != "":
		log.Info(h.what + " handed to the replica writing the answer")
		if !r.taken(receipt) {
			log.Warn(h.what + ": the replica writing the answer did not take it (it stopped)")
			r.notices.tell(req.Channel, req.User, req.ThreadTS, h.failed, log)
			return
		}
		if h.handed != nil {
			h.handed()
		}
	default:
		log.Debug(h.what + ": the answer has already ended")
		h.ended()
	}
}

// handoff is what a click handed to another replica is, what the person is told when it cannot be
// handed over (failed), and what is done when nobody has the answer open any more (ended).
type handoff struct {
	what, failed string
	ended        func()
	handed       func() // nil: nothing more to do once handed over
}

// alone is every part of Replicas for a bot with nobody to share with (a nil part: tests, tools): the
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
