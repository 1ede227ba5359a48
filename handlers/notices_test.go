package handlers

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/pace"
)

// noticesAndReplies returns Notices and Replies over one fake Slack, given the same Budgets as
// cmd/llmbot gives them, with chat.postEphemeral at perMinute and burst.
func noticesAndReplies(t *testing.T, perMinute float64, burst int) (*gatewaytest.Slack, *gateway.Notices, *Replies) {
	fs := gatewaytest.NewSlack()
	b := gateway.Budgets{Ephemerals: pace.NewBucket(perMinute, burst)}
	return fs, gateway.NewNotices(fs, b), NewReplies(fs, fs, fs, fs, &llmtest.Chat{}, zaptest.NewLogger(t), ReplyOptions{Budgets: b})
}

// The bot's notices (busy, place in line, refusals) and the replies' private notes take their turns
// in one chat.postEphemeral budget: a notice that took the last token makes an answer's
// "not answered" note wait for the next one.
func TestNoticesTakeTheRepliesEphemeralTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs, n, r := noticesAndReplies(t, 60, 1) // one a second
		start := time.Now()
		if err := n.Ephemeral(t.Context(), "C1", "U2", "", "busy"); err != nil {
			t.Fatalf("notice: %v", err)
		}
		if err := r.paced.Ephemeral(t.Context(), gateway.InterimRetry, time.Time{}, "C1", "U1", "T1", textNotAnswered); err != nil {
			t.Fatalf("the reply's note: %v", err)
		}
		if took := time.Since(start); took < time.Second {
			t.Errorf("the two notes took %v, want at least 1s: they took tokens from two budgets", took)
		}
		if n := fs.Count("ephemeral"); n != 2 {
			t.Errorf("%d ephemerals, want 2", n)
		}
	})
}

// A 429 that a notice meets pauses the one budget for the answers' notes too, and the notice is
// sent again after its Retry-After (the one 429 loop, Writer.Do).
func TestNoticesRideOutA429ForEveryNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs, n, r := noticesAndReplies(t, 600, 10)
		const retryAfter = 5 * time.Second
		fs.EphErr = func(n int, _ gatewaytest.Call) error {
			if n == 1 {
				return &slack.RateLimitedError{RetryAfter: retryAfter}
			}
			return nil
		}
		start := time.Now()
		noticed := make(chan error, 1)
		go func() { noticed <- n.Ephemeral(context.Background(), "C1", "U2", "", "busy") }()
		synctest.Wait() // the notice met the 429 and waits it out
		if err := r.paced.Ephemeral(t.Context(), gateway.InterimRetry, time.Time{}, "C1", "U1", "T1", textNotAnswered); err != nil {
			t.Fatalf("the reply's note: %v", err)
		}
		if took := time.Since(start); took < retryAfter {
			t.Errorf("the reply's note went after %v, within the notice's Retry-After of %v", took, retryAfter)
		}
		if err := <-noticed; err != nil {
			t.Errorf("notice: %v, want it sent after the Retry-After", err)
		}
		if n := fs.Count("ephemeral"); n != 3 {
			t.Errorf("%d ephemeral calls, want 3 (the refused notice, it again, the reply's note)", n)
		}
	})
}
