package handlers

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/slackmd"
)

// Slack answers chat.update with 429 (Retry-After: 1) for 45 s while a short answer streams: the
// final edit waits out every Retry-After (finalRateLimited) and the answer stands, not "Thinking…".
func TestFinalEditOutlastsALongRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"The ", "whole ", "answer."}, 100*time.Millisecond), testOptions())
		t0 := time.Now()
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if time.Since(t0) < 45*time.Second {
				return &slack.RateLimitedError{RetryAfter: time.Second}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply returned after %v: %v (%d chat.update calls)", time.Since(t0), err, len(rt.slack.CallsOf("update")))
		if got := rt.texts(); len(got) != 1 || got[0] != "The whole answer." {
			t.Errorf("thread shows %q once Slack stopped rate limiting at +45s, want the answer %q", got, "The whole answer.")
		}
	})
}

// A two-part answer while chat.update is rate limited (429, Retry-After: 1) for 45 s, chat.postMessage
// working: the thread ends with the answer's parts in order, the first one included.
func TestMultiPartFinalKeepsItsFirstPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		md := a + "\n\n" + b
		rt := newReplyTest(t, llmtest.Deltas(llmtest.Words(md, 200), 100*time.Millisecond), testOptions())
		t0 := time.Now()
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if time.Since(t0) < 45*time.Second {
				return &slack.RateLimitedError{RetryAfter: time.Second}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		want := slackmd.Split(md, slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)
		got := rt.texts()
		for i, m := range got {
			t.Logf("message %d (%d chars): %q ...", i, len(m), m[:min(60, len(m))])
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("thread shows %d messages starting %q, want the %d parts of the answer", len(got), firstChars(got), len(want))
		}
	})
}

func firstChars(ms []string) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m[:min(30, len(m))])
	}
	return out
}

// Someone deletes the bot's reply (its first message) while a two-part answer streams: the final
// write does not post the second half alone, without its beginning.
func TestDeletedFirstPartIsNotContinued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		md := a + "\n\n" + b
		rt := newReplyTest(t, llmtest.Deltas(llmtest.Words(md, 100), 100*time.Millisecond), testOptions())
		time.AfterFunc(500*time.Millisecond, func() {
			fs := rt.slack
			fs.Mu.Lock()
			defer fs.Mu.Unlock()
			fs.Msgs = fs.Msgs[1:] // the reply (placeholder, now the first part) is deleted
		})
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v", err)
		got := rt.texts()
		for i, m := range got {
			t.Logf("message %d (%d chars): %q ...", i, len(m), m[:min(60, len(m))])
		}
		all := strings.Join(got, "\n")
		if strings.Contains(all, "Bravo sentence 0 of") && !strings.Contains(all, "Alpha sentence 0 of") {
			t.Errorf("the thread shows the answer's second part without its first")
		}
	})
}

// hangingUpdater is a Slack whose chat.update does not answer between from and to (a network
// partition or an overloaded Slack): the call ends only when its context does, with the context's
// error, as an HTTP client's does.
type hangingUpdater struct {
	*gatewaytest.Slack
	from, to time.Time
}

func (h hangingUpdater) Update(ctx context.Context, channel, ts string, m gateway.Msg) error {
	if now := time.Now(); !now.Before(h.from) && now.Before(h.to) {
		<-ctx.Done()
		return fmt.Errorf("Post \"https://slack.com/api/chat.update\": %w", ctx.Err())
	}
	return h.Slack.Update(ctx, channel, ts, m)
}

// chat.update hangs for 35 s (each interim call gives up after gateway.WriteCallTimeout, 10 s) early in a
// 100 s answer: the timeouts are transient, so the writer backs off and edits again once Slack
// answers, and the message does not freeze for the rest of the answer.
func TestInterimEditsResumeAfterSlackHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		chat := &llmtest.Chat{Steps: llmtest.Deltas(numbered(100), time.Second)}
		t0 := time.Now()
		r := NewReplies(fs, hangingUpdater{fs, t0.Add(2 * time.Second), t0.Add(37 * time.Second)}, fs, fs, chat, nil, testOptions())
		req := testRequest()
		mustNoErr(t, r.Reply(t.Context(), req))
		var after int
		for _, u := range fs.CallsOf("update") {
			if d := u.At.Sub(t0); d >= 40*time.Second && d < 99*time.Second {
				after++
			}
		}
		if after == 0 {
			t.Errorf("no edit between +40s (Slack answering again) and +99s while the answer streamed until +100s: the message froze")
		}
		if ms := fs.BotMessages(testTS); len(ms) != 1 || !strings.HasSuffix(ms[0].Text, "word99") {
			t.Errorf("final = %+v, want the whole answer", ms)
		}
	})
}

// headerTimeout is net/http's error when a server sends no response headers in time
// (Transport.ResponseHeaderTimeout, 30 s in the bot's Slack client): like net/http's own, it
// matches context.DeadlineExceeded.
type headerTimeout struct{}

func (headerTimeout) Error() string        { return "net/http: timeout awaiting response headers" }
func (headerTimeout) Timeout() bool        { return true }
func (headerTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// slowSlackUpdater is a Slack whose chat.update sends no response headers between from and to: the
// HTTP client gives up after 30 s (ResponseHeaderTimeout) with net/http's timeout error.
type slowSlackUpdater struct {
	*gatewaytest.Slack
	from, to time.Time
}

func (s slowSlackUpdater) Update(ctx context.Context, channel, ts string, m gateway.Msg) error {
	if now := time.Now(); !now.Before(s.from) && now.Before(s.to) {
		t := time.NewTimer(30 * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return fmt.Errorf("chat.update: %w", &url.Error{Op: "Post", URL: "https://slack.com/api/chat.update", Err: headerTimeout{}})
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Slack.Update(ctx, channel, ts, m)
}

// Slack stops answering chat.update for 40 s just as an answer ends (requests time out rather than
// get a 5xx): net/http's header timeout is transient, so the final edit retries and the answer
// stands once Slack answers again.
func TestFinalEditRidesOutSlackTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		chat := &llmtest.Chat{Steps: llmtest.Deltas([]string{"The ", "whole ", "answer."}, 100*time.Millisecond)}
		t0 := time.Now()
		r := NewReplies(fs, slowSlackUpdater{fs, t0.Add(150 * time.Millisecond), t0.Add(40 * time.Second)}, fs, fs, chat, nil, testOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		if ms := fs.BotMessages(testTS); len(ms) != 1 || ms[0].Text != "The whole answer." {
			t.Errorf("thread shows %+v after Slack answered again at +40s, want the answer %q", ms, "The whole answer.")
		}
	})
}
