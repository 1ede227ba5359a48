package access

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/route"
)

// Features, as passed to GuardOptions.Denied.
const (
	FeatureMention  = route.FeatureMention
	FeatureFollowUp = route.FeatureFollowUp
	FeatureDM       = route.FeatureDM
	FeatureImagine  = "imagine" // /imagine and its "Another one" button: the daily quota applies
)

// GuardOptions configure a Guard.
type GuardOptions struct {
	Policy *Policy // nil: everyone everywhere
	Quota  *Quota  // nil: no /imagine quota
	// Denied, when set, is called for every refusal (metrics: ops.Metrics.AccessDenied). It must
	// not block.
	Denied func(feature, reason string)
	// KnownFollowUp, when set, says whether a follow-up would have been answered
	// (handlers.Replies.KnownFollowUp): a refused follow-up counts as a refusal only then, not
	// people talking among themselves in a thread the bot has no part in.
	KnownFollowUp func(route.ReplyRequest) bool
	// Members, when set, refuses people by their standing (EXTERNAL_USERS, GUEST_USERS). Someone
	// it can place only with a look-up is looked up before their request runs, and told there
	// (Notifier) when refused.
	Members  *Members
	Notifier Notifier    // tells a refusal decided after Accept; required with Members
	Log      *zap.Logger // nil: no logs
}

// Notifier tells one person something privately (chat.postEphemeral; *gateway.Notices, paced in
// the bot's one budget of that method, within ctx).
type Notifier interface {
	Ephemeral(ctx context.Context, channel, user, threadTS, text string) error
}

// lookupTimeout bounds the look-up of a person before their request runs, and the note that
// refuses them.
const lookupTimeout = 5 * time.Second

// Guard applies access control to every route, as a route.Middleware: people the policy refuses,
// or their standing (Members: people of other organisations, guests), are told why (privately, by
// the bot: the refusal is Accept's answer, or a note before the request would run when only a
// look-up could place them) and their request does not run; a refused follow-up without a mention
// is refused silently, since the person did not address the bot. Refusal comes first, so a
// refused person hears it whether or not the bot is busy. The /imagine daily quota is taken when
// a picture is accepted and given back when it fails. Safe for concurrent use.
type Guard struct {
	opt GuardOptions

	mu      sync.Mutex
	pending map[*route.Request]Taken // pictures taken from the quota for requests accepted and not yet run
}

// NewGuard returns a Guard with opt.
func NewGuard(opt GuardOptions) *Guard {
	if opt.Log == nil {
		opt.Log = zap.NewNop()
	}
	return &Guard{opt: opt, pending: map[*route.Request]Taken{}}
}

// Middleware wraps next with the access rules (route.Middleware).
func (g *Guard) Middleware(next route.Handler) route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision { return g.accept(next, req) },
		RunFunc:    func(ctx context.Context, req *route.Request) error { return g.run(ctx, next, req) },
	}
}

// check applies the policy, then the person's standing where it is known without I/O (when only a
// look-up can tell, the person is looked up before the request runs: placed).
func (g *Guard) check(req *route.Request) Decision {
	if g.opt.Policy != nil {
		if d := g.opt.Policy.Check(req.Channel, req.User); !d.Allowed {
			return d
		}
	}
	if g.opt.Members == nil {
		return allow
	}
	if d, known := g.opt.Members.Check(req.User, req.Team, req.UserTeam); known {
		return d
	}
	return allow
}

// refused counts a refusal of req and returns what its person is told: nothing for a follow-up
// (they did not address the bot), which counts only when the bot would have answered it.
func (g *Guard) refused(req *route.Request, d Decision) route.Decision {
	followUp := req.Feature == FeatureFollowUp
	if k := g.opt.KnownFollowUp; !followUp || k == nil || req.Reply == nil || k(*req.Reply) {
		g.denied(req.Feature, d.Reason)
	}
	if followUp {
		return route.Decision{}
	}
	return route.Decision{Say: d.Message}
}

// placed looks up the person of a request about to run whom Accept could not place (nothing is
// kept between Accept and Run: a request accepted and never run, a duplicate or one refused as
// busy, leaves nothing behind), and tells them privately when they are refused. It reports
// whether the request may run.
func (g *Guard) placed(ctx context.Context, req *route.Request) bool {
	if g.opt.Members == nil {
		return true
	}
	if _, known := g.opt.Members.Check(req.User, req.Team, req.UserTeam); known {
		return true // decided in Accept
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	d, err := g.opt.Members.Verify(ctx, req.User, req.Team, req.UserTeam)
	log := g.opt.Log.With(zap.String("channel", req.Channel), zap.String("user", req.User), zap.String("feature", req.Feature))
	if err != nil {
		log.Warn("access: person not looked up", zap.Bool("allowed", d.Allowed), zap.Error(err))
	}
	if d.Allowed {
		return true
	}
	log.Info("access: refused for their standing", zap.String("reason", string(d.Reason)))
	if say := g.refused(req, d).Say; say != "" {
		if err := g.opt.Notifier.Ephemeral(ctx, req.Channel, req.User, req.ThreadTS, say); err != nil {
			log.Warn("access: refusal not told", zap.Error(err))
		}
	}
	return false
}

func (g *Guard) denied(feature string, r Reason) {
	if g.opt.Denied != nil {
		g.opt.Denied(feature, string(r))
	}
}

// accept refuses, with what the person is told, people the policy or their standing does not
// allow and people whose /imagine quota is used up; otherwise it is next's Accept. A person only a
// look-up can place is looked up when the request runs (run), which is where they are refused:
// Accept does no I/O. What next does in Accept itself (Stop, tool approvals) is the asker's own,
// and an asker was placed when their question ran.
func (g *Guard) accept(next route.Handler, req *route.Request) route.Decision {
	if d := g.check(req); !d.Allowed {
		return g.refused(req, d)
	}
	return g.acceptQuota(next, req)
}

// acceptQuota takes a picture from the /imagine quota, when the request is one, and is next's
// Accept. A picture is taken only when the job is accepted (an empty prompt or a refusal costs
// nothing).
func (g *Guard) acceptQuota(next route.Handler, req *route.Request) route.Decision {
	if g.opt.Quota == nil || req.Feature != FeatureImagine {
		return next.Accept(req)
	}
	// The quota first: a refusal must not leave a place taken in the next handler.
	d, taken := g.opt.Quota.Take(req.User)
	if !d.Allowed {
		g.denied(req.Feature, d.Reason)
		return route.Decision{Say: d.Message}
	}
	refund := true // also when next panics: a picture not started costs nothing
	defer func() {
		if refund {
			g.opt.Quota.Refund(taken)
		}
	}()
	nd := next.Accept(req)
	if !nd.Run { // an empty prompt, or too many pictures in progress: it costs nothing
		return nd
	}
	refund = false
	g.mu.Lock()
	g.pending[req] = taken
	g.mu.Unlock()
	return nd
}

// run looks up the person when Accept could not place them (refused: told, and next does not
// run), then runs next; when a picture fails, it goes back to the person's quota (only pictures
// delivered count), unless the day it counted on is over.
func (g *Guard) run(ctx context.Context, next route.Handler, req *route.Request) error {
	g.mu.Lock()
	taken, ok := g.pending[req]
	delete(g.pending, req)
	g.mu.Unlock()
	delivered := false
	defer func() { // also when next panics
		if ok && !delivered {
			g.opt.Quota.Refund(taken)
		}
	}()
	if !g.placed(ctx, req) {
		// Told, and nothing ran (a picture taken from the quota goes back): nothing to answer,
		// which also takes down a place in line shown under the thread.
		return handlers.ErrIgnored
	}
	err := next.Run(ctx, req)
	delivered = err == nil
	return err
}
