package ask

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
)

// The "Other…" modal.
const (
	modalTitle   = "Your answer"
	modalText    = "Type your answer to the bot's question. It goes to the bot as your reply, and is shown under the question."
	modalLabel   = "Answer"
	modalSubmit  = "Send"
	modalTimeout = 5 * time.Second
)

// OtherHandler serves ActionOther: the asker's click opens the modal where they type their answer
// (with the click's trigger, which Slack honours for 3 seconds, so at once and on the replica the
// click reached); anyone else is told privately that only the asker may answer. The modal's
// submission (View) is routed like a click on the question: it carries the question's place and
// reference (route.ViewPlace).
func (a *Ask) OtherHandler() route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			ref, err := ParseRef(req.Text)
			switch {
			case err != nil:
				a.log.Warn("question click ignored", zap.Error(err))
				return route.Decision{}
			case req.User != ref.Asker:
				return route.Decision{Say: TextNotAsker}
			case req.TriggerID == "" || a.views == nil:
				return route.Decision{}
			}
			return route.Decision{Run: true, Now: true}
		},
		RunFunc: func(ctx context.Context, req *route.Request) error {
			ref, err := ParseRef(req.Text)
			if err != nil {
				return nil // Accept ran nothing for it
			}
			ctx, cancel := context.WithTimeout(ctx, modalTimeout)
			defer cancel()
			where := route.ViewPlace{Channel: req.Channel, ThreadTS: req.ThreadTS, MessageTS: req.MessageTS, Text: ref.Value()}
			err = a.views.OpenModal(ctx, req.TriggerID, gateway.Modal{CallbackID: View, Title: modalTitle, Text: modalText,
				Submit: modalSubmit, InputLabel: modalLabel, InputActionID: AnswerInput, Metadata: where.Metadata()})
			if err != nil {
				return fmt.Errorf("question's modal: views.open: %w", err)
			}
			return nil
		},
	}
}
