package main

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

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
