package access

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/llmbot/llmbot/handlers"
)

// Replier answers a message (bot.Replier; *handlers.Replies implements it).
type Replier interface {
	Reply(ctx context.Context, req handlers.ReplyRequest) error
}

// Imaginer runs /imagine (bot.Imaginer; *handlers.Imagine implements it).
type Imaginer interface {
	Accept(req handlers.ImagineRequest) (ackText string, start bool)
	Run(ctx context.Context, req handlers.ImagineRequest) error
}

// Notifier tells one person something privately (bot.SlackAPI's chat.postEphemeral).
type Notifier interface {
	Ephemeral(ctx context.Context, channel, user, threadTS, text string) error
}

// Features, as passed to GuardOptions.Denied.
const (
	FeatureMention  = "mention"   // a mention in a channel
	FeatureFollowUp = "follow_up" // a thread message without a mention
	FeatureDM       = "dm"
	FeatureImagine  = "imagine"
)

// noticeTimeout bounds the private notice to a refused person.
const noticeTimeout = 10 * time.Second

// GuardOptions configure a Guard.
type GuardOptions struct {
	Policy *Policy // nil: everyone everywhere
	Quota  *Quota  // nil: no /imagine quota
	// Notify tells refused people why, privately; nil: they are not told (not recommended).
	Notify Notifier
	// Denied, when set, is called for every refusal (metrics: ops.Metrics.AccessDenied). It must
	// not block.
	Denied func(feature, reason string)
	// KnownFollowUp, when set, says whether a follow-up would have been answered
	// (handlers.Replies.KnownFollowUp): a refused follow-up counts as a refusal only then, not
	// people talking among themselves in a thread the bot has no part in.
	KnownFollowUp func(handlers.ReplyRequest) bool
}

// Guard applies access control to replies and /imagine: it wraps the bot's Replier and
// Imaginer. Refused people are told once, privately and briefly; nothing is posted in the
// channel. Safe for concurrent use.
type Guard struct{ opt GuardOptions }

// NewGuard returns a Guard with opt.
func NewGuard(opt GuardOptions) *Guard { return &Guard{opt: opt} }

// ErrDenied is wrapped (together with handlers.ErrIgnored, so the bot logs it at debug and
// counts the outcome as "ignored") by the errors of refused replies.
var ErrDenied = errors.New("access denied")

// Replier returns next guarded by the policy.
func (g *Guard) Replier(next Replier) *GuardedReplier { return &GuardedReplier{g: g, next: next} }

// Imaginer returns next guarded by the policy and the daily quota.
func (g *Guard) Imaginer(next Imaginer) *GuardedImaginer {
	return &GuardedImaginer{g: g, next: next, pending: make(map[string][]pendingPicture)}
}

func (g *Guard) check(channel, user string) Decision {
	if g.opt.Policy == nil {
		return allow
	}
	return g.opt.Policy.Check(channel, user)
}

// Refusal is what user is told privately when the rules refuse them feature (FeatureMention, ...)
// in channel, "" when they allow it; a refusal is counted (GuardOptions.Denied). It is for
// requests that cannot reach the guarded Replier or Imaginer (bot.Options.Refusal: the bot is full
// or shutting down), so that a refused person hears the same, and is counted the same.
func (g *Guard) Refusal(feature, channel, user string) string {
	d := g.check(channel, user)
	if d.Allowed {
		return ""
	}
	g.denied(feature, d.Reason)
	return d.Message
}

func (g *Guard) denied(feature string, r Reason) {
	if g.opt.Denied != nil {
		g.opt.Denied(feature, string(r))
	}
}

// GuardedReplier is a Replier that answers only people the policy allows. Create it with
// Guard.Replier.
type GuardedReplier struct {
	g    *Guard
	next Replier
}

// Reply answers req when the policy allows it. Otherwise it tells the person privately (in the
// thread, or in the DM) and returns an error wrapping ErrDenied and handlers.ErrIgnored. A
// follow-up without a mention is refused silently: the person did not address the bot.
func (r *GuardedReplier) Reply(ctx context.Context, req handlers.ReplyRequest) error {
	d := r.g.check(req.Channel, req.User)
	if d.Allowed {
		return r.next.Reply(ctx, req)
	}
	feature := FeatureMention
	switch {
	case req.FollowUp:
		feature = FeatureFollowUp
	case req.InDM():
		feature = FeatureDM
	}
	if k := r.g.opt.KnownFollowUp; !req.FollowUp || k == nil || k(req) {
		r.g.denied(feature, d.Reason)
	}
	err := fmt.Errorf("%s %w (%s): %w", feature, ErrDenied, d.Reason, handlers.ErrIgnored)
	if req.FollowUp || r.g.opt.Notify == nil {
		return err
	}
	// Detached and time-boxed: the refusal is told even when the bot is shutting down.
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
	defer cancel()
	if nerr := r.g.opt.Notify.Ephemeral(nctx, req.Channel, req.User, req.ThreadTS, d.Message); nerr != nil {
		return fmt.Errorf("tell refused user: %w", nerr) // not ErrIgnored: the person was not told
	}
	return err
}

// GuardedImaginer is an Imaginer that makes pictures only for people the policy allows and
// within their daily quota. Create it with Guard.Imaginer.
type GuardedImaginer struct {
	g    *Guard
	next Imaginer

	mu      sync.Mutex
	pending map[string][]pendingPicture // user -> pictures taken at Accept for jobs not yet run, oldest first
}

// pendingPicture is a picture taken from the quota at Accept, for the job Run will run.
type pendingPicture struct {
	taken Taken
	at    time.Time
}

// pendingFor is how long a picture taken at Accept waits for its Run (the bot starts the job at
// once; handlers.Imagine frees a place no Run takes within 30 s).
const pendingFor = time.Minute

// Accept refuses, with the private ack text, people the policy does not allow and people whose
// quota is used up. A picture is taken from the quota only when the job starts (an empty prompt
// or a busy refusal costs nothing).
func (i *GuardedImaginer) Accept(req handlers.ImagineRequest) (string, bool) {
	if d := i.g.check(req.Channel, req.User); !d.Allowed {
		i.g.denied(FeatureImagine, d.Reason)
		return d.Message, false
	}
	if i.g.opt.Quota == nil {
		return i.next.Accept(req)
	}
	// The quota first: a refusal must not leave a place taken in the next Imaginer.
	d, taken := i.g.opt.Quota.Take(req.User)
	if !d.Allowed {
		i.g.denied(FeatureImagine, d.Reason)
		return d.Message, false
	}
	text, start := i.next.Accept(req)
	if !start { // an empty prompt, or busy: it costs nothing
		i.g.opt.Quota.Refund(taken)
		return text, false
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	now := time.Now()
	ps := i.pending[req.User]
	for len(ps) > 0 && now.Sub(ps[0].at) > pendingFor { // accepted, never run
		ps = ps[1:]
	}
	i.pending[req.User] = append(ps, pendingPicture{taken: taken, at: now})
	return text, true
}

// Run runs the job; when it fails, the picture goes back to the person's quota (only pictures
// delivered count), unless the day it counted on is over.
func (i *GuardedImaginer) Run(ctx context.Context, req handlers.ImagineRequest) error {
	taken := i.takeOver(req.User)
	err := i.next.Run(ctx, req)
	if err != nil && i.g.opt.Quota != nil {
		i.g.opt.Quota.Refund(taken)
	}
	return err
}

// takeOver returns the picture the oldest accepted job of user took (zero when there is none: a
// Run without Accept).
func (i *GuardedImaginer) takeOver(user string) Taken {
	i.mu.Lock()
	defer i.mu.Unlock()
	ps := i.pending[user]
	if len(ps) == 0 {
		return Taken{}
	}
	if len(ps) == 1 {
		delete(i.pending, user)
	} else {
		i.pending[user] = ps[1:]
	}
	return ps[0].taken
}
