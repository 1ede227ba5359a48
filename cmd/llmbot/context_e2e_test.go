package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// TestE2EMentionUnderAnotherAppsMessageSeesIt: an alert posted by another app (PagerDuty, GitHub, a
// CI bot) is the parent of a thread; a person asks "@bot what does this alert mean?". With the
// defaults (ANSWER_BOTS=false: the bot does not answer other bots) the alert must still be in the
// context: answering bots and reading them are different things.
func TestE2EMentionUnderAnotherAppsMessageSeesIt(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("It means the disk is full.") })
	alert := e.slack.Post(fakeslack.UserMessage{Channel: "C1", User: "U0ALERT", BotID: "B0ALERT",
		Text: "CRITICAL: db-7 disk usage 98% (/var/lib/postgres)"})
	e.slack.PostUserMessage("C1", "U1", alert, "<@UBOT> what does this alert mean?")
	e.final(t, "C1", alert, 1, 1)
	reqs := e.llm.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests, want 1", len(reqs))
	}
	var all []string
	for _, m := range reqs[0].Messages {
		all = append(all, m.Role+": "+m.Content)
	}
	if !strings.Contains(strings.Join(all, "\n"), "db-7 disk usage 98%") {
		t.Errorf("the alert the question is about is not in the context:\n%s", strings.Join(all, "\n"))
	}
}

// TestE2ELongThreadSummarised: a thread far over CONTEXT_TOKENS is answered with a summary of its
// oldest messages, made by the model first, and its recent messages in full.
func TestE2ELongThreadSummarised(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"CONTEXT_TOKENS": "1000"})
	e.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		if len(r.Messages) > 0 && strings.Contains(r.Messages[0].Content, "Write a summary") {
			return fakellm.Text("The thread plans the release of version 9.")
		}
		return fakellm.Text("Friday.")
	})
	parent := e.slack.PostUserMessage("C1", "U1", "", "We plan the release of version 9 here.")
	for i := range 30 {
		e.slack.PostUserMessage("C1", "U1", parent, fmt.Sprintf("note %02d: %s", i, strings.Repeat("details ", 12)))
	}
	e.slack.PostUserMessage("C1", "U1", parent, "<@UBOT> when do we ship?")
	// The notes without a mention are events the bot looks at and leaves: only the answer is done.
	e.waitFor(t, "the answer", func() bool { return strings.Contains(e.logs.String(), `"msg":"reply done"`) })
	if msgs := e.slack.BotReplies("C1", parent); len(msgs) != 1 || !strings.Contains(msgs[0].Text, "Friday.") {
		t.Fatalf("bot messages in the thread = %+v, want the answer", msgs)
	}
	reqs := e.llm.ChatRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests, want 2 (the summary, the answer)", len(reqs))
	}
	var all []string
	for _, m := range reqs[1].Messages {
		all = append(all, m.Role+": "+m.Content)
	}
	got := strings.Join(all, "\n")
	for _, want := range []string{"a summary of the earlier messages", "The thread plans the release of version 9.", "note 29:", "when do we ship?"} {
		if !strings.Contains(got, want) {
			t.Errorf("the answer's request lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "We plan the release of version 9 here.") {
		t.Errorf("the thread's beginning is in full, not summarised:\n%s", got)
	}
}
