package approvals

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/state"
	"github.com/llmbot/llmbot/toolinfo"
)

// openAnswers are the journal's open answers, by id.
type openAnswers map[string]bool

func (o openAnswers) Get(_ context.Context, id string) (state.Answer, bool, error) {
	return state.Answer{ID: id}, o[id], nil
}

// TestPendingApprovalLapsesOnceItsAnswerIsClosed: a pending approval whose answer is still open
// (another replica waits for it) is left alone; once the answer is closed (the orphans' closer,
// after a restart) its line is rewritten as lapsed, without buttons, and the record removed. A
// record this bot did not seal is never acted on.
func TestPendingApprovalLapsesOnceItsAnswerIsClosed(t *testing.T) {
	mem, err := state.NewMemory("test", "", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	slack := gatewaytest.NewSlack()
	lines := &gateway.Writer{Budgets: gateway.NewBudgets(600, pace.PolicyFair), Msgs: slack}
	answers := openAnswers{"C1/1700000000.000100": true}
	var lapsed int
	p := NewWith(nil, nil, zaptest.NewLogger(t), Options{Records: mem.Records(), Key: alwaysKey, Answers: answers, Lines: lines,
		Decided: func(v toolinfo.Verdict, _ bool) {
			if v == "lapsed" {
				lapsed++
			}
		}})
	line, err := slack.Post(t.Context(), "C1", "1700000000.000100", gateway.Msg{Text: "_Waiting for <@U1> to approve…_",
		Buttons: []gateway.Button{{ActionID: ActionToolShowApproval, Text: "Show approval", Value: "{}"}}})
	if err != nil {
		t.Fatal(err)
	}
	q := toolinfo.Approval{Channel: "C1", Thread: "1700000000.000100", TS: "1700000000.000100", Asker: "U1",
		Calls: lookupCalls(), Wait: time.Minute}
	p.remember(q, "a1", line, p.log)
	forger := NewWith(nil, nil, zaptest.NewLogger(t), Options{Records: mem.Records(), Key: []byte("guessed")})
	forger.remember(q, "f1", line, forger.log)

	p.sweep(t.Context())
	if m := slack.Msgs[len(slack.Msgs)-1]; strings.Contains(m.Text, "Lapsed") || lapsed != 0 {
		t.Fatalf("an approval whose answer is open lapsed: %q", m.Text)
	}
	delete(answers, "C1/1700000000.000100")
	p.sweep(t.Context())
	if m := slack.Msgs[len(slack.Msgs)-1]; strings.Contains(m.Text, "Lapsed") || lapsed != 0 {
		t.Fatalf("lapsed in the first sweep that found it so: %q", m.Text)
	}
	p.sweep(t.Context())
	m := slack.Msgs[len(slack.Msgs)-1]
	if !strings.Contains(m.Text, "Lapsed: `srv__lookup`") || len(m.Buttons) != 0 || lapsed != 1 {
		t.Errorf("line %q with %d buttons, %d lapsed", m.Text, len(m.Buttons), lapsed)
	}
	all, _ := mem.Records().List(t.Context(), collPending)
	if _, ok := all["a1"]; ok {
		t.Error("the lapsed approval's record is kept")
	}
	if _, ok := all["f1"]; !ok {
		t.Error("a record this bot did not seal was removed")
	}
	p.sweep(t.Context())
	if lapsed != 1 {
		t.Errorf("lapsed %d times, want once", lapsed)
	}
}
