package main

// End-to-end tests of Slack's agent surface: agent sessions and their Stop, the reply mode per
// place, streams that outlive Slack's limit, feedback and the agent pane, against the fake Slack.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/feedback"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/pane"
	"github.com/llmbot/llmbot/route"
)

// streamingAnswer waits for the bot's streamed message in the thread to show text, and returns it.
func (e *e2e) streamingAnswer(t *testing.T, channel, threadTS string) fakeslack.Message {
	t.Helper()
	var msg fakeslack.Message
	e.waitFor(t, "streamed text", func() bool {
		m := e.slack.BotReplies(channel, threadTS)
		if len(m) == 1 && m[0].Streaming && strings.HasPrefix(m[0].Text, "Four") {
			msg = m[0]
			return true
		}
		return false
	})
	return msg
}

func TestE2EAgentSessionStop(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"REPLY_MODE": "stream"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer).StallAfter(4) })
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	e.streamingAnswer(t, "C1", q)
	e.waitFor(t, "the session processing", func() bool {
		return slices.Equal(e.slack.SessionStatuses("C1", q), []string{route.SessionProcessing})
	})

	// A Stop from someone else (were Slack to show it to others than the asker; the event alone,
	// without halting the stream): told privately, the answer goes on.
	e.slack.SendEvent(map[string]any{"type": route.EventSessionStopped, "channel": "C1", "thread_ts": q, "user": "U2",
		"event_ts": q})
	e.waitFor(t, "refusal", func() bool { return len(e.privateTo("U2")) == 1 })
	if got := e.privateTo("U2")[0]; got != handlers.TextNotAsker {
		t.Errorf("U2 told %q, want %q", got, handlers.TextNotAsker)
	}
	if r := e.llm.Requests(); len(r) != 1 || r[0].ClientGone {
		t.Fatalf("model request %+v: want it still streaming", r)
	}

	// The asker stops it: the model request is cancelled, what was shown stays, marked stopped,
	// and the session is moved off processing.
	shown := e.streamingAnswer(t, "C1", q).Text
	e.slack.StopSession("C1", q, "U1")
	e.waitFor(t, "model request cancelled", func() bool { r := e.llm.Requests(); return len(r) == 1 && r[0].ClientGone })
	final := e.final(t, "C1", q, 1, 1)[0]
	if mk := markOf(t, final); mk.Kind != convo.MarkAnswer || !strings.HasPrefix(mk.Note, "Stopped by ") {
		t.Errorf("mark %+v, want an answer noted as stopped", mk)
	}
	if !strings.HasPrefix(final.Text, shown) || !strings.Contains(final.Text, "_Stopped by ") || strings.Contains(final.Text, "every base") {
		t.Errorf("final text %q: want what was shown (%q) and the stop note", final.Text, shown)
	}
	e.waitFor(t, "the session active", func() bool {
		return slices.Equal(e.slack.SessionStatuses("C1", q), []string{route.SessionProcessing, route.SessionActive})
	})
	if got := e.privateTo("U1"); len(got) != 0 {
		t.Errorf("asker told %q privately, want nothing", got)
	}
}

func TestE2EAgentSessionStatusFollowsTheAnswer(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"REPLY_MODE": "stream"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(answer).Paced(10*time.Millisecond, 20*time.Millisecond)
	})
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	e.final(t, "C1", q, 1, 1)
	e.waitFor(t, "the session active", func() bool {
		return slices.Equal(e.slack.SessionStatuses("C1", q), []string{route.SessionProcessing, route.SessionActive})
	})

	// A Stop pressed once the answer has ended: nothing runs, the session is moved off processing
	// (Slack may show its Stop a moment longer), and nobody is told anything.
	e.slack.StopSession("C1", q, "U1")
	e.waitFor(t, "the session active again", func() bool { return len(e.slack.SessionStatuses("C1", q)) == 3 })
	if got := e.slack.SessionStatuses("C1", q)[2]; got != route.SessionActive {
		t.Errorf("status after a late Stop = %q, want active", got)
	}
	if got := e.privateTo("U1"); len(got) != 0 {
		t.Errorf("asker told %q privately, want nothing", got)
	}
}

func TestE2EAgentSessionsRefusedAreNotRetried(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{NotAgent: true}, map[string]string{"REPLY_MODE": "stream"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer) })
	for i := range 2 {
		q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
		if got := e.final(t, "C1", q, 1, i+1)[0].Text; got != answer {
			t.Errorf("answer %d = %q, want %q", i+1, got, answer)
		}
	}
	if n := len(e.slack.CallsTo("agents.sessions.setStatus")); n != 1 {
		t.Errorf("%d agents.sessions.setStatus calls, want 1: a refusal turns them off", n)
	}
}

// TestE2EReplyModePerPlace: REPLY_MODE=auto streams natively where the asker alone reads the
// answer live (a DM thread) and edits in channel threads; edit and stream force one, and
// CHANNEL_CONFIG sets a channel's own.
func TestE2EReplyModePerPlace(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "channels.yaml")
	if err := os.WriteFile(config, []byte("channels:\n  C2:\n    reply_mode: stream\n  C3:\n    reply_mode: edit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, mode, channel string
		streamed            bool
	}{
		{"auto in a DM thread", "", "D1", true},
		{"auto in a channel thread", "", "C1", false},
		{"auto in a channel set to stream", "", "C2", true},
		{"stream in a channel", "stream", "C1", true},
		{"stream in a channel set to edit", "stream", "C3", false},
		{"edit in a DM thread", "edit", "D1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"CHANNEL_CONFIG": config}
			if tc.mode != "" {
				env["REPLY_MODE"] = tc.mode
			}
			e := startE2E(t, fakeslack.Config{}, env)
			e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer) })
			// The thread's first message from before the bot ran: no event, nothing to answer.
			thread := e.slack.Post(fakeslack.UserMessage{Channel: tc.channel, User: "U1", Text: "an earlier message",
				Time: time.Now().Add(-time.Minute)})
			e.slack.PostUserMessage(tc.channel, "U1", thread, "<@UBOT> what is 2+2?")
			msgs := e.final(t, tc.channel, thread, 1, 1)
			starts := len(e.slack.CallsTo("chat.startStream"))
			if got := starts == 1 && msgs[0].Markdown; got != tc.streamed || msgs[0].Text != answer {
				t.Errorf("answer %q streamed = %v (%d chat.startStream), want %v", msgs[0].Text, got, starts, tc.streamed)
			}
		})
	}
}

// answerParts checks that the bot's messages in the thread are a finished answer in parts, written
// without a rescue (no message posted anew, none deleted), and returns their texts.
func (e *e2e) answerParts(t *testing.T, channel, threadTS string) []string {
	t.Helper()
	e.waitFor(t, "the reply to finish", func() bool { return e.finished(t) >= 1 })
	var texts []string
	for i, m := range e.slack.BotReplies(channel, threadTS) {
		if k := markOf(t, m).Kind; k != convo.MarkAnswer || m.Streaming {
			t.Errorf("message %d: mark %q, streaming %v: want a finished answer part", i, k, m.Streaming)
		}
		texts = append(texts, m.Text)
	}
	if n := len(e.slack.CallsTo("chat.postMessage")) + len(e.slack.CallsTo("chat.delete")); n != 0 {
		t.Errorf("%d chat.postMessage/chat.delete calls: want none (no rescue)", n)
	}
	if got := strings.Join(texts, ""); got != answer {
		t.Errorf("the answer's parts %q join to %q, want %q", texts, got, answer)
	}
	return texts
}

// TestE2EStreamRollsOverBeforeSlackEndsIt: a natively streamed answer that outlives Slack's limit
// (its age, or its silence while the model thinks) goes on in a new message before Slack ends the
// stream, so nothing is stuck and nothing needs rewriting.
func TestE2EStreamRollsOverBeforeSlackEndsIt(t *testing.T) {
	t.Parallel()
	// Slack's limit is 5 minutes, the rollover 4: a minute apart, more than the pacing of appends
	// and of chat.startStream/stopStream (about one every 3 s) ever holds a write back. Here 4 s and
	// 2 s: one rollover.
	slow := fakellm.Text(answer).Paced(10*time.Millisecond, 150*time.Millisecond)
	for _, tc := range []struct {
		name  string
		slack fakeslack.Config
		env   map[string]string
		reply fakellm.Reply
	}{
		{"by age", fakeslack.Config{StreamExpiry: 4 * time.Second},
			map[string]string{"STREAM_ROLLOVER_AFTER": "2s"}, slow},
		{"by silence", fakeslack.Config{StreamIdleExpiry: 2 * time.Second},
			map[string]string{"STREAM_IDLE_LIMIT": "1s"}, fakellm.Text(answer).PauseAfter(4, 3*time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["REPLY_MODE"] = "stream"
			e := startE2E(t, tc.slack, tc.env)
			e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return tc.reply })
			q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
			if parts := e.answerParts(t, "C1", q); len(parts) < 2 {
				t.Errorf("answer in %d message(s), want it rolled over to a second", len(parts))
			}
			if n := len(e.slack.CallsTo("chat.update")); n != 0 {
				t.Errorf("%d chat.update calls: want none (no stream ended by Slack)", n)
			}
		})
	}
}

// TestE2EStreamEndedBySlackIsFinishedInPlace: when Slack ends a stream all the same, the message
// is finished with chat.update from what it took, and the answer goes on in a new message (or,
// when the stream ended at the very end, ends in it), with its Regenerate button on the last.
func TestE2EStreamEndedBySlackIsFinishedInPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		pauseAt int
	}{
		{"mid-answer", 4},
		{"before the last words", len(fakellm.Split(answer)) - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startE2E(t, fakeslack.Config{}, map[string]string{"REPLY_MODE": "stream"})
			e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
				return fakellm.Text(answer).PauseAfter(tc.pauseAt, time.Second)
			})
			q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
			e.waitFor(t, "streamed text", func() bool {
				m := e.slack.BotReplies("C1", q)
				return len(m) == 1 && m[0].Streaming && m[0].Text != ""
			})
			time.Sleep(300 * time.Millisecond) // the model's first words appended
			m := e.slack.BotReplies("C1", q)[0]
			if !e.slack.ExpireStream("C1", m.TS) {
				t.Fatal("the stream was not streaming")
			}
			e.answerParts(t, "C1", q)
			if n := len(e.slack.CallsTo("chat.update")); n != 1 {
				t.Errorf("%d chat.update calls, want 1 (the ended stream finished)", n)
			}
			msgs := e.slack.BotReplies("C1", q)
			if got := buttonsOf(msgs[len(msgs)-1]); got != route.ActionRegenerate {
				t.Errorf("last message's buttons %q, want Regenerate", got)
			}
		})
	}
}

// TestE2EFeedback: a finished answer shows 👍/👎 (Slack's feedback buttons) under Regenerate;
// ratings are counted by place and model; a 👎 opens the optional comment modal and is posted to
// FEEDBACK_CHANNEL with a link to the answer, and so is its comment once sent. No comment is
// logged above debug.
func TestE2EFeedback(t *testing.T) {
	t.Parallel()
	e, h := startWithHealth(t, map[string]string{"FEEDBACK_CHANNEL": "C9", "LOG_LEVEL": "info"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer) })
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	final := e.final(t, "C1", q, 1, 1)[0]
	if _, ok := final.Feedback(); !ok || buttonsOf(final) != route.ActionRegenerate {
		t.Fatalf("answer shows buttons %q and feedback %v: want Regenerate and 👍/👎", buttonsOf(final), ok)
	}

	if _, err := e.slack.ClickFeedback("C1", final.TS, "U2", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.slack.ClickFeedback("C1", final.TS, "U1", false); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the comment modal", func() bool { return len(e.slack.Views()) == 1 })
	v := e.slack.Views()[0]
	if v.User != "U1" || v.CallbackID != feedback.View || len(v.Inputs) != 1 || !v.Inputs[0].Optional {
		t.Errorf("modal %+v: want the optional comment for U1", v)
	}
	e.waitFor(t, "the 👎 in the feedback channel", func() bool { return len(e.slack.Messages("C9")) == 1 })
	posted := e.slack.Messages("C9")[0].Text
	link := "https://test-team.slack.com/archives/C1/p" + strings.ReplaceAll(final.TS, ".", "")
	if !strings.Contains(posted, "👎") || !strings.Contains(posted, link) || !strings.Contains(posted, "U1") {
		t.Errorf("feedback channel shows %q: want the 👎, U1 and a link to %s", posted, link)
	}

	const comment = "It forgot base three <!channel>"
	if _, err := e.slack.SubmitView(v.ID, map[string]string{v.Inputs[0].ActionID: comment}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the comment in the feedback channel", func() bool { return len(e.slack.Messages("C9")) == 2 })
	got := e.slack.Messages("C9")[1].Text
	if !strings.Contains(got, "It forgot base three") || strings.Contains(got, "<!channel>") || !strings.Contains(got, link) {
		t.Errorf("comment posted as %q: want it quoted, defused, with the link", got)
	}
	if strings.Contains(e.logs.String(), "forgot base") {
		t.Errorf("the comment appears in the logs (info level)")
	}

	m := h.scrape(t)
	for _, tc := range []struct {
		rating string
		want   float64
	}{{"good", 1}, {"bad", 1}} {
		s, _ := series(m, "llmbot_feedback_total", map[string]string{"rating": tc.rating, "place": "channel", "model": "gpt-5.4-mini"})
		if s.value != tc.want {
			t.Errorf("llmbot_feedback_total{rating=%s} = %v, want %v", tc.rating, s.value, tc.want)
		}
	}
}

func TestE2EFeedbackOff(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{{"FEEDBACK": "false"}, {"BUTTONS": "false"}} {
		e := startE2E(t, fakeslack.Config{}, env)
		e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer) })
		q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
		if _, ok := e.final(t, "C1", q, 1, 1)[0].Feedback(); ok {
			t.Errorf("%v: the answer shows feedback buttons", env)
		}
	}
}

// openPane sends app_home_opened on the messages tab of user's DM with the bot, as Slack does
// when the agent pane opens.
func (e *e2e) openPane(channel, user string) {
	e.slack.SendEvent(map[string]any{"type": pane.EventAppHomeOpened, "user": user, "channel": channel,
		"tab": "messages", "event_ts": "1700000000.000100"})
}

// TestE2EAgentPane: opening the pane shows the suggested prompts (once an hour per person); each
// message there is answered in its own thread, natively streamed (REPLY_MODE=auto), the thread
// titled from the question, "is thinking…" shown meanwhile, and the session moved with it.
func TestE2EAgentPane(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{
		"SUGGESTED_PROMPTS": "Summarize=Summarize what I paste next.;Translate this to French",
	})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer) })
	e.openPane("D1", "U1")
	e.waitFor(t, "suggested prompts", func() bool { return len(e.slack.CallsTo("assistant.threads.setSuggestedPrompts")) == 1 })
	p := e.slack.CallsTo("assistant.threads.setSuggestedPrompts")[0].Params
	want := `[{"title":"Summarize","message":"Summarize what I paste next."},{"title":"Translate this to French","message":"Translate this to French"}]`
	if p.Get("channel_id") != "D1" || p.Get("thread_ts") != "" || p.Get("prompts") != want {
		t.Errorf("setSuggestedPrompts %v, want D1's top with %s", p, want)
	}

	q := e.slack.PostUserMessage("D1", "U1", "", "What is <https://example.com|2+2>?\nPlease be brief.")
	msgs := e.final(t, "D1", q, 1, 1)
	if msgs[0].ThreadTS != q || msgs[0].Text != answer || !msgs[0].Markdown {
		t.Errorf("answer %+v: want it streamed in the question's own thread", msgs[0])
	}
	if c := e.slack.CallsTo("assistant.threads.setTitle"); len(c) != 1 || c[0].Params.Get("title") != "What is 2+2?" || c[0].Params.Get("thread_ts") != q {
		t.Errorf("setTitle calls %v, want the thread titled \"What is 2+2?\"", c)
	}
	if c := e.slack.CallsTo("assistant.threads.setStatus"); len(c) != 1 || c[0].Params.Get("status") == "" || c[0].Params.Get("loading_messages") == "" {
		t.Errorf("setStatus calls %v, want a thinking status with loading messages", c)
	}
	e.waitFor(t, "the session active", func() bool {
		return slices.Equal(e.slack.SessionStatuses("D1", q), []string{route.SessionProcessing, route.SessionActive})
	})

	// The pane opened again soon: no new call.
	e.openPane("D1", "U1")
	e.openPane("D2", "U2")
	e.waitFor(t, "the other person's prompts", func() bool { return len(e.slack.CallsTo("assistant.threads.setSuggestedPrompts")) == 2 })
	time.Sleep(100 * time.Millisecond)
	if n := len(e.slack.CallsTo("assistant.threads.setSuggestedPrompts")); n != 2 {
		t.Errorf("%d setSuggestedPrompts calls, want 2 (one per person)", n)
	}
}

func TestE2EAgentViewOff(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"AGENT_VIEW": "false"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer) })
	e.openPane("D1", "U1")
	q := e.slack.PostUserMessage("D1", "U1", "", "What is 2+2?")
	e.waitFor(t, "the reply to finish", func() bool { return e.finished(t) >= 1 })
	if got := e.slack.BotReplies("D1", q); len(got) != 0 {
		t.Errorf("%d answers in the question's thread, want the answer at the top of the DM", len(got))
	}
	for _, m := range []string{"assistant.threads.setSuggestedPrompts", "assistant.threads.setTitle", "assistant.threads.setStatus"} {
		if n := len(e.slack.CallsTo(m)); n != 0 {
			t.Errorf("%d %s calls, want none", n, m)
		}
	}
}

// TestE2EProgressAsTasks: a natively streamed answer shows its steps as task cards while it has
// no text: reading the thread, then waiting for the model, with a retry and its reason; both are
// complete once the answer is.
func TestE2EProgressAsTasks(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"REPLY_MODE": "stream", "LLM_MAX_RETRIES": "1"})
	var calls atomic.Int32
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		if calls.Add(1) == 1 {
			return fakellm.HTTPError(503, fakellm.APIError{Message: "overloaded", Type: "server_error"})
		}
		return fakellm.Text(answer)
	})
	thread := e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U2", Text: "the build is red",
		Time: time.Now().Add(-time.Minute)})
	e.slack.PostUserMessage("C1", "U1", thread, "<@UBOT> why?")
	msgs := e.final(t, "C1", thread, 1, 1)
	want := []fakeslack.Task{
		{ID: "read", Title: "Reading the conversation", Status: "complete", Updates: 2},
		{ID: "model", Title: "Waiting for the model", Status: "complete", Updates: 3},
	}
	if got := msgs[0].Tasks; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("task cards %+v\nwant %+v", got, want)
	}
	if msgs[0].Text != answer {
		t.Errorf("answer %q, want %q", msgs[0].Text, answer)
	}
	var retry string
	for _, c := range e.slack.CallsTo("chat.appendStream") {
		if ch := c.Params.Get("chunks"); strings.Contains(ch, "trying again") {
			retry = ch
		}
	}
	if !strings.Contains(retry, "HTTP 503") || !strings.Contains(retry, "attempt 2") {
		t.Errorf("no task update saying the model is retried after a 503 (got %q)", retry)
	}
}

// TestE2EThinkingStatusInChannelThreads: an answer in a channel thread shows "is thinking…" under
// the thread at once, before the thread is read or the model answers (a sign of life that costs
// none of the scarce budgets); Slack clears it when the answer is posted.
func TestE2EThinkingStatusInChannelThreads(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer).Paced(2*time.Second, 0) })
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	e.waitFor(t, "the thinking status", func() bool { return e.slack.Status("C1", q) != "" })
	if got := e.slack.BotReplies("C1", q); len(got) != 0 {
		t.Errorf("bot messages %+v before the status; want the status first", got)
	}
	e.final(t, "C1", q, 1, 1)
	if s := e.slack.Status("C1", q); s != "" {
		t.Errorf("status %q after the answer; want it cleared", s)
	}
}
