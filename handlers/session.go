package handlers

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
)

// Sessions move the agent session Slack keeps for a thread the bot streams in
// (agents.sessions.setStatus). Slack shows its own Stop on a session while it is "processing"
// and leaves moving it off that status to the app: a session left "processing" shows a spinner and
// a Stop that does nothing until Slack's own timeout (an hour).
type Sessions interface {
	SetSessionStatus(ctx context.Context, channel, threadTS, status string) error
}

// sessionTimeout bounds one session status call: the status is a courtesy that must not hold an
// answer up.
// At shutdown the closing writes have had the grace period: the status gets a moment more.
const (
	sessionTimeout         = 3 * time.Second
	shutdownSessionTimeout = 500 * time.Millisecond
)

// session moves the agent session of the answer's thread to status, when the answer is streamed
// natively (where Slack keeps a session; an answer written by editing shows our own Stop button).
// A refusal that says the app cannot have sessions (not declared as an agent, the event not
// subscribed, an older Slack) turns the calls off for StreamRefusal, once logged.
func (a *answer) session(ctx context.Context, mode ReplyMode, status string) {
	r := a.r
	if r.opt.Sessions == nil || mode != ModeStream || a.threadTS == "" || !r.sessions.Allowed() {
		return
	}
	timeout, shutdown := sessionTimeout, errors.Is(context.Cause(ctx), ErrShutdown)
	if shutdown {
		timeout = shutdownSessionTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if (status == route.SessionProcessing || shutdown) && !r.paced.TrySession() {
		// Processing: the stream itself has Slack show the answer is under way. At shutdown the
		// grace period is for the answers' closing writes.
		return
	}
	if status != route.SessionProcessing && !shutdown {
		if err := r.paced.SessionTurn().Wait(ctx); err != nil {
			a.log.Info("agent session status not set: no agents.sessions.setStatus turn in time", zap.String("status", status))
			return
		}
	}
	err := r.opt.Sessions.SetSessionStatus(ctx, a.req.Channel, a.threadTS, status)
	switch ra, limited := gateway.RateLimited(err); {
	case err == nil:
		a.log.Debug("agent session status set", zap.String("status", status))
	case limited:
		r.paced.SessionTurn().Throttled(ra)
		a.log.Info("agent session status rate limited", zap.String("status", status))
	case gateway.RefusesSessions(err):
		r.sessions.Refuse(r.opt.StreamRefusal)
		a.log.Warn("agent sessions refused: is the app declared as an agent (features.agent_view) and subscribed to agent_session_stopped?",
			zap.Error(err), zap.Duration("for", r.opt.StreamRefusal))
	default:
		a.log.Info("agent session status not set", zap.String("status", status), zap.Error(err))
	}
}

// endStatus is the session status an answer leaves its thread in once closed with cause (the
// answer's context's cause, nil when it was not cancelled).
func endStatus(cause error) string {
	if errors.Is(cause, ErrShutdown) {
		return route.SessionClosed
	}
	return route.SessionActive
}
