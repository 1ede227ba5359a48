package bot

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/ask"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// recorder is a route that records the requests dispatched to it, as the loop hands them over.
type recorder struct {
	mu   sync.Mutex
	reqs []route.Request
}

func (r *recorder) handler() route.Handler {
	return route.Funcs{AcceptFunc: func(req *route.Request) route.Decision {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reqs = append(r.reqs, *req)
		return route.Decision{}
	}}
}

func (r *recorder) got() []route.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// signedWith is payload as a replica would push it, signed with key.
func signedWith(key []byte, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return append(hex.AppendEncode(nil, m.Sum(nil)), payload...)
}

// withField is h's JSON with one more field.
func withField(t *testing.T, h handover, name, value string) string {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m[name] = value
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustSeal(t *testing.T, key []byte, h handover) []byte {
	t.Helper()
	b, err := seal(key, h)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInboxDispatchesOnlySignedHandovers: whatever is pushed onto a replica's inbox is refused unless
// it is a hand-over (a click on one of the bot's answers, Slack's Stop on an agent session) signed
// with the bot's inbox key, for this replica, sent within the last minute, made of ids alone, and
// not had before.
// Forged pushes go first; the real hand-over behind them is dispatched, and nothing else is.
func TestInboxDispatchesOnlySignedHandovers(t *testing.T) {
	const self = "r1"
	key := InboxKey("xoxb-test")
	now := time.Now()
	approval := handover{Action: approvals.ActionToolAllowOnce, Team: "T1", Channel: "C1", User: "U1",
		ThreadTS: "1700000000.000100", MessageTS: "1700000000.000300", RefThreadTS: "1700000000.000100",
		RefTS: "1700000000.000200", Call: "0123456789abcdef", Asker: "U1", From: "r2", To: self,
		Sent: now.UnixMilli()}
	stale := approval
	stale.Sent = now.Add(-2 * time.Minute).UnixMilli()
	elsewhere := approval
	elsewhere.To = "r3"
	command := approval
	command.Action = "/summarize"
	mentions := approval
	mentions.Channel = "C1 <!channel>"
	tampered := mustSeal(t, key, approval)
	tampered = append(tampered[:macLen], []byte(withField(t, approval, "user", "U2"))...)
	session := handover{Action: route.EventSessionStopped, Team: "T1", Channel: "C1", User: "U1",
		ThreadTS: "1700000000.000100", From: "r2", To: self, Sent: now.UnixMilli()}

	forged := []struct {
		name string
		msg  []byte
	}{
		{"a request as the inbox took any before, unsigned",
			[]byte(`{"kind":"command","name":"/summarize","Channel":"C1","User":"U1","Team":"T1","response_url":"https://hooks.slack.com/commands/x","from":"r2"}`)},
		{"a hand-over signed with another key", mustSeal(t, InboxKey("xoxb-another-bot"), approval)},
		{"a hand-over whose clicking user was changed after signing", tampered},
		{"a slash command, signed", signedWith(key, mustJSON(t, command))},
		{"a hand-over with a response_url, signed", signedWith(key, withField(t, approval, "response_url", "https://hooks.slack.com/actions/x"))},
		{"a hand-over with text, signed", signedWith(key, withField(t, approval, "text", "summarize #private"))},
		{"a hand-over sent two minutes ago (replayed)", mustSeal(t, key, stale)},
		{"a hand-over for another replica", mustSeal(t, key, elsewhere)},
		{"a hand-over whose channel is no Slack id", signedWith(key, mustJSON(t, mentions))},
		{"empty", nil},
	}

	log := zaptest.NewLogger(t)
	mem, err := state.NewMemory(self, "", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	rec := &recorder{}
	fs := newFakeSlack(t, fakeslack.Config{})
	startBot(t, fs, &fakeReplier{}, nil, Options{Replicas: memoryReplicas(mem), InboxKey: key},
		route.Route{Kind: route.Command, Name: "/summarize", Handler: rec.handler()},
		route.Route{Kind: route.Action, Name: approvals.ActionToolAllowOnce, Handler: rec.handler()},
		route.Route{Kind: route.Event, Name: route.EventSessionStopped, Handler: rec.handler()})

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, f := range forged {
		if err := mem.Inbox().Send(ctx, self, f.msg); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
	}
	for _, h := range []handover{approval, approval, session} { // the second approval: a copy, refused
		if err := mem.Inbox().Send(ctx, self, mustSeal(t, key, h)); err != nil {
			t.Fatal(err)
		}
	}
	// The loop dispatches in the order pushed: once the two real ones are in, every forged one has been
	// read. The comparison below says what was dispatched if they never come.
	for deadline := time.Now().Add(waitTimeout); len(rec.got()) < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}

	want := []route.Request{
		{Kind: route.Action, Name: approvals.ActionToolAllowOnce, Feature: approvals.ActionToolAllowOnce, Channel: "C1",
			User: "U1", Team: "T1", ThreadTS: approval.ThreadTS, MessageTS: approval.MessageTS, From: "r2",
			Text: approvals.ApprovalRef{ThreadTS: approval.RefThreadTS, TS: approval.RefTS, ID: approval.Call, Asker: "U1"}.Value()},
		{Kind: route.Event, Name: route.EventSessionStopped, Feature: route.EventSessionStopped, Channel: "C1",
			User: "U1", Team: "T1", ThreadTS: session.ThreadTS, From: "r2"},
	}
	got := rec.got()
	if len(got) != len(want) {
		t.Fatalf("dispatched %d requests, want only the %d real hand-overs: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Name != want[i].Name || got[i].Channel != want[i].Channel ||
			got[i].User != want[i].User || got[i].Team != want[i].Team || got[i].ThreadTS != want[i].ThreadTS ||
			got[i].MessageTS != want[i].MessageTS || got[i].Text != want[i].Text || got[i].From != want[i].From ||
			got[i].ResponseURL != "" {
			t.Errorf("dispatched %+v,\nwant %+v", got[i], want[i])
		}
	}
}

// TestHandoverOfRefusesWhatIsNotHandedOver: a replica hands over only clicks on an answer and
// Slack's Stop on an agent session; anything else, or a click whose value is none of the bot's,
// never reaches another replica's inbox. What it hands over rebuilds the request it came from.
func TestHandoverOfRefusesWhatIsNotHandedOver(t *testing.T) {
	stopRef := route.ReplyRef{ThreadTS: "1700000000.000100", TS: "1700000000.000200", Task: "summarize"}
	refused := []struct {
		name string
		req  route.Request
	}{
		{"a slash command", route.Request{Kind: route.Command, Name: "/summarize", Channel: "C1", User: "U1",
			ResponseURL: "https://hooks.slack.com/commands/x"}},
		{"a Regenerate click", route.Request{Kind: route.Action, Name: route.ActionRegenerate, Channel: "C1", User: "U1",
			Text: stopRef.Value()}},
		{"a message", route.Request{Kind: route.Message, Name: route.MessageRoute, Channel: "C1", User: "U1"}},
		{"a Stop whose value is none of the bot's", route.Request{Kind: route.Action, Name: route.ActionStop,
			Channel: "C1", User: "U1", Text: "stop everything"}},
		{"a session stop without a thread", route.Request{Kind: route.Event, Name: route.EventSessionStopped,
			Channel: "C1", User: "U1"}},
	}
	for _, c := range refused {
		if h, err := handoverOf(&c.req, "r1", "r2", time.Now()); err == nil {
			t.Errorf("%s: handed over as %+v", c.name, h)
		}
	}

	stop := route.Request{Kind: route.Action, Name: route.ActionStop, Channel: "C1", User: "U1", Team: "T1",
		ThreadTS: "1700000000.000100", MessageTS: "1700000000.000300", Text: stopRef.Value(),
		ResponseURL: "https://hooks.slack.com/actions/x", TriggerID: "trigger"}
	h, err := handoverOf(&stop, "r1", "r2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := h.request()
	ref, err := route.ParseReplyRef(got.Text)
	if err != nil || ref.ThreadTS != stopRef.ThreadTS || ref.TS != stopRef.TS || ref.Task != "" {
		t.Errorf("Stop's reference handed over as %q (%v), want its thread and ts only", got.Text, err)
	}
	if got.Kind != stop.Kind || got.Name != stop.Name || got.Channel != "C1" || got.User != "U1" || got.Team != "T1" ||
		got.ThreadTS != stop.ThreadTS || got.MessageTS != stop.MessageTS || got.From != "r1" ||
		got.ResponseURL != "" || got.TriggerID != "" {
		t.Errorf("Stop handed over as %+v", got)
	}
}

// TestHandoverKeepsAnApprovalsApprovers: a click on a prompt with approvers (ApprovalRef.Approvers)
// and Show approval are handed over as they were: the receiver lets an approver other than the
// asker decide. The private prompt's flag is not: it is replaced where the click arrived.
func TestHandoverKeepsAnApprovalsApprovers(t *testing.T) {
	ref := approvals.ApprovalRef{ThreadTS: "1700000000.000100", TS: "1700000000.000200", ID: "0123456789abcdef",
		Asker: "U1", Approvers: true, Private: true}
	for _, action := range []string{approvals.ActionToolAllowOnce, approvals.ActionToolShowApproval} {
		req := route.Request{Kind: route.Action, Name: action, Channel: "C1", User: "U7", Team: "T1",
			ThreadTS: "1700000000.000100", MessageTS: "1700000000.000300", Text: ref.Value()}
		h, err := handoverOf(&req, "r1", "r2", time.Now())
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		got, err := approvals.ParseApprovalRef(h.request().Text)
		want := ref
		want.Private = false
		if err != nil || got != want {
			t.Errorf("%s handed over as %+v (%v), want %+v", action, got, err, want)
		}
	}
}

// TestHandoverOfQuestionAnswers: an option's click and the "Other…" modal submitted are handed over
// with the question's reference and, for the modal alone, the typed answer, cut; the receiver
// rebuilds them. An answer on anything but the modal, or longer than a typed answer may be, is
// refused.
func TestHandoverOfQuestionAnswers(t *testing.T) {
	ref := ask.Ref{ThreadTS: "1700000000.000100", TS: "1700000000.000200", ID: "0123456789abcdef", Asker: "U1"}
	base := route.Request{Channel: "C1", User: "U1", Team: "T1", ThreadTS: "1700000000.000100",
		MessageTS: "1700000000.000300", Text: ref.Value()}
	option, modal := base, base
	option.Kind, option.Name = route.Action, ask.ActionOption(1)
	modal.Kind, modal.Name = route.View, ask.View
	modal.Values = map[string]string{ask.AnswerInput: strings.Repeat("x", ask.MaxAnswer+10)}
	for _, req := range []route.Request{option, modal} {
		h, err := handoverOf(&req, "r1", "r2", time.Now())
		if err != nil {
			t.Fatalf("%s: %v", req.Name, err)
		}
		got := h.request()
		if got.Kind != req.Kind || got.Name != req.Name || got.Text != ref.Value() || got.MessageTS != req.MessageTS {
			t.Errorf("%s handed over as %+v", req.Name, got)
		}
		if want := strings.Repeat("x", ask.MaxAnswer); req.Name == ask.View && got.Values[ask.AnswerInput] != want {
			t.Errorf("typed answer handed over as %d characters, want %d", len(got.Values[ask.AnswerInput]), ask.MaxAnswer)
		}
	}
	h, _ := handoverOf(&option, "r1", "r2", time.Now())
	h.Answer = "an order smuggled in"
	if err := h.valid(); err == nil {
		t.Error("an option's click carried text")
	}
	h, _ = handoverOf(&modal, "r1", "r2", time.Now())
	h.Answer += "more"
	if err := h.valid(); err == nil {
		t.Error("a typed answer longer than ask.MaxAnswer was accepted")
	}
	viewAsAction := modal
	viewAsAction.Kind = route.Action
	if _, err := handoverOf(&viewAsAction, "r1", "r2", time.Now()); err == nil {
		t.Error("the modal's callback id as an action was handed over")
	}
}
