package bot

import (
	"context"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/ask"
	"github.com/llmbot/llmbot/route"
)

// Asker delivers an answer to an ask_user question to the call waiting for it in this process, and
// rewrites a question nobody waits for any more (*ask.Ask).
type Asker interface {
	Answer(ref ask.Ref, user, name, typed string) ask.Delivered
	Lapsed(ctx context.Context, channel, ts string, ref ask.Ref)
}

// AskHandler serves the answers to ask_user's questions (an option's button, the "Other…" modal
// submitted) with a, as ApprovalHandler serves approvals: at once in Accept. Someone other than the
// asker is told privately; an answer to a question this replica is not waiting for is handed to the
// replica writing the answer; when none is (the answer ended, or the bot restarted), the person is
// told the question lapsed and the question is rewritten so.
func (b *Bot) AskHandler(a Asker) route.Handler {
	return route.Funcs{AcceptFunc: func(req *route.Request) route.Decision {
		log := b.log.With(zap.String("channel", req.Channel), zap.String("user", req.User), zap.String("action", req.Name))
		ref, err := ask.ParseRef(req.Text)
		if err != nil {
			log.Warn("answer to a question ignored", zap.Error(err))
			return route.Decision{}
		}
		switch a.Answer(ref, req.User, req.Name, req.Values[ask.AnswerInput]) {
		case ask.NotAsker:
			log.Info("answer refused: not the person who asked")
			return route.Decision{Say: ask.TextNotAsker}
		case ask.Empty:
			return route.Decision{Say: ask.TextEmpty}
		case ask.Refused:
			log.Warn("answer to a question ignored: none of its options")
			return route.Decision{}
		case ask.Unknown:
			b.held.later(func() {
				b.replicas.elsewhere(req, route.AnswerID(req.Channel, ref.TS), handoff{what: "answer to a question",
					failed: ask.TextFailed, ended: func() {
						b.notices.tell(req.Channel, req.User, req.ThreadTS, ask.TextLapsed, log)
						a.Lapsed(b.notices.closing, req.Channel, req.MessageTS, ref)
					}}, log)
			})
			return route.Decision{}
		}
		log.Info("question answered")
		return route.Decision{}
	}}
}
