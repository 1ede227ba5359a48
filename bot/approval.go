package bot

import (
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/route"
)

// Approver delivers a click on a tool call's approval buttons to the call waiting for it in this
// process (*approvals.Approvals).
type Approver interface {
	Decide(ref approvals.ApprovalRef, user, action string) approvals.Decided
}

// ApprovalHandler serves the tool approval buttons (approvals.ActionToolAllowOnce, AllowThread,
// Deny) with a: like Stop, at once in Accept (an approval never waits for a place). Someone other
// than the asker is told privately; a click on a call this replica is not waiting for is handed to
// the replica writing the answer, as a Stop is.
func (b *Bot) ApprovalHandler(a Approver) route.Handler {
	return route.Funcs{AcceptFunc: func(req *route.Request) route.Decision {
		log := b.log.With(zap.String("channel", req.Channel), zap.String("user", req.User), zap.String("action", req.Name))
		ref, err := approvals.ParseApprovalRef(req.Text)
		if err != nil {
			log.Warn("approval click ignored", zap.Error(err))
			return route.Decision{}
		}
		switch a.Decide(ref, req.User, req.Name) {
		case approvals.DecidedNotAsker:
			log.Info("approval refused: not the person who asked")
			return route.Decision{Say: approvals.TextNotAskerApproval}
		case approvals.DecidedUnknown:
			b.later(func() {
				b.replicas.elsewhere(req, route.AnswerID(req.Channel, ref.TS), handoff{what: "tool approval",
					failed: approvals.TextApprovalFailed, ended: func() {
						b.notices.tell(req.Channel, req.User, req.ThreadTS, approvals.TextApprovalOver, log)
					}}, log)
			})
			return route.Decision{}
		}
		log.Info("tool approval decided", zap.String("verdict", approvals.VerdictOf(req.Name)))
		return route.Decision{}
	}}
}
