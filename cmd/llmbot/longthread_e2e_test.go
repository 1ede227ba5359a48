package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/redistest"
)

// isSummaryRequest reports whether r asks for a long thread's (or period's) summary.
func isSummaryRequest(r fakellm.ChatRequest) bool {
	return len(r.Messages) > 0 && strings.Contains(r.Messages[0].Content, "Write a summary")
}

// TestReplicasShareALongThreadsSummary: two replicas over one Redis; a thread far over
// CONTEXT_TOKENS is answered on the first with a summary of its beginning, and a follow-up
// answered on the second reuses that summary (kept in Redis beside the thread's entry): one
// summary request in all.
func TestReplicasShareALongThreadsSummary(t *testing.T) {
	t.Parallel()
	// FOLLOW_UPS off: the notes are no questions, whenever their events come.
	rs := newReplicaSet(t, "REDIS_URL="+redistest.New(t).URL(), "CONTEXT_TOKENS=1000", "FOLLOW_UPS=false")
	a, b := rs.start(), rs.start()
	var summaries, answers atomic.Int32
	rs.fl.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		if isSummaryRequest(r) {
			summaries.Add(1)
			return fakellm.Text("The thread plans the release of version 9.")
		}
		return fakellm.Text(fmt.Sprintf("answer %d", answers.Add(1)))
	})
	parent := rs.fs.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "We plan the release of version 9 here."})
	for i := range 30 {
		rs.fs.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", ThreadTS: parent, Text: fmt.Sprintf("note %02d: %s", i, strings.Repeat("details ", 12))})
	}
	rs.followUp(a, parent, "<@UBOT> when do we ship?")
	rs.wait("the first answer", func() bool { return strings.Contains(rs.answer(parent), "answer 1") })
	rs.followUp(b, parent, "<@UBOT> and who signs off?")
	rs.wait("the follow-up's answer", func() bool { return strings.Contains(rs.answer(parent), "answer 2") })
	if n := summaries.Load(); n != 1 {
		t.Errorf("%d summary requests, want 1: the second replica reuses the first's", n)
	}
	text := lastRequestText(t, rs.fl.ChatRequests())
	for _, want := range []string{"The thread plans the release of version 9.", "who signs off?"} {
		if !strings.Contains(text, want) {
			t.Errorf("the follow-up's request lacks %q:\n%s", want, text)
		}
	}
	done := func(p *replica) int { return strings.Count(p.logs.String(), `"msg":"reply done"`) }
	rs.wait("each replica's answer done", func() bool { return done(a)+done(b) == 2 })
	if done(a) != 1 || done(b) != 1 {
		t.Errorf("the replicas answered %d and %d questions, want one each", done(a), done(b))
	}
}

// TestE2EVeryLongThreadReadBounded: a thread far over what a read keeps (700 replies, CONTEXT_TOKENS
// 1000) is read once, page by page, as its beginning and its newest replies; the summary request
// gets the beginning (the parent and the first replies) with a note for those left out in between,
// the answer's request stays within CONTEXT_TOKENS with the summary and the newest replies, and a
// follow-up reuses both the thread (no read) and the summary.
func TestE2EVeryLongThreadReadBounded(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"CONTEXT_TOKENS": "1000", "FOLLOW_UPS": "false"})
	var summaries atomic.Int32
	e.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		if isSummaryRequest(r) {
			summaries.Add(1)
			return fakellm.Text("The thread plans the release of version 9.")
		}
		return fakellm.Text("Friday.")
	})
	const replies = 700
	start := time.Now().Add(-time.Duration(replies+1) * time.Second)
	parent := e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "We plan the release of version 9 here.", Time: start})
	for i := range replies {
		e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: []string{"U1", "U2"}[i%2], ThreadTS: parent, Time: start.Add(time.Duration(i+1) * time.Second),
			Text: fmt.Sprintf("note %03d: %s", i, strings.Repeat("details ", 36))})
	}
	e.slack.PostUserMessage("C1", "U1", parent, "<@UBOT> when do we ship?")
	e.final(t, "C1", parent, 1, 1)
	reqs := e.llm.ChatRequests()
	if len(reqs) != 2 || !isSummaryRequest(reqs[0]) {
		t.Fatalf("%d chat requests, want the summary's, then the answer's", len(reqs))
	}
	sum, answer := requestText(reqs[0]), requestText(reqs[1])
	for _, want := range []string{"We plan the release of version 9 here.", "note 000:", "note 001:", "messages in between are left out]"} {
		if !strings.Contains(sum, want) {
			t.Errorf("the summary request lacks %q:\n%.3000s", want, sum)
		}
	}
	for _, want := range []string{"The thread plans the release of version 9.", fmt.Sprintf("note %03d:", replies-1), "when do we ship?"} {
		if !strings.Contains(answer, want) {
			t.Errorf("the answer's request lacks %q:\n%s", want, answer)
		}
	}
	for i, r := range reqs {
		if n := requestTokens(r); n > 1000 {
			t.Errorf("request %d is %d tokens, over CONTEXT_TOKENS", i, n)
		}
	}
	pages := e.slack.CallCount("conversations.replies")
	if pages < 4 {
		t.Errorf("%d conversations.replies pages, want the whole thread paged (4 at least)", pages)
	}
	e.slack.PostUserMessage("C1", "U1", parent, "<@UBOT> and who signs off?")
	e.final(t, "C1", parent, 2, 2)
	if n := e.slack.CallCount("conversations.replies"); n != pages {
		t.Errorf("%d conversations.replies calls after the follow-up, want still %d: the thread is kept", n, pages)
	}
	if n := summaries.Load(); n != 1 {
		t.Errorf("%d summary requests, want 1: the follow-up reuses it", n)
	}
}

// requestTokens is a chat request's size as convo estimates it.
func requestTokens(r fakellm.ChatRequest) int {
	n := 0
	for _, m := range r.Messages {
		n += convo.EstimateTokens(m.Content)
	}
	return n
}
