package main

import (
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// TestE2EUsageBudgetsAndRedaction: the real binary against the fakes with a daily budget,
// redaction and an admin. An answer reaches the model with the asker's e-mail address as a
// placeholder, and is counted by the usage its server reports; once the budget is spent the next
// question is refused privately, saying which budget and when it renews, and the model is not
// asked; /usage tells the person their use, and the admin everyone's with its cost.
func TestE2EUsageBudgetsAndRedaction(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{
		"BUDGET_PERSON_DAILY": "300",
		"REDACT":              "all",
		"REDACT_PATTERNS":     "CUSTOMER=CUS-[0-9]{6}",
		"USAGE_ADMINS":        "U9",
		"PRICES":              "gpt-5.4-mini=0.25/2",
	})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"Noted: ", "[EMAIL 1]."}, Usage: &fakellm.Usage{PromptTokens: 250, CompletionTokens: 60, TotalTokens: 310}}
	})
	first := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> write to jane.doe@example.com about CUS-123456, card 4111 1111 1111 1111")
	msgs := e.final(t, "C1", first, 1, 1)
	if msgs[0].Text != "Noted: [EMAIL 1]." {
		t.Errorf("answer %q: the placeholder stays in the answer", msgs[0].Text)
	}
	sent := string(e.llm.ChatRequests()[0].Raw)
	for _, secret := range []string{"jane.doe@example.com", "CUS-123456", "4111 1111 1111 1111"} {
		if strings.Contains(sent, secret) {
			t.Errorf("%q reached the model: %s", secret, sent)
		}
	}
	if !strings.Contains(sent, "write to [EMAIL 1] about [CUSTOMER 1], card [CARD 1]") {
		t.Errorf("the request lacks the placeholders: %s", sent)
	}

	second := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> and another thing")
	e.waitFor(t, "the budget's note", func() bool { return len(e.privateTo("U1")) == 1 })
	if got := e.privateTo("U1")[0]; !strings.HasPrefix(got, "Your daily budget of 300 tokens is spent, so this was not sent to the model. It resets at 00:00 UTC") {
		t.Errorf("U1 told %q", got)
	}
	if n := len(e.llm.ChatRequests()); n != 1 {
		t.Errorf("%d chat requests, want 1: the spent budget's question must not reach the model", n)
	}
	if n := len(e.slack.BotReplies("C1", second)); n != 0 {
		t.Errorf("%d bot replies to the refused question, want none", n)
	}

	e.slack.SlashCommand("C1", "U1", "/usage", "")
	e.waitFor(t, "U1's usage", func() bool { return len(e.privateTo("U1")) == 2 })
	mine := e.privateTo("U1")[1]
	if !strings.Contains(mine, "Today: 310 tokens (250 in, 60 out); 0 of your 300 left") || strings.Contains(mine, "Everyone") {
		t.Errorf("U1's /usage: %q", mine)
	}
	e.slack.SlashCommand("C1", "U9", "/usage", "")
	e.waitFor(t, "the admin's usage", func() bool { return len(e.privateTo("U9")) == 1 })
	if all := e.privateTo("U9")[0]; !strings.Contains(all, "*Everyone this month*: 310 tokens") ||
		!strings.Contains(all, "<@U1> 310") || !strings.Contains(all, "`gpt-5.4-mini` 310") {
		t.Errorf("the admin's /usage: %q", all)
	}
}
