package bot

import (
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/route"
)

// Approver delivers a click on a tool call's approval buttons to the call waiting for it in this
// process (*approvals.Approvals), and counts the clicks that came too late.
type Approver interface {
	Decide(ref approvals.ApprovalRef, user, action string) approvals.Decided
	Lapsed()
	// Chose replaces the private prompt clicked (its response_url) with the choice made.
	Chose(ref approvals.ApprovalRef, responseURL, action string)
	// Refusal is what the clicker is told of a click Decide refused.
	Refusal(ref approvals.ApprovalRef, d approvals.Decided) string
}

// ApprovalHandler serves the tool approval buttons (approvals.ActionToolAllowOnce, AllowThread,
// AllowAlways, Deny) with a: like Stop, at once in Accept (an approval never waits for a place).
// Someone who may not decide is told privately; a click on a call this replica is not waiting for
// is handed to the replica writing the answer, as a Stop is, and a click nobody waits for any more
// (the answer ended, or its replica restarted) is told that the request lapsed.
func (b *Bot) ApprovalHandler(a Approver) route.Handler {
	return route.Funcs{AcceptFunc: func(req *route.Request) route.Decision {
		log := b.log.With(zap.String("channel", req.Channel), zap.String("user", req.User), zap.String("action", req.Name))
		ref, err := approvals.ParseApprovalRef(req.Text)
		if err != nil {
			log.Warn("approval click ignored", zap.Error(err))
			return route.Decision{}
		}
		switch d := a.Decide(ref, req.User, req.Name); d {
		case approvals.DecidedHere:
			log.Info("tool approval decided", zap.String("verdict", approvals.VerdictOf(req.Name)))
			b.held.later(func() { a.Chose(ref, req.ResponseURL, req.Name) })
		case approvals.DecidedUnknown:
			b.held.later(func() {
				b.replicas.elsewhere(req, route.AnswerID(req.Channel, ref.TS), handoff{what: "tool approval",
					failed: approvals.TextApprovalFailed, handed: func() { a.Chose(ref, req.ResponseURL, req.Name) }, ended: func() {
						a.Lapsed()
						b.notices.tell(req.Channel, req.User, req.ThreadTS, approvals.TextApprovalOver, log)
					}}, log)
			})
		default:
			log.Info("approval refused: not someone who may decide", zap.Int("decided", int(d)))
			return route.Decision{Say: a.Refusal(ref, d)}
		}
		return route.Decision{}
	}}
}
