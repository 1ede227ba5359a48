package bot

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
)

// TestSubmitAnswersAsSlackWould: a request the bot makes itself goes through its route like a message
// from Slack; once the bot has stopped, Submit says so at once.
func TestSubmitAnswersAsSlackWould(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r := &fakeReplier{}
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 2})
	req := &route.Request{Kind: route.Message, Name: route.MessageRoute, Channel: "C1", User: "U1", Team: "T1",
		Reply: &route.ReplyRequest{Channel: "C1", ChannelType: "channel", User: "U1", Team: "T1", TS: "1700000000.000100",
			ThreadTS: "1700000000.000100", Text: "status?"}}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if err := h.bot.Submit(ctx, req); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	h.waitFor(t, "the submitted request answered", func() bool {
		got := r.requests()
		return len(got) == 1 && got[0].User == "U1" && got[0].Text == "status?"
	})
	if err := h.shutdown(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	start := time.Now()
	if err := h.bot.Submit(ctx, req); !errors.Is(err, ErrNotRunning) || time.Since(start) > time.Second {
		t.Fatalf("Submit after Run = %v after %v, want ErrNotRunning at once", err, time.Since(start))
	}
}
