package command_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/command"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/instructions"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/schedule"
	"github.com/llmbot/llmbot/state"
)

// newCommand is /llmbot with the rows of the instructions and the schedules over one Memory.
func newCommand(t *testing.T) (*command.Command, *gatewaytest.Slack) {
	t.Helper()
	m, err := state.NewMemory("test-replica", "", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	slack := gatewaytest.NewSlack()
	key := state.DeriveKey("xoxb-test", "llmbot records v1")
	in := instructions.New(m.Records(), key, slack, instructions.Options{MaxLength: 200, Editors: []string{"U1", "U2"}})
	sc := schedule.NewSchedules(m.Records(), key, schedule.Limits{PerChannel: 5, PerPerson: 5})
	c, err := command.New(slack, zaptest.NewLogger(t), in.Command(), sc.Command([]string{"U1"}))
	if err != nil {
		t.Fatal(err)
	}
	return c, slack
}

func request(user, text string) *route.Request {
	return &route.Request{Kind: route.Command, Name: command.Name, Channel: "C1", Team: "T1", User: user, Text: text, ResponseURL: "https://hooks.slack.test/r/" + user}
}

// TestAck: help and unknown subcommands are answered in the ack and do not run.
func TestAck(t *testing.T) {
	c, _ := newCommand(t)
	for _, tc := range []struct{ text, wantIn string }{
		{"", "/llmbot instructions set <text>"},
		{"help", "/llmbot schedule add every weekday"},
		{"  HELP  ", "/llmbot help"},
		{"frobnicate now", "I don't know `/llmbot frobnicate`"},
		{"`x`", "I don't know `/llmbot 'x'`"},
	} {
		d := c.Accept(request("U1", tc.text))
		if d.Run || !strings.Contains(d.Say, tc.wantIn) {
			t.Errorf("Accept(%q) = %+v, want no run and a say holding %q", tc.text, d, tc.wantIn)
		}
	}
}

// TestConversation: a sequence of subcommands, each answered privately through its response_url.
func TestConversation(t *testing.T) {
	c, slack := newCommand(t)
	steps := []struct{ user, text, wantIn string }{
		{"U1", "instructions", "no instructions"},
		{"U3", "instructions set be brief", "Only the people the operator named"},
		{"U1", "instructions set", "Write the instructions after `set`"},
		{"U1", "instructions set Link the runbook <https://runbook>.", "Saved; the channel was told."},
		{"U3", "instructions show", "set by <@U1>"},
		{"U3", "instructions show", "> Link the runbook &lt;https://runbook&gt;."},
		{"U2", "instructions clear", "Cleared"},
		{"U3", "instructions", "no instructions"},
		{"U3", "instructions shout", "Use `/llmbot instructions show`"},
		{"U3", "schedule", "no scheduled prompts"},
		{"U3", "schedule add every weekday at 9:00 Europe/Berlin", "a `|`"},
		{"U3", "schedule add every someday at 9:00 | hi", `"someday" is no day`},
		{"U3", "schedule add every weekday at 9:00 Europe/Berlin | what changed yesterday? <!here>", "Scheduled `"},
		{"U3", "schedule list", "every weekday at 09:00 Europe/Berlin, by <@U3>, next <!date^"},
		{"U3", "schedule list", "what changed yesterday? &lt;\u2060!here&gt;"},
		{"U3", "schedule delete nope", "no scheduled prompt"},
		{"U3", "schedule frob", "Use `/llmbot schedule add"},
	}
	for i, s := range steps {
		req := request(s.user, s.text)
		if d := c.Accept(req); !d.Run || !d.Now {
			t.Fatalf("step %d: Accept(%q) = %+v, want it run at once", i, s.text, d)
		}
		if err := c.Run(t.Context(), req); err != nil {
			t.Fatalf("step %d: Run(%q): %v", i, s.text, err)
		}
		got := slack.CallsOf("respond")
		if last := got[len(got)-1]; last.Thread != req.ResponseURL || !strings.Contains(last.Text, s.wantIn) {
			t.Fatalf("step %d: %q answered %q at %s, want %q at %s", i, s.text, last.Text, last.Thread, s.wantIn, req.ResponseURL)
		}
	}
	if got := len(slack.CallsOf("post")); got != 2 {
		t.Errorf("announcements in the channel = %d, want 2 (set, clear)", got)
	}
}

// TestScheduleDelete: its creator or a named editor deletes a schedule; anyone else is told who may.
func TestScheduleDelete(t *testing.T) {
	c, slack := newCommand(t)
	say := func(user, text string) string {
		t.Helper()
		if err := c.Run(t.Context(), request(user, text)); err != nil {
			t.Fatal(err)
		}
		got := slack.CallsOf("respond")
		return got[len(got)-1].Text
	}
	id := func(added string) string {
		_, rest, _ := strings.Cut(added, "`")
		id, _, _ := strings.Cut(rest, "`")
		return id
	}
	a := id(say("U3", "schedule add every monday at 17:30 | one"))
	b := id(say("U3", "schedule add every friday at 16:00 | two"))
	for _, s := range []struct{ user, id, wantIn string }{
		{"U4", a, "Only <@U3>"},
		{"U3", a, "Deleted `" + a + "`"},
		{"U1", b, "Deleted `" + b + "`"},
		{"U3", b, "no scheduled prompt"},
	} {
		if got := say(s.user, "schedule delete "+s.id); !strings.Contains(got, s.wantIn) {
			t.Errorf("delete %s by %s = %q, want %q", s.id, s.user, got, s.wantIn)
		}
	}
}

// TestNewRefusesBadRows: a row without a name or Run, or named twice (help included), stops the wiring.
func TestNewRefusesBadRows(t *testing.T) {
	ok := func(context.Context, command.Call) (string, error) { return "", nil }
	for _, rows := range [][]command.Sub{
		{{Name: "", Run: ok}},
		{{Name: "two words", Run: ok}},
		{{Name: "x"}},
		{{Name: "help", Run: ok}},
		{{Name: "x", Run: ok}, {Name: "x", Run: ok}},
	} {
		if _, err := command.New(gatewaytest.NewSlack(), zap.NewNop(), rows...); !errors.Is(err, command.ErrBadSub) {
			t.Errorf("New(%d rows) = %v, want ErrBadSub", len(rows), err)
		}
	}
}
