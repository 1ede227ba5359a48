package handlers

import (
	"context"
	"time"
)

// Pane is the agent pane as an answer uses it (pane.Pane): the title of a thread in the pane and
// the "is thinking…" status under the answer's thread.
type Pane interface {
	// On reports whether the app has the agent pane (it is declared as an agent).
	On() bool
	// Thinking titles the thread from its first question ("": not titled) and shows "is thinking…"
	// under it, reporting whether the status was set. Its failures are courtesies', never the answer's.
	Thinking(ctx context.Context, channel, threadTS, question string) bool
}

// inPane reports whether the answer is to a message in the agent pane: a DM message answered in
// its own thread (not a Regenerate, nor a task).
func (a *answer) inPane() bool {
	p := a.r.opt.Pane
	return p != nil && p.On() && a.req.InDM() && a.threadTS != "" && a.threadTS == a.req.TS &&
		!a.req.Regenerate && a.req.Task == ""
}

// pane titles the pane's thread from its question, and shows "is thinking…" under the answer's
// thread (Pane.Thinking), the answer's first sign of life: set at once, before the thread is read or
// the model asked. When it is shown, the placeholder may wait for it (thinkingSince).
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
