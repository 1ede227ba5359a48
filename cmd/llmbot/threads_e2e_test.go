package main

import (
	"strings"
	"sync"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// The thread cache end to end: answers take their thread from what the bot learnt from Slack's
// events and its own writes, and read Slack only when they cannot trust it.

// countedAnswers answers every chat request with "answer N" (N from 1) and keeps the requests.
func countedAnswers(e *e2e) func() []fakellm.ChatRequest {
	var mu sync.Mutex
	var n int
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fakellm.Text("answer " + string(rune('0'+n)))
	})
	return e.llm.ChatRequests
}

// lastRequestText is the text of every message of the last chat request.
func lastRequestText(t *testing.T, reqs []fakellm.ChatRequest) string {
	t.Helper()
	if len(reqs) == 0 {
		t.Fatal("no chat request")
	}
	var b strings.Builder
	for _, m := range reqs[len(reqs)-1].Messages {
		b.WriteString(m.Role + ": " + m.Content + "\n")
	}
	return b.String()
}

// TestE2EThreadCacheFollowUpsReadNothing: a mention starts a thread (no read), and follow-ups in it
// are answered with the earlier answers in context without any conversations.replies call.
func TestE2EThreadCacheFollowUpsReadNothing(t *testing.T) {
	e := startE2E(t, fakeslack.Config{}, nil)
	reqs := countedAnswers(e)
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> capital of France?")
	e.final(t, "C1", ts, 1, 1)
	e.slack.PostUserMessage("C1", "U1", ts, "and how many live there?")
	e.final(t, "C1", ts, 2, 2)
	e.slack.PostUserMessage("C1", "U2", ts, "and its river?")
	e.final(t, "C1", ts, 3, 3)
	text := lastRequestText(t, reqs())
	for _, want := range []string{"capital of France?", "assistant: answer 1", "how many live there?", "assistant: answer 2", "its river?"} {
		if !strings.Contains(text, want) {
			t.Errorf("the third request lacks %q:\n%s", want, text)
		}
	}
	if n := e.slack.CallCount("conversations.replies"); n != 0 {
		t.Errorf("%d conversations.replies calls, want none: the thread is known from events and writes", n)
	}
}

// TestE2EThreadCacheSeesEdits: a question edited between two answers is seen by the next one, from
// its message_changed event, without a read.
func TestE2EThreadCacheSeesEdits(t *testing.T) {
	e := startE2E(t, fakeslack.Config{}, nil)
	reqs := countedAnswers(e)
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> capital of Frnace?")
	e.final(t, "C1", ts, 1, 1)
	follow := e.slack.PostUserMessage("C1", "U1", ts, "and its size")
	e.final(t, "C1", ts, 2, 2)
	if !e.slack.EditUserMessage("C1", ts, "<@UBOT> capital of France?") || !e.slack.EditUserMessage("C1", follow, "and its area?") {
		t.Fatal("edit refused by the fake")
	}
	e.slack.PostUserMessage("C1", "U1", ts, "thanks, and the population?")
	e.final(t, "C1", ts, 3, 3)
	text := lastRequestText(t, reqs())
	for _, want := range []string{"capital of France?", "and its area?"} {
		if !strings.Contains(text, want) {
			t.Errorf("the request after the edits lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Frnace") || strings.Contains(text, "its size") {
		t.Errorf("the request after the edits shows the old texts:\n%s", text)
	}
	if n := e.slack.CallCount("conversations.replies"); n != 0 {
		t.Errorf("%d conversations.replies calls, want none", n)
	}
}

// TestE2EThreadCacheGapReads: after the Socket Mode connection dropped (events may have been
// missed meanwhile), the next answer reads its thread once, and the one after trusts it again.
func TestE2EThreadCacheGapReads(t *testing.T) {
	e := startE2E(t, fakeslack.Config{}, nil)
	countedAnswers(e)
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> capital of France?")
	e.final(t, "C1", ts, 1, 1)
	e.slack.DropConnections()
	e.waitFor(t, "the connection back", func() bool {
		c := e.slack.Connections()
		return c.Current == 1 && c.Total >= 2
	})
	e.slack.PostUserMessage("C1", "U1", ts, "and how many live there?")
	e.final(t, "C1", ts, 2, 2)
	if n := e.slack.CallCount("conversations.replies"); n != 1 {
		t.Errorf("%d conversations.replies calls after a gap, want 1", n)
	}
	e.slack.PostUserMessage("C1", "U1", ts, "and its river?")
	e.final(t, "C1", ts, 3, 3)
	if n := e.slack.CallCount("conversations.replies"); n != 1 {
		t.Errorf("%d conversations.replies calls, want still 1: the thread read after the gap is kept", n)
	}
}
