package ledger

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/route"
)

// Notifier tells one person something privately (*gateway.Notices).
type Notifier interface {
	Ephemeral(ctx context.Context, channel, user, threadTS, text string) error
}

// GateOptions configure a Gate.
type GateOptions struct {
	Book *Book // nil: requests are marked with their Who, no budget is checked
	// Costly are the features whose requests ask the model (answers, summaries, pictures): their
	// budgets are checked before they run.
	Costly   []string
	Notifier Notifier
	// Note is what a person is told when a budget of theirs is spent (notes.OverBudget).
	Note  func(e *OverBudget, now time.Time) string
	Hooks Hooks
	Log   *zap.Logger
}

// Gate is the ledger's route middleware: it puts every request's Who (its person, its channel,
// its feature as the place) in the context its handler runs in, so each model request the
// handler makes is counted for them; and before a costly request runs, it checks the budgets,
// telling the person privately which one is spent and when it resets, and running nothing.
type Gate struct{ opt GateOptions }

// NewGate returns a Gate with opt.
func NewGate(opt GateOptions) *Gate {
	if opt.Log == nil {
		opt.Log = zap.NewNop()
	}
	return &Gate{opt: opt}
}

// noteTimeout bounds the private note of a spent budget.
const noteTimeout = 5 * time.Second

// Middleware wraps next (route.Middleware).
func (g *Gate) Middleware(next route.Handler) route.Handler {
	return route.Funcs{
		AcceptFunc: next.Accept,
		RunFunc: func(ctx context.Context, req *route.Request) error {
			w := Who{User: req.User, Channel: req.Channel, Place: req.Feature}
			ctx = With(ctx, w)
			if err := g.check(ctx, req, w); err != nil {
				return err
			}
			return next.Run(ctx, req)
		},
	}
}

// check refuses a costly request whose budget is spent (told privately); a budget that cannot be
// read lets it run, as the chat seam does.
func (g *Gate) check(ctx context.Context, req *route.Request, w Who) error {
	if g.opt.Book == nil || !g.opt.Book.Budgets().On() || !costly(g.opt.Costly, req.Feature) {
		return nil
	}
	var ob *OverBudget
	err := g.opt.Book.Check(ctx, w)
	if !errors.As(err, &ob) {
		if err != nil && ctx.Err() == nil {
			g.opt.Log.Warn("ledger: budgets not checked", zap.Error(err))
		}
		return nil
	}
	if g.opt.Hooks.Refused != nil {
		g.opt.Hooks.Refused(w.Place, ob)
	}
	g.opt.Log.Info("ledger: refused, a budget is spent", zap.String("user", req.User), zap.String("channel", req.Channel),
		zap.String("scope", ob.Scope), zap.String("feature", req.Feature))
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noteTimeout)
	defer cancel()
	thread := req.ThreadTS
	if req.Reply != nil {
		thread = req.Reply.ThreadTS
	}
	if err := g.opt.Notifier.Ephemeral(nctx, req.Channel, req.User, thread, g.opt.Note(ob, time.Now())); err != nil {
		g.opt.Log.Warn("ledger: the spent budget's note not told", zap.Error(err))
	}
	return route.ErrIgnored // told; nothing else to answer
}

func costly(features []string, f string) bool { return slices.Contains(features, f) }
