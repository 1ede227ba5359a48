package access

import (
	"context"
	"sync"

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
}

// Guard applies access control to every route, as a route.Middleware: people the policy refuses
// are told why (privately, by the bot: the refusal is Accept's answer) and their request does not
// run; a refused follow-up without a mention is refused silently, since the person did not address
// the bot. Refusal comes first, so a refused person hears it whether or not the bot is busy. The
// /imagine daily quota is taken when a picture is accepted and given back when it fails. Safe for
// concurrent use.
type Guard struct {
	opt GuardOptions

	mu      sync.Mutex
	pending map[*route.Request]Taken // pictures taken from the quota for requests accepted and not yet run
}

// NewGuard returns a Guard with opt.
func NewGuard(opt GuardOptions) *Guard { return &Guard{opt: opt, pending: map[*route.Request]Taken{}} }

// Middleware wraps next with the access rules (route.Middleware).
func (g *Guard) Middleware(next route.Handler) route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision { return g.accept(next, req) },
		RunFunc:    func(ctx context.Context, req *route.Request) error { return g.run(ctx, next, req) },
	}
}

func (g *Guard) check(channel, user string) Decision {
	if g.opt.Policy == nil {
		return allow
	}
	return g.opt.Policy.Check(channel, user)
}

func (g *Guard) denied(feature string, r Reason) {
	if g.opt.Denied != nil {
		g.opt.Denied(feature, string(r))
	}
}

// accept refuses, with what the person is told, people the policy does not allow and people
// whose /imagine quota is used up; otherwise it is next's Accept. A picture is taken from the
// quota only when the job is accepted (an empty prompt or a refusal costs nothing).
func (g *Guard) accept(next route.Handler, req *route.Request) route.Decision {
	if d := g.check(req.Channel, req.User); !d.Allowed {
		followUp := req.Feature == FeatureFollowUp
		if k := g.opt.KnownFollowUp; !followUp || k == nil || req.Reply == nil || k(*req.Reply) {
			g.denied(req.Feature, d.Reason)
		}
		if followUp {
			return route.Decision{}
		}
		return route.Decision{Say: d.Message}
	}
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

// run runs next; when a picture fails, it goes back to the person's quota (only pictures
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
	err := next.Run(ctx, req)
	delivered = err == nil
	return err
}
