package main

// End-to-end tests, through run's wiring against the fakes, of: an edit adding the mention, thanks
// in a bot thread, access refusals and the busy note, and a model server that wants alternating
// roles.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// settle waits a little for work that should not happen (a second answer, a notice).
func settle() { time.Sleep(500 * time.Millisecond) }

// quiet posts a DM marker (the bot answers it) and waits until the model has had at least requests
// chat requests, the marker's among them, then settles: what the events before the marker were to
// set off has happened by then.
func (e *e2e) quiet(t *testing.T, marker string, requests int) {
	t.Helper()
	e.slack.PostUserMessage("D1", "U1", "", marker)
	e.waitFor(t, marker, func() bool { return len(e.llm.ChatRequests()) >= requests })
	settle()
}

// A top-level message edited to add the mention is answered once, in a thread under it; a
// further edit that keeps the mention gets no second answer.
func TestE2EEditAddsMentionTopLevel(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "marker") {
			return fakellm.Text("marker answer")
		}
		return fakellm.Text("Run the rotate command.")
	})
	ts := e.slack.PostUserMessage("C1", "U1", "", "how do I rotate keys?")
	// The plain message is not for the bot: a DM marker answered means it was looked at.
	e.quiet(t, "marker 1", 1)
	if n := len(e.slack.BotReplies("C1", ts)); n != 0 {
		t.Fatalf("%d bot replies before the edit, want 0", n)
	}

	if !e.slack.EditUserMessage("C1", ts, "<@UBOT> how do I rotate keys?") {
		t.Fatal("edit failed")
	}
	msgs := e.final(t, "C1", ts, 1, 2)
	if msgs[0].Text != "Run the rotate command." || msgs[0].ThreadTS != ts {
		t.Errorf("answer %q in thread %q, want the model's answer under %s", msgs[0].Text, msgs[0].ThreadTS, ts)
	}
	reqs := e.llm.ChatRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests, want 2", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if !strings.Contains(last.Content, "how do I rotate keys?") || strings.Contains(last.Content, "<@UBOT>") {
		t.Errorf("the edited question was sent as %q", last.Content)
	}

	// A typo fixed, the mention kept: no second answer.
	if !e.slack.EditUserMessage("C1", ts, "<@UBOT> how do I rotate my keys?") {
		t.Fatal("second edit failed")
	}
	e.quiet(t, "marker 2", 3)
	if got := e.botReplies("C1", ts); len(got) != 1 {
		t.Errorf("bot replies after the second edit %q, want the one answer", got)
	}
	if n := len(e.llm.ChatRequests()); n != 3 {
		t.Errorf("%d chat requests, want 3 (the answer and two markers)", n)
	}
	if p := e.privateTo("U1"); len(p) != 0 {
		t.Errorf("private notices %q, want none", p)
	}
}

// The same, when the edit comes after the bot has answered another message in the channel and
// the message was edited twice in quick succession (both edits queued before the first answer).
func TestE2EEditAddsMentionTwiceQuickly(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text("Run the rotate command.").Paced(200*time.Millisecond, 10*time.Millisecond)
	})
	ts := e.slack.PostUserMessage("C1", "U1", "", "how do I rotate keys?")
	e.slack.EditUserMessage("C1", ts, "<@UBOT> how do I rotate keys?")
	e.slack.EditUserMessage("C1", ts, "<@UBOT> how do I rotate my keys?")
	e.final(t, "C1", ts, 1, 1)
	settle()
	if got := e.botReplies("C1", ts); len(got) != 1 {
		t.Errorf("bot replies %q, want one answer", got)
	}
	if n := len(e.llm.ChatRequests()); n != 1 {
		t.Errorf("%d chat requests, want 1", n)
	}
}

// In a bot thread, "thanks!" gets no answer and no notice; "and for TLS?" gets one.
func TestE2EFollowUpThanksAndQuestion(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(fakellm.Sequence(fakellm.Text("Run the rotate command."), fakellm.Text("For TLS, renew the certificate.")))
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> how do I rotate keys?")
	e.final(t, "C1", ts, 1, 1)

	e.slack.PostUserMessage("C1", "U1", ts, "thanks!")
	e.quiet(t, "marker", 2)
	if got := e.botReplies("C1", ts); len(got) != 1 {
		t.Errorf("bot replies after thanks %q, want the one answer", got)
	}
	if p := e.privateTo("U1"); len(p) != 0 {
		t.Errorf("private notices after thanks %q, want none", p)
	}

	e.slack.PostUserMessage("C1", "U1", ts, "and for TLS?")
	e.waitFor(t, "the TLS answer", func() bool {
		r := e.botReplies("C1", ts)
		return len(r) == 2 && r[1] == "For TLS, renew the certificate."
	})
	e.final(t, "C1", ts, 2, 3) // the DM marker finished too
	reqs := e.llm.ChatRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d chat requests, want 3", len(reqs))
	}
	last := reqs[2].Messages[len(reqs[2].Messages)-1]
	if !strings.Contains(last.Content, "and for TLS?") {
		t.Errorf("last message %q", last.Content)
	}
	if p := e.privateTo("U1"); len(p) != 0 {
		t.Errorf("private notices %q, want none", p)
	}
}

// ALLOW_USERS: a refused person's mention gets the refusal privately and no answer; with every
// slot busy, the refused person gets the refusal again, not the busy note (an allowed one does).
func TestE2EAllowUsersRefusalAndBusy(t *testing.T) {
	t.Parallel()
	const refusal = "Not for you; ask in #it-help."
	e := startE2E(t, fakeslack.Config{}, map[string]string{
		"ALLOW_USERS":            "U1,U3",
		"ACCESS_DENIED_TEXT":     refusal,
		"MAX_CONCURRENT_REPLIES": "1",
		"MAX_QUEUED_REPLIES":     "0",
	})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text("Slow answer.").Paced(3*time.Second, 10*time.Millisecond)
	})

	refused := e.slack.PostUserMessage("C1", "U2", "", "<@UBOT> how do I rotate keys?")
	e.waitFor(t, "the refusal", func() bool { return len(e.privateTo("U2")) == 1 })
	if got := e.privateTo("U2"); got[0] != refusal {
		t.Errorf("refusal %q, want %q", got[0], refusal)
	}
	if eph := e.slack.Ephemerals(); len(eph) != 1 || eph[0].Channel != "C1" || eph[0].ThreadTS != refused {
		t.Errorf("ephemerals %+v, want one in C1's thread %s", eph, refused)
	}
	if n := len(e.slack.BotReplies("C1", refused)); n != 0 {
		t.Errorf("%d bot replies to the refused person, want 0", n)
	}
	if n := len(e.llm.ChatRequests()); n != 0 {
		t.Errorf("%d chat requests for the refused person, want 0", n)
	}

	// Every slot busy.
	slow := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> a slow question")
	e.waitFor(t, "the slow answer to start", func() bool { return len(e.llm.ChatRequests()) == 1 })
	e.slack.PostUserMessage("C1", "U2", "", "<@UBOT> again?")
	e.slack.PostUserMessage("C1", "U3", "", "<@UBOT> me too?")
	e.waitFor(t, "the busy note to U3", func() bool { return len(e.privateTo("U3")) == 1 })
	if got := e.privateTo("U3")[0]; got != bot.BusyText {
		t.Errorf("U3 told %q, want the busy note", got)
	}
	e.waitFor(t, "the second refusal", func() bool { return len(e.privateTo("U2")) == 2 })
	settle()
	if got := e.privateTo("U2"); len(got) != 2 || got[1] != refusal {
		t.Errorf("the refused person was told %q, want the refusal again (not the busy note)", got)
	}
	e.final(t, "C1", slow, 1, 1) // refusals run nothing
}

// A thread with two people, against a model server whose chat template refuses two consecutive
// messages of one role (vLLM's 400): the answer still arrives, and a later one too.
func TestE2EAlternatingRolesTwoPeople(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	const vllm = `{"object":"error","message":"Conversation roles must alternate user/assistant/user/assistant/...","type":"BadRequestError","param":null,"code":400}`
	answers := fakellm.Sequence(fakellm.Text("Run the rotate command on Thursday."), fakellm.Text("For TLS, renew the certificate."))
	e.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		for i := 1; i < len(r.Messages); i++ {
			if r.Messages[i].Role == r.Messages[i-1].Role {
				return fakellm.Reply{Status: 400, Body: vllm}
			}
		}
		return answers(r)
	})
	root := e.slack.PostUserMessage("C1", "U1", "", "our deploy keys expire on Friday")
	e.slack.PostUserMessage("C1", "U2", root, "<@UBOT> how do I rotate them?")
	msgs := e.final(t, "C1", root, 1, 1)
	if msgs[0].Text != "Run the rotate command on Thursday." {
		t.Errorf("answer %q, want the model's", msgs[0].Text)
	}
	// Both people's words reached the model.
	var sent string
	for _, r := range e.llm.ChatRequests() {
		var roles []string
		for _, m := range r.Messages {
			roles = append(roles, m.Role)
			sent += m.Content + "\n"
		}
		t.Logf("request roles %v", roles)
	}
	if !strings.Contains(sent, "deploy keys expire") || !strings.Contains(sent, "how do I rotate them?") {
		t.Errorf("the model was not sent both messages:\n%s", sent)
	}

	// Another person speaks, then a follow-up: user, assistant, user, user again.
	e.slack.PostUserMessage("C1", "U1", root, "<@UBOT> and for TLS?")
	msgs = e.final(t, "C1", root, 2, 2)
	if msgs[1].Text != "For TLS, renew the certificate." {
		t.Errorf("second answer %q", msgs[1].Text)
	}
}

// A mention edited out and back in is not answered a second time.
func TestE2EEditMentionOutAndBackIn(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Run the rotate command.") })
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> how do I rotate keys?")
	e.final(t, "C1", ts, 1, 1)
	e.slack.EditUserMessage("C1", ts, "how do I rotate keys?")
	e.slack.EditUserMessage("C1", ts, "<@UBOT> how do I rotate keys?")
	e.quiet(t, "marker", 2)
	if got := e.botReplies("C1", ts); len(got) != 1 {
		t.Errorf("bot replies %q, want one answer", got)
	}
	if n := len(e.llm.ChatRequests()); n != 2 {
		t.Errorf("%d chat requests, want 2", n)
	}
}

// In a bot thread: "thanks!" edited into a question with the mention is answered once; a follow-up
// answered already and then edited to add the mention is not answered again.
func TestE2EEditInBotThread(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(fakellm.Sequence(fakellm.Text("Answer 1."), fakellm.Text("Answer 2."), fakellm.Text("Answer 3."), fakellm.Text("Answer 4.")))
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> how do I rotate keys?")
	e.final(t, "C1", ts, 1, 1)
	thx := e.slack.PostUserMessage("C1", "U1", ts, "thanks!")
	e.slack.EditUserMessage("C1", thx, "<@UBOT> thanks! and for TLS?")
	e.waitFor(t, "the edited question's answer", func() bool { r := e.botReplies("C1", ts); return len(r) == 2 && r[1] == "Answer 2." })
	e.final(t, "C1", ts, 2, 2) // the thanks never ran: it cannot be for the bot
	fu := e.slack.PostUserMessage("C1", "U1", ts, "and for SSH?")
	e.waitFor(t, "the follow-up's answer", func() bool { r := e.botReplies("C1", ts); return len(r) == 3 && r[2] == "Answer 3." })
	e.final(t, "C1", ts, 3, 3)
	e.slack.EditUserMessage("C1", fu, "<@UBOT> and for SSH?")
	e.quiet(t, "marker", 4)
	if got := e.botReplies("C1", ts); len(got) != 3 {
		t.Errorf("bot replies %q, want 3", got)
	}
	if n := len(e.llm.ChatRequests()); n != 4 {
		t.Errorf("%d chat requests, want 4", n)
	}
	if p := e.privateTo("U1"); len(p) != 0 {
		t.Errorf("private notices %q", p)
	}
}

// A refused person's follow-up in a bot thread, while every slot is busy: no note of any kind.
func TestE2ERefusedFollowUpWhileBusy(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"ALLOW_USERS": "U1", "MAX_CONCURRENT_REPLIES": "1", "MAX_QUEUED_REPLIES": "0"})
	e.llm.SetChat(fakellm.Sequence(fakellm.Text("Quick."), fakellm.Text("Slow.").Paced(2*time.Second, 10*time.Millisecond)))
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> how do I rotate keys?")
	e.final(t, "C1", ts, 1, 1)
	other := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> slow one")
	e.waitFor(t, "slow start", func() bool { return len(e.llm.ChatRequests()) == 2 })
	e.slack.PostUserMessage("C1", "U2", ts, "and for TLS?")
	e.slack.PostUserMessage("C1", "U1", ts, "and for SSH?") // allowed, known follow-up: busy note
	e.waitFor(t, "U1's busy note", func() bool { return len(e.privateTo("U1")) == 1 })
	settle()
	if p := e.privateTo("U2"); len(p) != 0 {
		t.Errorf("refused person told %q, want nothing", p)
	}
	e.final(t, "C1", other, 1, 2)
}

// "thanks!" in a bot thread while every slot is busy: no busy note either.
func TestE2EThanksWhileBusy(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"MAX_CONCURRENT_REPLIES": "1", "MAX_QUEUED_REPLIES": "0"})
	e.llm.SetChat(fakellm.Sequence(fakellm.Text("Quick."), fakellm.Text("Slow.").Paced(2*time.Second, 10*time.Millisecond)))
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> how do I rotate keys?")
	e.final(t, "C1", ts, 1, 1)
	other := e.slack.PostUserMessage("C1", "U2", "", "<@UBOT> slow one")
	e.waitFor(t, "slow start", func() bool { return len(e.llm.ChatRequests()) == 2 })
	e.slack.PostUserMessage("C1", "U1", ts, "thanks!")
	e.slack.PostUserMessage("C1", "U2", "", "<@UBOT> me too") // busy note: the thanks was handled before it
	e.waitFor(t, "U2's busy note", func() bool { return len(e.privateTo("U2")) == 1 })
	settle()
	if p := e.privateTo("U1"); len(p) != 0 {
		t.Errorf("thanks got %q, want nothing", p)
	}
	e.final(t, "C1", other, 1, 2)
}

// A refused person's edit adding the mention: the refusal privately, once; no answer.
func TestE2ERefusedEditAddsMention(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"ALLOW_USERS": "U1"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("No.") })
	ts := e.slack.PostUserMessage("C1", "U2", "", "how do I rotate keys?")
	e.slack.EditUserMessage("C1", ts, "<@UBOT> how do I rotate keys?")
	e.waitFor(t, "the refusal", func() bool { return len(e.privateTo("U2")) == 1 })
	e.slack.EditUserMessage("C1", ts, "<@UBOT> how do I rotate my keys?")
	e.quiet(t, "marker", 1)
	if n := len(e.llm.ChatRequests()); n != 1 {
		t.Errorf("%d chat requests, want the marker's only", n)
	}
	if p := e.privateTo("U2"); len(p) != 1 {
		t.Errorf("refused person told %q, want one refusal", p)
	}
	if r := e.botReplies("C1", ts); len(r) != 0 {
		t.Errorf("bot replies %q", r)
	}
}

// With every place taken, a question waits its turn (MAX_QUEUED_REPLIES), its asker told privately
// their place in line where the thread cannot show it (no agent view: no statuses), and is answered
// once the answer before it ends.
func TestE2EQueuedQuestionIsAnsweredAfterTheFirst(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"MAX_CONCURRENT_REPLIES": "1", "AGENT_VIEW": "false"})
	e.llm.SetChat(fakellm.Sequence(fakellm.Text("Slow.").Paced(time.Second, 10*time.Millisecond), fakellm.Text("Second.")))
	first := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> slow one")
	e.waitFor(t, "slow start", func() bool { return len(e.llm.ChatRequests()) == 1 })
	second := e.slack.PostUserMessage("C2", "U2", "", "<@UBOT> and me?")
	if got := e.final(t, "C2", second, 1, 2)[0].Text; got != "Second." {
		t.Errorf("second answer %q", got)
	}
	if got := e.final(t, "C1", first, 1, 2)[0].Text; got != "Slow." {
		t.Errorf("first answer %q", got)
	}
	if p := e.privateTo("U2"); len(p) != 1 || !strings.Contains(p[0], "number 1 in line") {
		t.Errorf("the waiting asker was told %q, want their place in line", p)
	}
}

// With every place taken, a question in a channel thread shows its place in line under the thread
// ("is waiting: next in line") and its asker gets no private note; when its turn comes "is
// thinking…" replaces it, and the answer clears it.
func TestE2EQueuedQuestionShowsItsPlaceInItsThread(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"MAX_CONCURRENT_REPLIES": "1"})
	e.llm.SetChat(fakellm.Sequence(fakellm.Text("Slow.").Paced(time.Second, 10*time.Millisecond), fakellm.Text("Second.")))
	first := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> slow one")
	e.waitFor(t, "slow start", func() bool { return len(e.llm.ChatRequests()) == 1 })
	second := e.slack.PostUserMessage("C2", "U2", "", "<@UBOT> and me?")
	e.waitFor(t, "the waiting status", func() bool { return e.slack.Status("C2", second) == "is waiting: next in line" })
	if got := e.final(t, "C2", second, 1, 2)[0].Text; got != "Second." {
		t.Errorf("second answer %q", got)
	}
	e.final(t, "C1", first, 1, 2)
	var statuses []string
	for _, c := range e.slack.CallsTo("assistant.threads.setStatus") {
		if c.Params.Get("channel_id") == "C2" && c.Params.Get("thread_ts") == second {
			statuses = append(statuses, c.Params.Get("status"))
		}
	}
	if want := []string{"is waiting: next in line", "is thinking…"}; !slices.Equal(statuses, want) {
		t.Errorf("statuses under the second question %q, want %q", statuses, want)
	}
	if s := e.slack.Status("C2", second); s != "" {
		t.Errorf("status %q after the answer; want it cleared", s)
	}
	if p := e.privateTo("U2"); len(p) != 0 {
		t.Errorf("the waiting asker was told %q privately, want the status only", p)
	}
}
