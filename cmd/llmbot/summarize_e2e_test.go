package main

// End-to-end tests of /summarize and the "Summarize thread" message shortcut: the real wiring
// against the fake Slack (the command and the shortcut arrive over Socket Mode, the summary through
// the command's response_url as an ephemeral message whose button is clicked as Slack sends it)
// and the fake LLM.

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/summarize"
)

// past posts a person's message as it was posted ago (no event: it is history).
func (e *e2e) past(channel, user, threadTS, text string, ago time.Duration) string {
	return e.slack.Post(fakeslack.UserMessage{Channel: channel, User: user, ThreadTS: threadTS, Text: text,
		Time: time.Now().Add(-ago)})
}

// commandAck returns the text of the ack of the slash command, once it came.
func (e *e2e) commandAck(t *testing.T) string {
	t.Helper()
	var text string
	e.waitFor(t, "the command's ack", func() bool {
		for _, a := range e.slack.Acks() {
			if a.Type == "slash_commands" {
				var p struct{ Text string }
				_ = json.Unmarshal(a.Payload, &p)
				text = p.Text
				return true
			}
		}
		return false
	})
	return text
}

// lastPrivate waits for the response_url post of user that satisfies ok and returns it.
func (e *e2e) lastPrivate(t *testing.T, what, user string, ok func(fakeslack.ResponseURLPost) bool) fakeslack.ResponseURLPost {
	t.Helper()
	var got fakeslack.ResponseURLPost
	e.waitFor(t, what, func() bool {
		for _, p := range e.slack.ResponseURLPosts() {
			if p.User == user && p.Status == 200 && ok(p) {
				got = p
				return true
			}
		}
		return false
	})
	return got
}

// /summarize: the ack says what it does, the last day's messages and their threads are read (not
// older ones), and the summary comes privately with a button; the button posts it to the channel,
// marked as a summary and naming who asked, and the private message says so.
func TestE2ESummarizePrivatelyThenPost(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text("- Alice proposed moving the release to **Friday**; Bob agreed.")
	})
	e.past("C1", "U2", "", "an old message about lunch", 50*time.Hour)
	parent := e.past("C1", "U1", "", "shall we move the release to Friday?", 3*time.Hour)
	e.past("C1", "U2", parent, "Friday works for me", 2*time.Hour)
	e.past("C1", "U1", "", "done, moved", time.Hour)

	e.slack.SlashCommand("C1", "U1", "/summarize", "")
	if got := e.commandAck(t); got != "Summarizing the last 24 hours of this channel…" {
		t.Errorf("ack %q", got)
	}
	sum := e.lastPrivate(t, "the private summary", "U1", func(p fakeslack.ResponseURLPost) bool { return len(p.Buttons()) > 0 })
	if sum.ResponseType != "ephemeral" || !strings.Contains(sum.Text, "3 messages and 1 thread") ||
		!strings.Contains(sum.Text, "Alice proposed moving the release to *Friday*") {
		t.Errorf("private summary %+v", sum)
	}
	reqs := e.llm.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests, want 1", len(reqs))
	}
	transcript := reqs[0].Messages[len(reqs[0].Messages)-1].Content
	for _, want := range []string{"shall we move the release to Friday?", "↳ [", "Friday works for me", "done, moved"} {
		if !strings.Contains(transcript, want) {
			t.Errorf("the model was not sent %q:\n%s", want, transcript)
		}
	}
	if strings.Contains(transcript, "lunch") {
		t.Errorf("a message older than a day was sent:\n%s", transcript)
	}
	if n := len(e.slack.Messages("C1")); n != 4 {
		t.Errorf("%d messages in the channel, want the 4 people's: the summary is private until posted", n)
	}

	// Only U1 sees it; U1 posts it.
	if _, err := e.slack.Click("C1", sum.TS, "U2", summarize.ActionPost); err == nil {
		t.Error("someone else could press the button of a private message")
	}
	e.click(t, "C1", sum.TS, "U1", summarize.ActionPost)
	var posted fakeslack.Message
	e.waitFor(t, "the summary in the channel", func() bool {
		for _, m := range e.slack.Messages("C1") {
			if m.BotID != "" {
				posted = m
				return true
			}
		}
		return false
	})
	if posted.ThreadTS != "" || !strings.HasPrefix(posted.Text, "*Summary of the last 24 hours in this channel*, asked for by user_u1:") ||
		!strings.Contains(posted.Text, "Alice proposed moving the release") {
		t.Errorf("posted %+v", posted)
	}
	if mk := markOf(t, posted); mk.Kind != "summary" || mk.Kind == convo.MarkAnswer {
		t.Errorf("posted summary's mark %+v, want kind summary (never replayed as an answer)", mk)
	}
	e.waitFor(t, "the private message replaced", func() bool {
		m, ok := e.slack.Private("C1", sum.TS, "U1")
		return ok && strings.Contains(m.Text, "Posted") && len(m.Buttons()) == 0
	})
}

// "/summarize 2" reads the last two messages, whatever their age.
func TestE2ESummarizeCount(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Two messages.") })
	e.past("C1", "U1", "", "the first", 100*time.Hour)
	e.past("C1", "U2", "", "the second", 90*time.Hour)
	e.past("C1", "U1", "", "the third", 80*time.Hour)
	e.slack.SlashCommand("C1", "U1", "/summarize", "2")
	if got := e.commandAck(t); got != "Summarizing the last 2 messages of this channel…" {
		t.Errorf("ack %q", got)
	}
	e.lastPrivate(t, "the summary", "U1", func(p fakeslack.ResponseURLPost) bool { return strings.Contains(p.Text, "Two messages.") })
	transcript := e.llm.ChatRequests()[0].Messages[1].Content
	if strings.Contains(transcript, "the first") || !strings.Contains(transcript, "the second") || !strings.Contains(transcript, "the third") {
		t.Errorf("transcript:\n%s\nwant the last two messages", transcript)
	}
}

// A history longer than CONTEXT_TOKENS: its older part is summarised in parts, each request
// within it, then the parts together; the last request carries that summary and the recent part in
// full; the person hears how it goes. A second /summarize of the same messages reuses the older
// part's summary (kept beside the threads' summaries): one request more.
func TestE2ESummarizeInParts(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"CONTEXT_TOKENS": "500"})
	var calls atomic.Int32
	e.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		switch p := r.Messages[len(r.Messages)-1].Content; {
		case strings.Contains(p, "two blocks"):
			return fakellm.Text("The whole week, in short.")
		case strings.HasPrefix(p, "These are summaries"):
			return fakellm.Text("The earlier days, combined.")
		}
		return fakellm.Text(fmt.Sprintf("Part summary %d.", calls.Add(1)))
	})
	for i := range 40 {
		e.past("C1", []string{"U1", "U2"}[i%2], "", fmt.Sprintf("message %02d about the migration of the billing database", i),
			time.Duration(100-i)*time.Hour)
	}
	e.slack.SlashCommand("C1", "U1", "/summarize", "5d")
	e.lastPrivate(t, "the summary", "U1", func(p fakeslack.ResponseURLPost) bool { return strings.Contains(p.Text, "The whole week") })
	reqs := e.llm.ChatRequests()
	parts := 0
	for i, r := range reqs {
		n := 0
		for _, m := range r.Messages {
			n += convo.EstimateTokens(m.Content)
		}
		if n > 500 {
			t.Errorf("request %d is %d tokens, over CONTEXT_TOKENS", i, n)
		}
		if strings.HasPrefix(r.Messages[len(r.Messages)-1].Content, "This is part ") {
			parts++
		}
	}
	final := reqs[len(reqs)-1].Messages[1].Content
	if parts < 3 || !strings.Contains(final, "The earlier days, combined.") || !strings.Contains(final, "message 39 ") {
		t.Errorf("%d parts of %d requests: want several, then their summary with the recent part:\n%s", parts, len(reqs), final)
	}
	e.lastPrivate(t, "the progress note", "U1", func(p fakeslack.ResponseURLPost) bool {
		return strings.Contains(p.Text, fmt.Sprintf("Summarizing 40 messages in %d parts", parts+1))
	})
	e.slack.SlashCommand("C1", "U2", "/summarize", "5d")
	e.lastPrivate(t, "the second summary", "U2", func(p fakeslack.ResponseURLPost) bool { return strings.Contains(p.Text, "The whole week") })
	if n := len(e.llm.ChatRequests()) - len(reqs); n != 1 {
		t.Errorf("the second summary made %d requests, want 1: the older part's summary is kept", n)
	}
}

// The shortcut on a thread's first message summarises the thread in it, like an answer; its
// Regenerate summarises again (not answering the first message as a question), in place.
func TestE2ESummarizeThreadShortcutAndRegenerate(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	var n atomic.Int32
	e.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "Summarize this thread") {
			return fakellm.Text(fmt.Sprintf("Summary number %d.", n.Add(1)))
		}
		return fakellm.Text("Use a token bucket.")
	})
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> how do we rate limit the API?")
	e.final(t, "C1", q, 1, 1)
	// Addressed to Alice: no follow-up answer.
	e.slack.PostUserMessage("C1", "U2", q, "<@U1> we'll take 50 a minute")
	e.quiet(t, "marker", 2)

	before := e.finished(t)
	if _, err := e.slack.MessageShortcut("C1", q, "U2", summarize.ShortcutThread); err != nil {
		t.Fatal(err)
	}
	msgs := e.final(t, "C1", q, 2, before+1)
	summary := msgs[1]
	if summary.Text != "Summary number 1." || buttonsOf(summary) != route.ActionRegenerate {
		t.Fatalf("summary %q with %q, want it in the thread with Regenerate", summary.Text, buttonsOf(summary))
	}
	reqs := e.llm.ChatRequests()
	last := reqs[2].Messages
	var context []string
	for _, m := range last[1:] {
		context = append(context, m.Role+": "+m.Content)
	}
	if len(context) != 4 || !strings.Contains(context[0], "how do we rate limit the API?") || context[1] != "assistant: Use a token bucket." ||
		!strings.Contains(context[2], "50 a minute") || !strings.Contains(context[3], "Summarize this thread") {
		t.Errorf("summary request %q: want the thread, then the instruction", context)
	}

	e.click(t, "C1", summary.TS, "U1", route.ActionRegenerate)
	e.waitFor(t, "the summary again", func() bool {
		m, _ := e.slack.Message("C1", summary.TS)
		return m.Text == "Summary number 2." && buttonsOf(m) == route.ActionRegenerate
	})
	reqs = e.llm.ChatRequests()
	if len(reqs) != 4 || !strings.Contains(reqs[3].Messages[len(reqs[3].Messages)-1].Content, "Summarize this thread") {
		t.Fatalf("%d requests; the last should summarise again", len(reqs))
	}
	for _, m := range reqs[3].Messages {
		if strings.Contains(m.Content, "Summary number 1.") {
			t.Errorf("the old summary was sent back to the model: %q", m.Content)
		}
	}
	if got := e.botReplies("C1", q); len(got) != 2 {
		t.Errorf("bot messages in the thread %q, want the answer and the one summary", got)
	}
}

// A person the access rules refuse gets the refusal, for the command and for the shortcut, and
// nothing is read or asked.
func TestE2ESummarizeRefused(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"DENY_USERS": "U3"})
	q := e.past("C1", "U1", "", "a message", time.Hour)
	e.slack.SlashCommand("C1", "U3", "/summarize", "")
	if got := e.commandAck(t); got != access.DefaultRefusal {
		t.Errorf("ack %q, want the refusal", got)
	}
	if _, err := e.slack.MessageShortcut("C1", q, "U3", summarize.ShortcutThread); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the refusal", func() bool { return len(e.privateTo("U3")) == 1 })
	if got := e.privateTo("U3")[0]; got != access.DefaultRefusal {
		t.Errorf("told %q, want the refusal", got)
	}
	settle()
	if n := len(e.llm.ChatRequests()); n != 0 {
		t.Errorf("%d chat requests, want none", n)
	}
	if n := e.slack.CallCount("conversations.history") + e.slack.CallCount("conversations.replies"); n != 0 {
		t.Errorf("%d reads, want none", n)
	}
}
