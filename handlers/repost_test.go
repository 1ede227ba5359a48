package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/route"
)

// twoPartSteps streams paragraph A and the start of B at once, then the rest of B 5 s later: the
// answer's second message shows part of B while it streams.
func twoPartSteps(a, b string) []llmtest.Step {
	return []llmtest.Step{
		{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: a + "\n\n" + b[:2000]}},
		{Wait: 5 * time.Second, Chunk: llm.Chunk{Content: b[2000:]}},
		{Chunk: llm.Chunk{FinishReason: "stop"}},
	}
}

// A two-part answer whose second message's final edit is refused (or chat.update stays down beyond
// gateway.FinalOutage): the message is deleted and its part posted anew, so the start of paragraph B shows
// once in the thread and once in what the next question sees.
func TestRefusedLastPartPostedAnewRepeatsNothing(t *testing.T) {
	t.Run("cant_update_message", func(t *testing.T) {
		testRefusedLastPart(t, func(since time.Duration, ts string) error {
			if ts == "1700000000.000102" && since >= 4*time.Second { // the answer's second message
				return slack.SlackErrorResponse{Err: "cant_update_message"}
			}
			return nil
		})
	})
	t.Run("chat.update down beyond finalOutage", func(t *testing.T) {
		testRefusedLastPart(t, func(since time.Duration, ts string) error {
			if since >= 4*time.Second && since < 4*time.Minute {
				return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
			}
			return nil
		})
	})
}

func testRefusedLastPart(t *testing.T, refuse func(since time.Duration, ts string) error) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := twoPartSteps(a, b)
		rt := newReplyTest(t, steps, testOptions())
		t0 := time.Now()
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error { return refuse(time.Since(t0), c.TS) }
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v", err)
		got := rt.texts()
		for i, m := range got {
			t.Logf("message %d (%d chars): %q ...", i, len(m), m[:min(60, len(m))])
		}
		if n := strings.Count(strings.Join(got, "\n"), "Bravo sentence 0 of"); n != 1 {
			t.Errorf("the second paragraph's first sentence shows %d times in the thread, want once", n)
		}
		as := assistantMessages(askAgain(t, rt))
		if len(as) != 1 {
			t.Fatalf("the answer is replayed as %d assistant messages, want 1", len(as))
		}
		if n := strings.Count(as[0], "Bravo sentence 0 of"); n != 1 {
			t.Errorf("the next question sees the second paragraph's first sentence %d times, want once", n)
		}
	})
}

// A two-part answer whose second message refuses its final edit (cant_update_message): its part is
// posted anew, and the old message cannot be deleted (chat.delete answers 503 through its tries). The
// thread shows the part twice (never lost), and the next question sees the answer once, whole: the
// new part names the one it replaces (Mark.Replaces), which Build skips.
func TestUndeletedRefusedPartReplayedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := twoPartSteps(a, b)
		rt := newReplyTest(t, steps, testOptions())
		t0 := time.Now()
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if c.TS == "1700000000.000102" && time.Since(t0) >= 4*time.Second {
				return slack.SlackErrorResponse{Err: "cant_update_message"}
			}
			return nil
		}
		rt.slack.DeleteErr = func(n int, c gatewaytest.Call) error { // chat.delete down meanwhile
			return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v", err)
		logCalls(t, rt.slack, t0)
		all := strings.Join(rt.texts(), "\n")
		if last := b[strings.LastIndex(b, "Bravo sentence"):]; !strings.Contains(all, last) {
			t.Fatalf("the thread lacks the answer's end %q: not the case under test", last)
		}
		rt.slack.Mu.Lock()
		rt.slack.DeleteErr = nil
		rt.slack.Mu.Unlock()
		as := assistantMessages(askAgain(t, rt))
		if len(as) != 1 {
			t.Fatalf("the answer is replayed as %d assistant messages, want 1", len(as))
		}
		if n := strings.Count(as[0], "Bravo sentence 0 of"); n != 1 {
			t.Errorf("the next question sees the second part's first sentence %d times, want once", n)
		}
	})
}

// chat.update is down (503) for over gateway.FinalOutage as an answer ends: the last message's part is posted
// anew (and the message deleted); that post meets one more 503 and Slack answers the next try: the
// part stands, whether the message was a later part or the only one (the placeholder).
func TestRepostAfterOutageSurvivesOneMore503(t *testing.T) {
	a, b := longTwoPartAnswer()
	for _, tc := range []struct {
		name  string
		steps []llmtest.Step
		end   string // the answer's end, which must stand
	}{
		{"later part", twoPartSteps(a, b), b[strings.LastIndex(b, "Bravo sentence"):]},
		{"only message", llmtest.Deltas([]string{"The whole ", "answer."}, 2500*time.Millisecond), "The whole answer."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, tc.steps, testOptions())
				t0 := time.Now()
				rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
					if since := time.Since(t0); since >= 4*time.Second && since < 10*time.Minute {
						return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
					}
					return nil
				}
				failed := false
				rt.slack.PostErr = func(n int, c gatewaytest.Call) error {
					if time.Since(t0) > 2*time.Minute && !failed { // the re-post's first try
						failed = true
						return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
					}
					return nil
				}
				err := rt.r.Reply(t.Context(), rt.req)
				t.Logf("Reply = %v after %v", err, time.Since(t0))
				logCalls(t, rt.slack, t0)
				if all := strings.Join(rt.texts(), "\n"); !strings.Contains(all, tc.end) {
					t.Errorf("the thread (%d messages) lacks the answer's end %q after one 503 on the re-post", len(rt.texts()), tc.end)
				}
				if !failed {
					t.Error("no re-post met the 503: the case under test did not happen")
				}
			})
		})
	}
}

// chat.update is down (503) beyond gateway.FinalOutage as a two-part answer ends while Slack shows only the
// start of part 1 (the placeholder): part 1 is posted anew (the re-post's own 10 s window) and the
// placeholder deleted; the post of part 2 then meets one 503, as the re-post in
// TestRepostAfterOutageSurvivesOneMore503 does. Slack is back for posts (the re-post just went
// through): part 2 is tried again and stands, with the answer's end.
func TestPostAfterRepostSurvivesOne503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := []llmtest.Step{
			{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "Intro. "}},
			{Wait: 5 * time.Second, Chunk: llm.Chunk{Content: a + "\n\n" + b}},
			{Chunk: llm.Chunk{FinishReason: "stop"}},
		}
		rt := newReplyTest(t, steps, testOptions())
		t0 := time.Now()
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if since := time.Since(t0); since >= 4*time.Second && since < 10*time.Minute {
				return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
			}
			return nil
		}
		rt.slack.PostErr = func(n int, c gatewaytest.Call) error {
			if n == 3 { // 1: placeholder, 2: part 1 anew, 3: part 2's first try
				return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, rt.slack, t0)
		all := strings.Join(rt.texts(), "\n")
		last := b[strings.LastIndex(b, "Bravo sentence"):]
		if !strings.Contains(all, last) {
			t.Errorf("the thread lacks the answer's end %q: part 2's post was not tried again after one 503 (%d posts); thread: %d messages", last, len(rt.slack.CallsOf("post")), len(rt.texts()))
		}
	})
}

// slowDeleter is a Slack whose chat.delete deletes the message but answers after net/http's timeout
// (an error wrapping context.DeadlineExceeded), as a slow Slack does.
type slowDeleter struct{ *gatewaytest.Slack }

func (s slowDeleter) Delete(ctx context.Context, channel, ts string) error {
	if err := s.Slack.Delete(ctx, channel, ts); err != nil {
		return err
	}
	return timedOut("chat.delete")
}

// A two-part answer whose second message refuses its final edit (cant_update_message): its part is
// posted anew and the message deleted; Slack deletes it but the answer times out. The part stands in
// the thread, with Regenerate.
func TestTimedOutDeleteKeepsTheLastPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := twoPartSteps(a, b)
		fs := newQuestionSlack()
		chat := &llmtest.Chat{Steps: steps}
		t0 := time.Now()
		fs.UpdateErr = func(n int, c gatewaytest.Call) error {
			if c.TS == "1700000000.000102" && time.Since(t0) >= 4*time.Second { // the answer's second message
				return slack.SlackErrorResponse{Err: "cant_update_message"}
			}
			return nil
		}
		opt := testOptions()
		opt.Buttons = true
		r := NewReplies(fs, slowDeleter{fs}, fs, fs, chat, nil, opt)
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		var all strings.Builder
		regen := false
		for i, m := range fs.BotMessages(testTS) {
			t.Logf("message %d: buttons %q mark %+v text %.60q", i, buttonKey(m.Buttons), m.Mark, m.Text)
			all.WriteString(m.Text + "\n")
			regen = regen || buttonKey(m.Buttons) == route.ActionRegenerate
		}
		last := b[strings.LastIndex(b, "Bravo sentence"):]
		if !strings.Contains(all.String(), last) {
			t.Errorf("the thread lacks the answer's end %q (its message was deleted, its part never posted anew)", last)
		}
		if !regen {
			t.Errorf("no message of the finished answer carries Regenerate")
		}
	})
}

// onceHangingDeleter is a Slack in trouble for one call: the first chat.delete hangs until net/http's
// header timeout (30 s) and fails with it without deleting; later ones work.
type onceHangingDeleter struct {
	*gatewaytest.Slack
	tries *int
}

func (s onceHangingDeleter) Delete(ctx context.Context, channel, ts string) error {
	*s.tries++
	if *s.tries > 1 {
		return s.Slack.Delete(ctx, channel, ts)
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("Post \"https://slack.com/api/chat.delete\": %w", ctx.Err())
	}
	return fmt.Errorf("Post \"https://slack.com/api/chat.delete\": net/http: timeout awaiting response headers: %w", context.DeadlineExceeded)
}

// A two-part answer whose second message refuses its final edit (cant_update_message): its part is
// posted anew, and the old message is deleted. The first chat.delete hangs and times out (Slack
// did not delete it); "a delete that timed out is repeated within another 10 s" (docs/design.md),
// and the next try works: part 2 shows once.
func TestTimedOutDeleteIsRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := twoPartSteps(a, b)
		fs := newQuestionSlack()
		chat := &llmtest.Chat{Steps: steps}
		t0 := time.Now()
		fs.UpdateErr = func(n int, c gatewaytest.Call) error {
			if c.TS == "1700000000.000102" && time.Since(t0) >= 4*time.Second { // the answer's second message
				return slack.SlackErrorResponse{Err: "cant_update_message"}
			}
			return nil
		}
		tries := 0
		r := NewReplies(fs, onceHangingDeleter{fs, &tries}, fs, fs, chat, nil, testOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v; %d chat.delete tries", err, time.Since(t0), tries)
		logCalls(t, fs, t0)
		var all strings.Builder
		for i, m := range fs.BotMessages(testTS) {
			t.Logf("message %d: mark %+v text %.60q", i, m.Mark, m.Text)
			all.WriteString(m.Text + "\n")
		}
		first := "Bravo sentence 0 of the second paragraph."
		if n := strings.Count(all.String(), first); n != 1 {
			t.Errorf("part 2's first sentence shows %d times, want once: the delete that timed out was not repeated (%d chat.delete tries)", n, tries)
		}
	})
}

// hangingDeleter is a Slack whose chat.delete hangs until net/http's header timeout (30 s) and
// fails with it, without deleting: a Slack in trouble.
type hangingDeleter struct {
	*gatewaytest.Slack
	tries *int
}

func (s hangingDeleter) Delete(ctx context.Context, channel, ts string) error {
	*s.tries++
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return fmt.Errorf("Post \"https://slack.com/api/chat.delete\": net/http: timeout awaiting response headers: %w", context.DeadlineExceeded)
}

// chat.update is down (503) beyond gateway.FinalOutage as a two-part answer ends, and chat.delete hangs and
// times out: the last message's part is posted anew (it stands), and the old message cannot be
// deleted. The replacement's short outage window exists so that "a Slack that is down must not hold
// the thread's turn twice as long" (edit.go): the reply, which holds the thread's turn (the next
// question there waits for it), ends within twice gateway.FinalOutage of the answer's end.
func TestRepostDeleteDoesNotHoldTheThread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := twoPartSteps(a, b)
		fs := newQuestionSlack()
		chat := &llmtest.Chat{Steps: steps}
		t0 := time.Now()
		fs.UpdateErr = func(n int, c gatewaytest.Call) error {
			if since := time.Since(t0); since >= 4*time.Second && since < 20*time.Minute {
				return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
			}
			return nil
		}
		tries := 0
		r := NewReplies(fs, hangingDeleter{fs, &tries}, fs, fs, chat, nil, testOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		took := time.Since(t0)
		t.Logf("Reply = %v after %v; %d chat.delete tries", err, took, tries)
		all := strings.Join(func() []string {
			var out []string
			for _, m := range fs.BotMessages(testTS) {
				out = append(out, m.Text)
			}
			return out
		}(), "\n")
		if last := b[strings.LastIndex(b, "Bravo sentence"):]; !strings.Contains(all, last) {
			t.Fatalf("the thread lacks the answer's end %q: not the case under test", last)
		}
		if end := 5100 * time.Millisecond; took-end > 2*gateway.FinalOutage {
			t.Errorf("the reply held the thread %v after the answer ended (%d chat.delete tries of 30 s), want at most twice finalOutage (%v)", took-end, tries, 2*gateway.FinalOutage)
		}
	})
}
