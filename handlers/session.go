package handlers

import (
	"context"
	"errors"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
)

// Sessions is agents.sessions.setStatus (bot.SlackAssistant), which gateway.Sessions calls under
// its budget for the answers streamed natively.
type Sessions = gateway.SessionSetter

// session moves the agent session of the answer's thread to status, when the answer is streamed
// natively (where Slack keeps a session; an answer written by editing shows our own Stop button).
func (a *answer) session(ctx context.Context, mode ReplyMode, status string) {
	if a.r.sessions == nil || mode != ModeStream || a.threadTS == "" {
		return
	}
	a.r.sessions.Set(ctx, a.log, a.req.Channel, a.threadTS, status, errors.Is(context.Cause(ctx), ErrShutdown))
}

// endStatus is the session status an answer leaves its thread in once closed with cause (the
// answer's context's cause, nil when it was not cancelled).
func endStatus(cause error) string {
	if errors.Is(cause, ErrShutdown) {
		return route.SessionClosed
	}
	return route.SessionActive
}
