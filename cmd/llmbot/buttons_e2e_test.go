package main

// End-to-end tests of the Stop, Regenerate and "Another one" buttons: the real wiring against
// the fake Slack (clicks are block_actions envelopes over the Socket Mode WebSocket, only on
// buttons the message shows) and the fake LLM.

import (
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/imagine"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
)

// buttonsOf returns the action ids of the buttons a message shows.
func buttonsOf(m fakeslack.Message) string {
	var ids []string
	for _, b := range m.Buttons() {
		ids = append(ids, b.ActionID)
	}
	return strings.Join(ids, ",")
}

// privateTo returns what user was told privately (chat.postEphemeral and response_url posts).
func (e *e2e) privateTo(user string) []string {
	var out []string
	for _, m := range e.slack.Ephemerals() {
		if m.User == user {
			out = append(out, m.Text)
		}
	}
	for _, p := range e.slack.ResponseURLPosts() {
		if p.User == user {
			out = append(out, p.Text)
		}
	}
	return out
}

func (e *e2e) click(t *testing.T, channel, ts, user, action string) {
	t.Helper()
	if _, err := e.slack.Click(channel, ts, user, action); err != nil {
		t.Fatal(err)
	}
}

func TestE2EStopButtonEditMode(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer).StallAfter(4) })
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	var msg fakeslack.Message
	// "Four." (not just "Four"): the stream's first read may hold only the first token, and the
	// rest of the four comes with the next read, one coalescing pause later.
	e.waitFor(t, "partial answer with a Stop button", func() bool {
		ms := e.slack.BotReplies("C1", q)
		if len(ms) != 1 || !strings.HasPrefix(ms[0].Text, "Four.") || buttonsOf(ms[0]) != route.ActionStop {
			return false
		}
		msg = ms[0]
		return true
	})
	if !strings.HasPrefix(msg.SectionText(), "Four") {
		t.Errorf("Slack shows %q, want the answer so far above the button", msg.SectionText())
	}

	// Someone else presses Stop: told privately why not; the answer goes on.
	e.click(t, "C1", msg.TS, "U2", route.ActionStop)
	e.waitFor(t, "refusal", func() bool { return len(e.privateTo("U2")) == 1 })
	if got := e.privateTo("U2")[0]; got != handlers.TextNotAsker {
		t.Errorf("U2 told %q, want %q", got, handlers.TextNotAsker)
	}
	if r := e.llm.Requests(); len(r) != 1 || r[0].ClientGone || !r[0].End.IsZero() {
		t.Fatalf("model request %+v: want it still streaming", r)
	}

	// The asker presses Stop: the model request is cancelled, the text so far stays, marked.
	e.click(t, "C1", msg.TS, "U1", route.ActionStop)
	e.waitFor(t, "model request cancelled", func() bool { r := e.llm.Requests(); return len(r) == 1 && r[0].ClientGone })
	final := e.final(t, "C1", q, 1, 1)[0]
	if mk := markOf(t, final); mk.Kind != convo.MarkAnswer || !strings.HasPrefix(mk.Note, "Stopped by ") {
		t.Errorf("mark %+v, want an answer noted as stopped", mk)
	}
	if !strings.HasPrefix(final.Text, "Four.") || !strings.Contains(final.Text, "_Stopped by ") || strings.Contains(final.Text, "every base") {
		t.Errorf("final text %q: want the partial answer and the stop note", final.Text)
	}
	if got := buttonsOf(final); got != route.ActionRegenerate || final.SectionText() != final.Text {
		t.Errorf("stopped answer shows %q / %q, want Regenerate under the same text", got, final.SectionText())
	}
	if got := e.privateTo("U1"); len(got) != 0 {
		t.Errorf("asker told %q privately, want nothing", got)
	}
}

func TestE2ERegenerateButton(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"DENY_USERS": "U3"})
	var calls atomic.Int32
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(fmt.Sprintf("Answer number %d.", calls.Add(1))).Paced(20*time.Millisecond, 20*time.Millisecond)
	})
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is the capital of France?")
	first := e.final(t, "C1", q, 1, 1)[0]
	if first.Text != "Answer number 1." || buttonsOf(first) != route.ActionRegenerate {
		t.Fatalf("first answer %q with buttons %q, want Regenerate", first.Text, buttonsOf(first))
	}

	// Someone the access policy refuses: told privately, nothing asked.
	e.click(t, "C1", first.TS, "U3", route.ActionRegenerate)
	e.waitFor(t, "refusal", func() bool { return len(e.privateTo("U3")) == 1 })
	if got := e.privateTo("U3")[0]; got != access.DefaultRefusal {
		t.Errorf("U3 told %q, want the refusal", got)
	}

	// Someone else in the channel: the answer is written again in place, from the same thread.
	e.click(t, "C1", first.TS, "U2", route.ActionRegenerate)
	e.waitFor(t, "second model request", func() bool { return len(e.llm.ChatRequests()) == 2 })
	msgs := e.final(t, "C1", q, 1, 2) // a refused click runs nothing
	if msgs[0].TS != first.TS || msgs[0].Text != "Answer number 2." {
		t.Errorf("thread = %q (ts %s): want the second answer in place of the first (%s)", msgs[0].Text, msgs[0].TS, first.TS)
	}
	for i, m := range msgs {
		if buttonsOf(m) != route.ActionRegenerate || markOf(t, m).Kind != convo.MarkAnswer {
			t.Errorf("answer %d: buttons %q, mark %+v", i+1, buttonsOf(m), markOf(t, m))
		}
	}
	reqs := e.llm.ChatRequests()
	if withoutBoundary(reqs[1]) != withoutBoundary(reqs[0]) {
		t.Errorf("second request %+v\nwant the same thread as the first %+v (the old answer not replayed)", reqs[1].Messages, reqs[0].Messages)
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != "user" || !strings.Contains(last.Content, "capital of France") {
		t.Errorf("last message %+v, want the question", last)
	}
}

func TestE2EImagineAnotherOne(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"IMAGINE_DAILY_QUOTA": "1"})
	e.llm.SetImage(func(fakellm.ImageRequest) fakellm.ImageReply { return fakellm.ImageReply{Image: fakellm.PNG(8, 8)} })
	e.slack.SlashCommand("C1", "U1", "/imagine", "a fox in the snow")
	e.waitFor(t, "shared image", func() bool { f := e.slack.Files(); return len(f) == 1 && f[0].Shared })
	pic, _ := e.slack.Message("C1", e.slack.Files()[0].MessageTS)
	if buttonsOf(pic) != imagine.ActionImagineAgain {
		t.Fatalf("picture shows buttons %q, want Another one", buttonsOf(pic))
	}

	// U2 asks for another: a new picture, credited to U2, from U2's quota.
	e.click(t, "C1", pic.TS, "U2", imagine.ActionImagineAgain)
	e.waitFor(t, "second image", func() bool { f := e.slack.Files(); return len(f) == 2 && f[1].Shared })
	second, _ := e.slack.Message("C1", e.slack.Files()[1].MessageTS)
	if !strings.Contains(second.SectionText(), "<@U2>") || !strings.Contains(second.SectionText(), "a fox in the snow") {
		t.Errorf("second picture says %q, want it credited to U2 with the prompt", second.SectionText())
	}
	reqs := e.llm.Requests()
	if len(reqs) != 2 || reqs[1].Image == nil || reqs[1].Image.Prompt != "a fox in the snow" {
		t.Fatalf("image requests %+v, want the same prompt twice", reqs)
	}
	e.waitFor(t, "private ack", func() bool { return len(e.privateTo("U2")) == 1 })
	if got := e.privateTo("U2")[0]; !strings.Contains(got, "Generating") {
		t.Errorf("U2 told %q, want the Generating ack", got)
	}

	// U2's daily quota (1) is used up: the next click is refused privately.
	e.click(t, "C1", second.TS, "U2", imagine.ActionImagineAgain)
	e.waitFor(t, "quota notice", func() bool { return len(e.privateTo("U2")) == 2 })
	if got := e.privateTo("U2")[1]; strings.Contains(got, "Generating") {
		t.Errorf("U2 told %q, want the quota refusal", got)
	}
	if n := len(e.llm.Requests()); n != 2 {
		t.Errorf("image requests = %d, want 2 (none over the quota)", n)
	}
}

func TestE2EButtonsOff(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"BUTTONS": "false"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer) })
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	m := e.final(t, "C1", q, 1, 1)[0]
	if m.Text != answer || len(m.Blocks) != 0 {
		t.Errorf("answer %q with blocks %s, want plain text", m.Text, m.Blocks)
	}
}

func TestE2ERegenerateNativeStreaming(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"REPLY_MODE": "stream"})
	var calls atomic.Int32
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(fmt.Sprintf("Answer number %d.", calls.Add(1)))
	})
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is the capital of France?")
	first := e.final(t, "C1", q, 1, 1)[0]
	if !first.Markdown || buttonsOf(first) != route.ActionRegenerate {
		t.Fatalf("streamed answer %+v shows %q, want Regenerate at its bottom", first, buttonsOf(first))
	}
	// A native stream cannot be restarted in an existing message: the new answer is written over the
	// old one by editing it, as in edit mode.
	e.click(t, "C1", first.TS, "U1", route.ActionRegenerate)
	msgs := e.final(t, "C1", q, 1, 2)
	if msgs[0].TS != first.TS || msgs[0].Text != "Answer number 2." || buttonsOf(msgs[0]) != route.ActionRegenerate {
		t.Errorf("thread = %q (ts %s, buttons %q): want the second answer in place of the first (%s), with Regenerate",
			msgs[0].Text, msgs[0].TS, buttonsOf(msgs[0]), first.TS)
	}
}

// boundary finds a request's fence boundary (random per request) in its system prompt.
var boundary = regexp.MustCompile(`<<<([0-9a-f]{16}) `)

// withoutBoundary is a request's messages as text with its fence boundary replaced by "B": two
// requests for the same thread read the same.
func withoutBoundary(r fakellm.ChatRequest) string {
	text := requestText(r)
	if m := boundary.FindStringSubmatch(text); m != nil {
		text = strings.ReplaceAll(text, m[1], "B")
	}
	return text
}
