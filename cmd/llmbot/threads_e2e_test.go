package main

import (
	"strings"
	"sync"
	"testing"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/redistest"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// followUp posts a follow-up in C1's thread ts whose events go to replica p.
func (rs *replicaSet) followUp(p *replica, ts, text string) {
	rs.t.Helper()
	if _, err := rs.fs.Via(p.conn).Post(fakeslack.UserMessage{Channel: "C1", User: "U1", ThreadTS: ts, Text: text}); err != nil {
		rs.t.Fatal(err)
	}
}

// TestReplicasShareTheThreadCache: a follow-up that lands on the replica that did not answer the
// thread finds the thread in Redis, answered with the first answer in context and no read; while
// Redis is away, the follow-ups read their threads, and once it is back the cache is trusted again
// only after one read.
func TestReplicasShareTheThreadCache(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rs := newReplicaSet(t, "REDIS_URL="+srv.URL())
	a, b := rs.start(), rs.start()
	var mu sync.Mutex
	n := 0
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fakellm.Text("answer " + string(rune('0'+n)))
	})
	ts := rs.ask(a, "capital of France?")
	rs.wait("the first answer", func() bool { return strings.Contains(rs.answer(ts), "answer 1") })
	rs.followUp(b, ts, "and how many live there?")
	rs.wait("the follow-up's answer", func() bool { return strings.Contains(rs.answer(ts), "answer 2") })
	reqs := rs.fl.ChatRequests()
	if text := lastRequestText(t, reqs); !strings.Contains(text, "assistant: answer 1") {
		t.Errorf("the follow-up on the other replica lacks the first answer:\n%s", text)
	}
	if got := rs.fs.CallCount("conversations.replies"); got != 0 {
		t.Errorf("%d conversations.replies calls, want none: the thread is in Redis", got)
	}

	srv.Stop()
	rs.followUp(a, ts, "and its river?")
	rs.wait("an answer during the outage", func() bool { return strings.Contains(rs.answer(ts), "answer 3") })
	if got := rs.fs.CallCount("conversations.replies"); got != 1 {
		t.Errorf("%d conversations.replies calls during the outage, want 1: nothing is held while Redis is away", got)
	}
	srv.Restart()
	rs.wait("the replicas back on Redis", func() bool {
		return strings.Contains(a.logs.String(), "Redis answers again") && strings.Contains(b.logs.String(), "Redis answers again")
	})
	for i, p := range []*replica{b, a} {
		rs.followUp(p, ts, "and after?")
		want := "answer " + string(rune('4'+i))
		rs.wait(want, func() bool { return strings.Contains(rs.answer(ts), want) })
	}
	if got := rs.fs.CallCount("conversations.replies"); got != 2 {
		t.Errorf("%d conversations.replies calls in all, want 2: one during the outage, one after it", got)
	}
	if text := lastRequestText(t, rs.fl.ChatRequests()); !strings.Contains(text, "assistant: answer 4") {
		t.Errorf("the last follow-up lacks the answer before it:\n%s", text)
	}
}

// TestE2EThreadCacheStreamedAnswers: in the agent pane (a DM, answers streamed natively) the
// streamed answer is recorded as its stream wrote it, so the follow-up in its thread has it in
// context without a read.
func TestE2EThreadCacheStreamedAnswers(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"REPLY_MODE": "stream"})
	reqs := countedAnswers(e)
	ts := e.slack.PostUserMessage("D1", "U1", "", "capital of France?")
	e.final(t, "D1", ts, 1, 1)
	e.slack.PostUserMessage("D1", "U1", ts, "and how many live there?")
	e.final(t, "D1", ts, 2, 2)
	text := lastRequestText(t, reqs())
	for _, want := range []string{"capital of France?", "assistant: answer 1", "how many live there?"} {
		if !strings.Contains(text, want) {
			t.Errorf("the follow-up's request lacks %q:\n%s", want, text)
		}
	}
	if n := e.slack.CallCount("conversations.replies") + e.slack.CallCount("conversations.history"); n != 0 {
		t.Errorf("%d thread reads, want none", n)
	}
	if n := len(e.slack.CallsTo("chat.startStream")); n != 2 {
		t.Errorf("%d chat.startStream calls, want the two answers streamed", n)
	}
}

// TestE2EThreadCacheDMHistory: without the agent pane a DM is answered at its top level, with the
// DM's latest messages as context: read once, then known from the events and the bot's writes.
func TestE2EThreadCacheDMHistory(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"AGENT_VIEW": "false", "REPLY_MODE": "edit"})
	reqs := countedAnswers(e)
	answers := func() int {
		n := 0
		for _, m := range e.slack.Messages("D1") {
			if m.BotID != "" && markOf(t, m).Kind == convo.MarkAnswer {
				n++
			}
		}
		return n
	}
	e.slack.PostUserMessage("D1", "U1", "", "capital of France?")
	e.waitFor(t, "the first answer", func() bool { return answers() == 1 && e.finished(t) == 1 })
	e.slack.PostUserMessage("D1", "U1", "", "and how many live there?")
	e.waitFor(t, "the second answer", func() bool { return answers() == 2 && e.finished(t) == 2 })
	text := lastRequestText(t, reqs())
	for _, want := range []string{"capital of France?", "assistant: answer 1", "how many live there?"} {
		if !strings.Contains(text, want) {
			t.Errorf("the second request lacks %q:\n%s", want, text)
		}
	}
	if n := e.slack.CallCount("conversations.history"); n != 1 {
		t.Errorf("%d conversations.history calls, want 1: the DM is known after its first read", n)
	}
}
