package handlers

import (
	"context"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/toolinfo"
)

// Approver asks who may approve an answer's tool calls whether they may be made, and keeps the
// standing grants (Allow for this thread, Always allow) its verdicts give (*approvals.Approvals).
type Approver interface {
	// Approve shows q's prompt through w (the answer's paced writer) and waits for the verdict.
	Approve(ctx context.Context, w *gateway.Writer, q toolinfo.Approval) toolinfo.Verdict
	// ThreadAllowed reports whether user allowed tool for the whole thread (or always).
	ThreadAllowed(channel, threadTS, user, tool string) bool
}

// approval is the question about the calls in ask; foreign is what the context holds besides the
// asker's words ("" when nothing).
func (a *answer) approval(ask []*toolCall, foreign string) toolinfo.Approval {
	calls := make([]toolinfo.Call, len(ask))
	for i, c := range ask {
		calls[i] = toolinfo.Call{Info: c.info, Args: c.args}
	}
	return toolinfo.Approval{Channel: a.req.Channel, Thread: a.threadTS, ThreadTS: a.req.ThreadTS, TS: a.req.TS,
		Asker: a.req.User, Calls: calls, Foreign: foreign, Wait: a.r.opt.Tools.ApprovalTimeout, Settle: a.r.opt.FinalTimeout}
}

// asked is who asked for the answer, and where: the context of its tool calls carries it, so that a
// built-in tool acts for that person in that thread.
func (a *answerBase) asked() toolinfo.Asked {
	return toolinfo.Asked{Channel: a.req.Channel, Thread: a.threadTS, ThreadTS: a.req.ThreadTS, TS: a.req.TS,
		Asker: a.req.User, Team: a.req.Team, ActionToken: a.req.ActionToken}
}

// approve asks the asker about the calls in ask through the Approver (roundHost).
func (a *answer) approve(ctx context.Context, ask []*toolCall, foreign string) toolinfo.Verdict {
	return a.r.approvals.Approve(ctx, a.r.paced, a.approval(ask, foreign))
}

// noApprovals is a Replies' Approver when none is given: nobody is asked, so a call that needs a
// click is denied.
type noApprovals struct{}

func (noApprovals) Approve(context.Context, *gateway.Writer, toolinfo.Approval) toolinfo.Verdict {
	return toolinfo.Denied
}
func (noApprovals) ThreadAllowed(channel, threadTS, user, tool string) bool { return false }
