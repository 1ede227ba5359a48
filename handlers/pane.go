package handlers

import (
	"context"
	"time"
)

// Pane is the agent pane as an answer uses it (pane.Pane): a pane thread's title and the statuses
// under an answer's thread; its failures are courtesies', never the answer's.
type Pane interface {
	// On reports whether the app has the agent pane (it is declared as an agent).
	On() bool
	// Thinking titles the thread from question ("": not) and shows "is thinking…", reporting if it did.
	Thinking(ctx context.Context, channel, threadTS, question string) bool
	// ToolRunning shows that tool runs as the thread's status line, and returns what takes it down.
	ToolRunning(ctx context.Context, channel, threadTS, tool string) (done func())
}

// inPane: the answer is to a message in the agent pane, a DM message answered in its own thread (not a Regenerate, nor a task).
func (a *answer) inPane() bool {
	p := a.r.opt.Pane
	return p != nil && p.On() && a.req.InDM() && a.threadTS != "" && a.threadTS == a.req.TS &&
		!a.req.Regenerate && a.req.Task == ""
}

// pane titles the pane's thread from its question and shows "is thinking…" (Pane.Thinking), the answer's
// first sign of life, before the thread is read; when shown, the placeholder may wait (thinkingSince).
func (a *answer) pane(ctx context.Context) {
	p := a.r.opt.Pane
	if p == nil || a.threadTS == "" {
		return
	}
	question := ""
	if a.inPane() {
		question = a.req.Text
	}
	if p.Thinking(ctx, a.req.Channel, a.threadTS, question) {
		a.thinkingSince = time.Now()
	}
}
