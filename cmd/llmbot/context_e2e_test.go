package main

import (
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
