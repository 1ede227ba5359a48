package main

// End-to-end tests of ask_user: the fake model calls it, the fake Slack's person answers (an
// option, Other… through the modal, nothing), and the next model request carries the answer.

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/ask"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/route"
)

func askCall() fakellm.ToolCall {
	return fakellm.ToolCall{ID: "q1", Name: ask.Name, Arguments: `{"question":"Which office do you mean?","options":["Oslo","Lima"]}`}
}

// question waits for ask_user's question in the thread of q.
func question(t *testing.T, msgs func() []fakeslack.Message, wait func(string, func() bool)) fakeslack.Message {
	t.Helper()
	var p fakeslack.Message
	wait("the question", func() bool {
		for _, m := range msgs() {
			if strings.Contains(buttonsOf(m), ask.ActionOther) {
				p = m
				return true
			}
		}
		return false
	})
	return p
}

func (e *e2e) question(t *testing.T, q string) fakeslack.Message {
	t.Helper()
	return question(t, func() []fakeslack.Message { return e.slack.BotReplies("C1", q) },
		func(what string, cond func() bool) { e.waitFor(t, what, cond) })
}

// lastToolResult is the last tool message the model was sent.
func (e *e2e) lastToolResult(t *testing.T) string {
	t.Helper()
	reqs := e.llm.ChatRequests()
	msgs := reqs[len(reqs)-1].Messages
	if last := msgs[len(msgs)-1]; last.Role == "tool" {
		return last.Content
	}
	t.Fatalf("the last model request ends with no tool result: %+v", msgs[len(msgs)-1])
	return ""
}

// TestE2EAskUserOption: in a channel with tools, the model is offered ask_user beside them; its
// question shows a button per option and Other…; another person's click is refused privately; the
// asker's choice goes to the model as the tool's result, fenced as data, and the question says who
// answered what. No approval is asked.
func TestE2EAskUserOption(t *testing.T) {
	t.Parallel()
	e := startToolsE2E(t, nil)
	e.llm.SetChat(toolModel(1, fakellm.WireOpenAI, askCall()))
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what are the office hours?")
	p := e.question(t, q)
	if want := ask.ActionOption(0) + "," + ask.ActionOption(1) + "," + ask.ActionOther; buttonsOf(p) != want {
		t.Errorf("buttons %q, want %q", buttonsOf(p), want)
	}
	if !strings.Contains(p.Text, "<@U1>") || !strings.Contains(p.Text, "Which office do you mean?") {
		t.Errorf("question %q", p.Text)
	}
	var offered []string
	for _, tool := range e.llm.ChatRequests()[0].Tools {
		offered = append(offered, tool.Name)
	}
	if !slices.Contains(offered, ask.Name) || !slices.Contains(offered, "srv__lookup") {
		t.Errorf("offered %v: want ask_user beside the server's tools", offered)
	}
	e.click(t, "C1", p.TS, "U2", ask.ActionOption(0))
	e.waitFor(t, "U2 told", func() bool { return len(e.privateTo("U2")) == 1 })
	if got := e.privateTo("U2")[0]; got != ask.TextNotAsker {
		t.Errorf("U2 told %q", got)
	}
	e.click(t, "C1", p.TS, "U1", ask.ActionOption(1))
	got := e.answerOf(t, q)
	if !strings.Contains(got, "Done: ") || !strings.Contains(got, "answered: Lima") {
		t.Errorf("answer %q", got)
	}
	if res := e.lastToolResult(t); !strings.Contains(res, "The person who asked answered: Lima") || !strings.Contains(res, "data from the result of the tool ask_user") {
		t.Errorf("tool result %q: want the choice, fenced as data", res)
	}
	if m, _ := e.slack.Message("C1", p.TS); !strings.Contains(m.Text, "<@U1> answered: Lima") || buttonsOf(m) != "" {
		t.Errorf("settled question %q with buttons %q", m.Text, buttonsOf(m))
	}
	for _, m := range e.slack.BotReplies("C1", q) {
		if strings.Contains(m.Text, "may I use") {
			t.Errorf("ask_user asked for approval: %q", m.Text)
		}
	}
}

// TestE2EAskUserOther: Other… opens a modal for the asker; the typed text is the answer.
// ASK_USER=on offers the tool in a channel without other tools.
func TestE2EAskUserOther(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"ASK_USER": "on"})
	e.llm.SetChat(toolModel(1, fakellm.WireWhole, askCall()))
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what are the office hours?")
	p := e.question(t, q)
	e.click(t, "C1", p.TS, "U2", ask.ActionOther)
	e.waitFor(t, "U2 told", func() bool { return len(e.privateTo("U2")) == 1 })
	e.click(t, "C1", p.TS, "U1", ask.ActionOther)
	e.waitFor(t, "the answer's modal", func() bool { return len(e.slack.Views()) == 1 })
	v := e.slack.Views()[0]
	if v.User != "U1" || v.CallbackID != ask.View || len(v.Inputs) != 1 || v.Inputs[0].ActionID != ask.AnswerInput {
		t.Fatalf("modal %+v", v)
	}
	if _, err := e.slack.SubmitView(v.ID, map[string]string{ask.AnswerInput: "Bergen <!channel>"}); err != nil {
		t.Fatal(err)
	}
	got := e.answerOf(t, q)
	if !strings.Contains(got, "Done: ") {
		t.Errorf("answer %q", got)
	}
	if res := e.lastToolResult(t); !strings.Contains(res, "The person who asked answered: Bergen <!channel>") {
		t.Errorf("tool result %q: want the typed answer (as data)", res)
	}
	m, _ := e.slack.Message("C1", p.TS)
	if !strings.Contains(m.Text, "<@U1> answered: Bergen") || strings.Contains(m.Text, "<!channel>") || buttonsOf(m) != "" {
		t.Errorf("settled question %q with buttons %q: want the answer, its mention made harmless", m.Text, buttonsOf(m))
	}
}

// TestE2EAskUserTimeout: no answer within TOOL_APPROVAL_TIMEOUT: the model is told and answers; the
// question says nobody answered.
func TestE2EAskUserTimeout(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"ASK_USER": "on", "TOOL_APPROVAL_TIMEOUT": "500ms"})
	e.llm.SetChat(toolModel(1, fakellm.WireOpenAI, askCall()))
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what are the office hours?")
	p := e.question(t, q)
	got := e.answerOf(t, q)
	if !strings.Contains(got, "did not answer in time") {
		t.Errorf("answer %q: want the model told nobody answered", got)
	}
	if m, _ := e.slack.Message("C1", p.TS); !strings.Contains(m.Text, "No answer in time") || buttonsOf(m) != "" {
		t.Errorf("question after the timeout %q with buttons %q", m.Text, buttonsOf(m))
	}
}

// TestE2EAskUserOffWhereNoTools: by default (ASK_USER=auto) a channel without tools is offered none.
func TestE2EAskUserOffWhereNoTools(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(toolModel(1, fakellm.WireOpenAI, askCall()))
	e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> hello")
	e.waitFor(t, "the reply", func() bool { return e.finished(t) >= 1 })
	if reqs := e.llm.ChatRequests(); len(reqs) != 1 || len(reqs[0].Tools) != 0 {
		t.Errorf("a channel without tools was offered %v", reqs[0].Tools)
	}
}

// TestReplicasAskUserAnswerOnAnotherReplica: the asker's choice lands on the replica that is not
// writing the answer and is handed over, and so is the typed answer of Other…. After the writing replica dies and its answer is closed,
// a late click is told the question lapsed, and the question says so.
func TestReplicasAskUserAnswerOnAnotherReplica(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t, "REDIS_URL="+redistest.New(t).URL(), "ASK_USER=on")
	a, b := rs.start(), rs.start()
	rs.fl.SetChat(toolModel(1, fakellm.WireOpenAI, askCall()))
	msgs := func(ts string) func() []fakeslack.Message {
		return func() []fakeslack.Message { return rs.fs.BotReplies("C1", ts) }
	}
	wait := func(what string, cond func() bool) { rs.wait(what, cond) }

	ts := rs.ask(a, "what are the office hours?")
	p := question(t, msgs(ts), wait)
	if _, err := rs.fs.Via(b.conn).Click("C1", p.TS, "U1", ask.ActionOption(0)); err != nil {
		t.Fatal(err)
	}
	rs.wait("the answer with the choice", func() bool {
		return strings.Contains(rs.answer(ts), "answered: Oslo") &&
			strings.Contains(rs.answer(ts), "Done: ")
	})
	if !strings.Contains(b.logs.String(), "answer to a question handed to the replica writing the answer") {
		t.Error("the click was not handed over")
	}

	// Other… opens the modal where the click lands; its submission, there too, is handed over with
	// the typed answer.
	ts = rs.ask(a, "and the address?")
	p = question(t, msgs(ts), wait)
	if _, err := rs.fs.Via(b.conn).Click("C1", p.TS, "U1", ask.ActionOther); err != nil {
		t.Fatal(err)
	}
	rs.wait("the answer's modal", func() bool { return len(rs.fs.Views()) == 1 })
	if _, err := rs.fs.Via(b.conn).SubmitView(rs.fs.Views()[0].ID, map[string]string{ask.AnswerInput: "the Bergen office"}); err != nil {
		t.Fatal(err)
	}
	rs.wait("the answer with the typed text", func() bool {
		return strings.Contains(rs.answer(ts), "answered: the Bergen office") && strings.Contains(rs.answer(ts), "Done: ")
	})

	ts = rs.ask(a, "and the phone number?")
	p = question(t, msgs(ts), wait)
	a.kill()
	// Once the other replica has closed the dead one's answer (the orphans' recovery), nobody
	// waits for the question.
	rs.wait("the answer closed", func() bool { return strings.Contains(rs.answer(ts), "Interrupted") })
	if _, err := rs.fs.Via(b.conn).Click("C1", p.TS, "U1", ask.ActionOption(1)); err != nil {
		t.Fatal(err)
	}
	rs.wait("the asker told the question lapsed", func() bool {
		for _, m := range rs.fs.Ephemerals() {
			if m.User == "U1" && m.Text == ask.TextLapsed {
				return true
			}
		}
		return false
	})
	rs.wait("the question rewritten", func() bool {
		m, _ := rs.fs.Message("C1", p.TS)
		return strings.Contains(m.Text, "lapsed") && len(m.Buttons()) == 0
	})
}

// TestE2EAskUserStopped: Stop while the question waits ends the wait; the question says the answer
// was stopped and keeps no buttons.
func TestE2EAskUserStopped(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"ASK_USER": "on"})
	e.llm.SetChat(toolModel(1, fakellm.WireOpenAI, askCall()))
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what are the office hours?")
	p := e.question(t, q)
	var answer fakeslack.Message
	for _, m := range e.slack.BotReplies("C1", q) {
		if strings.Contains(buttonsOf(m), route.ActionStop) {
			answer = m
		}
	}
	if answer.TS == "" {
		t.Fatal("no Stop button on the answer while the question waits")
	}
	e.click(t, "C1", answer.TS, "U1", route.ActionStop)
	e.waitFor(t, "the question settled", func() bool {
		m, _ := e.slack.Message("C1", p.TS)
		return strings.Contains(m.Text, "The answer was stopped") && buttonsOf(m) == ""
	})
	if n := len(e.llm.ChatRequests()); n != 1 {
		t.Errorf("%d model requests, want 1: a stopped answer asks nothing more", n)
	}
}
