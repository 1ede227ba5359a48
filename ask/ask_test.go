package ask

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/toolinfo"
)

type askTest struct {
	slack *gatewaytest.Slack
	ask   *Ask
	views *fakeViews

	mu       sync.Mutex
	outcomes []string
}

type fakeViews struct {
	mu     sync.Mutex
	opened []gateway.Modal
}

func (v *fakeViews) OpenModal(_ context.Context, _ string, m gateway.Modal) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.opened = append(v.opened, m)
	return nil
}

func newAskTest(t *testing.T) *askTest {
	at := &askTest{slack: gatewaytest.NewSlack(), views: &fakeViews{}}
	w := &gateway.Writer{Budgets: gateway.NewBudgets(0, pace.PolicyFair).WithDefaults(), Msgs: at.slack}
	at.ask = New(w, at.views, zaptest.NewLogger(t), Options{Counted: func(o string) {
		at.mu.Lock()
		at.outcomes = append(at.outcomes, o)
		at.mu.Unlock()
	}})
	return at
}

func (at *askTest) counted() []string {
	at.mu.Lock()
	defer at.mu.Unlock()
	return slices.Clone(at.outcomes)
}

var asked = toolinfo.Asked{Channel: "C1", Thread: "1.0", ThreadTS: "1.0", TS: "1.0", Asker: "U1"}

// call runs the tool with raw in the background; the question is posted when it returns.
func (at *askTest) call(ctx context.Context, raw string) (<-chan string, <-chan error, gatewaytest.Message, Ref) {
	out, errs := make(chan string, 1), make(chan error, 1)
	before := len(at.slack.CallsOf("post"))
	go func() {
		s, err := at.ask.Call(toolinfo.WithAsked(ctx, asked), json.RawMessage(raw))
		out <- s
		errs <- err
	}()
	for range 10 { // the post may wait for the channel's turn
		if synctest.Wait(); len(at.slack.CallsOf("post")) > before {
			break
		}
		time.Sleep(time.Second)
	}
	ms := at.slack.BotMessages("1.0")
	q := ms[len(ms)-1]
	ref, _ := ParseRef(q.Buttons[0].Value)
	return out, errs, q, ref
}

func actionsOf(m gatewaytest.Message) []string {
	var ids []string
	for _, b := range m.Buttons {
		ids = append(ids, b.ActionID)
	}
	return ids
}

// The asker chooses an option: the model gets it, the question says who answered what, without
// buttons; someone else's click changes nothing.
func TestAskOptionChosen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := newAskTest(t)
		out, errs, q, ref := at.call(t.Context(), `{"question":"Which <!channel> env?","options":["staging","prod *eu*"]}`)
		if !strings.Contains(q.Text, "<@U1>") || strings.Contains(q.Text, "<!channel>") || !strings.Contains(q.Text, "Which") {
			t.Errorf("question %q: want it to the asker, the model's words made safe", q.Text)
		}
		want := []string{ActionOption(0), ActionOption(1), ActionOther}
		if got := actionsOf(q); !slices.Equal(got, want) || q.Buttons[1].Text != "prod *eu*" {
			t.Fatalf("buttons %v (%+v), want %v", got, q.Buttons, want)
		}
		if got := at.ask.Answer(ref, "U2", ActionOption(0), ""); got != NotAsker {
			t.Errorf("another person's click: %v", got)
		}
		if got := at.ask.Answer(ref, "U1", ActionOption(4), ""); got != Refused {
			t.Errorf("an option the question does not have: %v", got)
		}
		if got := at.ask.Answer(ref, "U1", ActionOption(1), ""); got != DeliveredHere {
			t.Fatalf("the asker's click: %v", got)
		}
		if got, err := <-out, <-errs; err != nil || got != "The person who asked answered: prod *eu*" {
			t.Errorf("result %q, %v", got, err)
		}
		m := at.slack.BotMessages("1.0")[0]
		if !strings.Contains(m.Text, "<@U1> answered: prod *eu*") || len(m.Buttons) != 0 {
			t.Errorf("settled question %q with buttons %v", m.Text, actionsOf(m))
		}
		if got := at.ask.Answer(ref, "U1", ActionOption(0), ""); got != Unknown {
			t.Errorf("a click after the answer: %v, want Unknown", got)
		}
		if got := at.counted(); !slices.Equal(got, []string{OutcomeAsked, OutcomeAnswered}) {
			t.Errorf("counted %v", got)
		}
	})
}

// "Other…": the typed text (cut, controls stripped) is the answer; an empty one is not.
func TestAskTypedAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := newAskTest(t)
		out, _, q, ref := at.call(t.Context(), `{"question":"Which env?"}`)
		if got := actionsOf(q); !slices.Equal(got, []string{ActionOther}) {
			t.Fatalf("buttons %v: want Other… alone", got)
		}
		if got := at.ask.Answer(ref, "U1", View, "  \n "); got != Empty {
			t.Errorf("empty modal: %v", got)
		}
		if got := at.ask.Answer(ref, "U1", View, strings.Repeat("é", MaxAnswer+50)); got != DeliveredHere {
			t.Fatalf("typed: %v", got)
		}
		if got := <-out; got != "The person who asked answered: "+strings.Repeat("é", MaxAnswer) {
			t.Errorf("result of %d bytes, want the answer cut to %d characters", len(got), MaxAnswer)
		}
	})
}

// No answer in time (the call's deadline): the model is told, the question says so; Stop (a
// cancellation) ends the call with its cause.
func TestAskTimeoutAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := newAskTest(t)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, errs, _, _ := at.call(ctx, `{"question":"Which env?","options":["a"]}`)
		if got, err := <-out, <-errs; err != nil || !strings.Contains(got, "did not answer in time") {
			t.Errorf("result %q, %v", got, err)
		}
		if m := at.slack.BotMessages("1.0")[0]; !strings.Contains(m.Text, "No answer in time") || len(m.Buttons) != 0 {
			t.Errorf("question after the timeout %q", m.Text)
		}

		stopped := errors.New("stopped")
		sctx, stop := context.WithCancelCause(t.Context())
		out, errs, _, _ = at.call(sctx, `{"question":"And now?"}`)
		stop(stopped)
		if got, err := <-out, <-errs; !errors.Is(err, stopped) || got != "" {
			t.Errorf("stopped: %q, %v", got, err)
		}
		if got := at.counted(); !slices.Equal(got, []string{OutcomeAsked, OutcomeTimeout, OutcomeAsked, OutcomeCancelled}) {
			t.Errorf("counted %v", got)
		}
	})
}

// The model's bad arguments are refused before anything is posted; without an asker in the
// context there is nobody to ask.
func TestAskInvalidArguments(t *testing.T) {
	at := newAskTest(t)
	for _, raw := range []string{`not json`, `{"question":""}`, `{"question":"` + strings.Repeat("x", maxQuestion+1) + `"}`,
		`{"question":"q","options":["a","b","c","d","e","f"]}`, `{"question":"q","options":["a"," "]}`,
		`{"question":"q","options":["` + strings.Repeat("o", maxOption+1) + `"]}`, `{"question":"q","options":["a","a "]}`,
		`{"question":"q","options":"a"}`} {
		if _, err := at.ask.Call(toolinfo.WithAsked(t.Context(), asked), json.RawMessage(raw)); !errors.Is(err, errInvalid) {
			t.Errorf("%s: err %v, want invalid", raw, err)
		}
	}
	if _, err := at.ask.Call(t.Context(), json.RawMessage(`{"question":"q"}`)); err == nil {
		t.Error("a call without an asker asked somebody")
	}
	if n := len(at.slack.CallsOf("post")); n != 0 {
		t.Errorf("%d posts for bad calls", n)
	}
	if in := at.ask.Info(); in.Name != Name || !in.AsksAsker || !json.Valid(in.Parameters) {
		t.Errorf("Info %+v", in)
	}
}

// "Other…" opens the modal for the asker only, carrying the question's place and reference.
func TestAskOtherOpensModal(t *testing.T) {
	at := newAskTest(t)
	h := at.ask.OtherHandler()
	ref := Ref{ThreadTS: "1.0", TS: "1.0", ID: "ab12", Asker: "U1"}
	req := &route.Request{Kind: route.Action, Name: ActionOther, Channel: "C1", User: "U2", ThreadTS: "1.0",
		MessageTS: "1.5", Text: ref.Value(), TriggerID: "T1"}
	if d := h.Accept(req); d.Run || d.Say != TextNotAsker {
		t.Errorf("another person: %+v", d)
	}
	req.User = "U1"
	if d := h.Accept(req); !d.Run || !d.Now {
		t.Fatalf("the asker: %+v", d)
	}
	if err := h.Run(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	m := at.views.opened[0]
	place, ok := route.ParseViewPlace(m.Metadata)
	if m.CallbackID != View || m.InputActionID != AnswerInput || !ok || place.MessageTS != "1.5" || place.Text != ref.Value() {
		t.Errorf("modal %+v (place %+v)", m, place)
	}
}

// A lapsed question is rewritten so, without its buttons; one this process settled keeps its
// outcome.
func TestAskLapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := newAskTest(t)
		ts, _ := at.slack.Post(t.Context(), "C1", "1.0", gateway.Msg{Text: "q", Buttons: []gateway.Button{{ActionID: ActionOther}}})
		at.ask.Lapsed(t.Context(), "C1", ts, Ref{TS: "1.0", ID: "feed", Asker: "U1"})
		if m := at.slack.BotMessages("1.0")[0]; m.Text != textLapsed || len(m.Buttons) != 0 {
			t.Errorf("lapsed question %q %v", m.Text, actionsOf(m))
		}

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, _, q, ref := at.call(ctx, `{"question":"Which env?"}`)
		<-out // timed out
		at.ask.Lapsed(t.Context(), "C1", q.TS, ref)
		if ms := at.slack.BotMessages("1.0"); !strings.Contains(ms[len(ms)-1].Text, "No answer in time") {
			t.Errorf("a settled question rewritten as lapsed: %q", ms[len(ms)-1].Text)
		}
	})
}

func TestAnswersNames(t *testing.T) {
	for _, name := range []string{ActionOption(0), ActionOption(MaxOptions - 1), View} {
		if !Answers(name) {
			t.Errorf("Answers(%q) = false", name)
		}
	}
	for _, name := range []string{ActionOther, actionOptionPrefix + "0", actionOptionPrefix + "6", "llmbot_stop"} {
		if Answers(name) {
			t.Errorf("Answers(%q) = true", name)
		}
	}
	if got := Actions(); len(got) != MaxOptions || got[0] != "llmbot_ask_option_1" {
		t.Errorf("Actions %v", got)
	}
}

// A click while the answered question is being rewritten is not taken and dropped without a word:
// nothing waits for it any more (Unknown, so the clicker is told it lapsed), and the question is
// not rewritten as lapsed over its outcome.
func TestAskClickWhileSettling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := newAskTest(t)
		release := make(chan struct{})
		at.slack.UpdateErr = func(int, gatewaytest.Call) error {
			<-release // a slow rewrite
			return nil
		}
		out, _, q, ref := at.call(t.Context(), `{"question":"Which env?","options":["a","b"]}`)
		if got := at.ask.Answer(ref, "U1", ActionOption(0), ""); got != DeliveredHere {
			t.Fatalf("the asker's click: %v", got)
		}
		synctest.Wait() // the rewrite has started
		if got := at.ask.Answer(ref, "U1", ActionOption(1), ""); got != Unknown {
			t.Errorf("a click while the question is rewritten: %v, want Unknown", got)
		}
		if got := at.ask.Answer(ref, "U1", View, "typed"); got != Unknown {
			t.Errorf("Other… submitted while the question is rewritten: %v, want Unknown", got)
		}
		close(release)
		if got := <-out; got != "The person who asked answered: a" {
			t.Errorf("result %q", got)
		}
		at.slack.UpdateErr = nil
		at.ask.Lapsed(t.Context(), "C1", q.TS, ref)
		if m := at.slack.BotMessages("1.0")[0]; !strings.Contains(m.Text, "answered: a") {
			t.Errorf("the outcome overwritten: %q", m.Text)
		}
	})
}

// Who may answer is the asker the question was asked of, not the one the button's value names: a
// value forged to name the clicker decides nothing.
func TestAskForgedAskerRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := newAskTest(t)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, _, _, ref := at.call(ctx, `{"question":"Which env?","options":["a"]}`)
		forged := ref
		forged.Asker = "U2"
		if got := at.ask.Answer(forged, "U2", ActionOption(0), ""); got != NotAsker {
			t.Errorf("a forged asker's click: %v, want NotAsker", got)
		}
		if got := <-out; !strings.Contains(got, "did not answer in time") {
			t.Errorf("result %q: the forged click decided", got)
		}
	})
}

// sharedMarks are the replicas' marks, shared by two Asks as by two replicas.
type sharedMarks struct {
	mu sync.Mutex
	m  map[string]bool
}

func (s *sharedMarks) Mark(_ context.Context, key string, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = true
	return nil
}

func (s *sharedMarks) Marked(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key], nil
}

// A late click on a question another replica settled, handled by a replica that did not settle it
// (the answer has ended), leaves the outcome shown; one nobody settled is rewritten as lapsed.
func TestAskLapsedLeavesAnotherReplicasOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		marks := &sharedMarks{m: map[string]bool{}}
		at := newAskTest(t)
		at.ask.opt.Settled = marks
		other := New(at.ask.w, nil, zaptest.NewLogger(t), Options{Settled: marks})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		out, _, q, ref := at.call(ctx, `{"question":"Which env?"}`)
		<-out // timed out, settled here
		other.Lapsed(t.Context(), "C1", q.TS, ref)
		if ms := at.slack.BotMessages("1.0"); !strings.Contains(ms[len(ms)-1].Text, "No answer in time") {
			t.Errorf("settled on one replica, rewritten as lapsed by another: %q", ms[len(ms)-1].Text)
		}
		ts, _ := at.slack.Post(t.Context(), "C1", "1.0", gateway.Msg{Text: "q", Buttons: []gateway.Button{{ActionID: ActionOther}}})
		other.Lapsed(t.Context(), "C1", ts, Ref{TS: "1.0", ID: "feed", Asker: "U1"})
		if ms := at.slack.BotMessages("1.0"); ms[len(ms)-1].Text != textLapsed {
			t.Errorf("a question nobody settled: %q, want it lapsed", ms[len(ms)-1].Text)
		}
	})
}
