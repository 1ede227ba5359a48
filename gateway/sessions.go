package gateway

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/route"
)

// SessionSetter is agents.sessions.setStatus (bot.SlackAssistant).
type SessionSetter interface {
	SetSessionStatus(ctx context.Context, channel, threadTS, status string) error
}

// The time limits of one session status call: the status is a courtesy that must not hold an
// answer up; at shutdown the closing writes have had the grace period, and the status gets a
// moment more.
const (
	sessionTimeout         = 3 * time.Second
	shutdownSessionTimeout = 500 * time.Millisecond
)

// Sessions move the agent session Slack keeps for a thread the bot streams in
// (agents.sessions.setStatus). Slack shows its own Stop on a session while it is "processing" and
// leaves moving it off that status to the app: a session left "processing" shows a spinner and a
// Stop that does nothing until Slack's own timeout (an hour). A refusal that says the app cannot
// have sessions (not declared as an agent, the event not subscribed, an older Slack) turns the
// calls off for a while, once logged.
type Sessions struct {
	api     SessionSetter
	w       *Writer
	refusal time.Duration
	refused Refused
}

// NewSessions returns Sessions calling api at its turn in w's Sessions budget, off for refusal
// after Slack refuses them.
func NewSessions(api SessionSetter, w *Writer, refusal time.Duration) *Sessions {
	return &Sessions{api: api, w: w, refusal: refusal}
}

// Set moves the session of channel's thread threadTS to status. "processing" is set only with a
// token at once (the stream itself shows Slack the answer is under way), and so is every status at
// shutdown (the grace period is for the answers' closing writes); moving off it otherwise waits
// for its turn.
func (s *Sessions) Set(ctx context.Context, log *zap.Logger, channel, threadTS, status string, shutdown bool) {
	if !s.refused.Allowed() {
		return
	}
	timeout := sessionTimeout
	if shutdown {
		timeout = shutdownSessionTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if (status == route.SessionProcessing || shutdown) && !s.w.TrySession() {
		return
	}
	if status != route.SessionProcessing && !shutdown {
		if err := s.w.SessionTurn().Wait(ctx); err != nil {
			log.Info("agent session status not set: no agents.sessions.setStatus turn in time", zap.String("status", status))
			return
		}
	}
	err := s.api.SetSessionStatus(ctx, channel, threadTS, status)
	switch ra, limited := RateLimited(err); {
	case err == nil:
		log.Debug("agent session status set", zap.String("status", status))
	case limited:
		s.w.SessionTurn().Throttled(ra)
		log.Info("agent session status rate limited", zap.String("status", status))
	case RefusesSessions(err):
		s.refused.Refuse(s.refusal)
		log.Warn("agent sessions refused: is the app declared as an agent (features.agent_view) and subscribed to agent_session_stopped?",
			zap.Error(err), zap.Duration("for", s.refusal))
	default:
		log.Info("agent session status not set", zap.String("status", status), zap.Error(err))
	}
}
