package handlers

import (
	"context"
	"fmt"
	"strings"
	"sync"
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

// slowSecondPart streams paragraph A at once, then B a word group a second: the answer outgrows its
// first message while Slack is slow.
func slowSecondPart(a, b string) []llmtest.Step {
	steps := []llmtest.Step{{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: a + "\n\n"}}}
	for _, w := range llmtest.Words(b, 60) {
		steps = append(steps, llmtest.Step{Wait: time.Second, Chunk: llm.Chunk{Content: w}})
	}
	return append(steps, llmtest.Step{Chunk: llm.Chunk{FinishReason: "stop"}})
}

// lagPoster is a Slack whose chat.postMessage, between from and to, posts the message but answers
// only after 12 s: a caller that gives up sooner (gateway.WriteCallTimeout, 10 s) gets its context's error
// although the message was posted.
type lagPoster struct {
	*gatewaytest.Slack
	from, to time.Time
}

func (s lagPoster) Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (string, error) {
	ts, err := s.Slack.Post(ctx, channel, threadTS, m)
	if err != nil {
		return ts, err
	}
	if now := time.Now(); !now.Before(s.from) && now.Before(s.to) {
		t := time.NewTimer(12 * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", fmt.Errorf("Post \"https://slack.com/api/chat.postMessage\": %w", ctx.Err())
		}
	}
	return ts, nil
}

// checkPart2OnceWithoutStop fails the test unless the second paragraph of longTwoPartAnswer shows once
// in the test thread and no message of the finished answer still shows a Stop button.
func checkPart2OnceWithoutStop(t *testing.T, fs *gatewaytest.Slack) {
	t.Helper()
	var all strings.Builder
	stops := 0
	for i, m := range fs.BotMessages(testTS) {
		t.Logf("message %d: buttons %v mark %+v text %.60q", i, buttonKey(m.Buttons), m.Mark, m.Text)
		all.WriteString(m.Text + "\n")
		if strings.Contains(buttonKey(m.Buttons), route.ActionStop) {
			stops++
		}
	}
	if n := strings.Count(all.String(), "Bravo sentence 0 of"); n != 1 {
		t.Errorf("part 2's first sentence shows %d times in the thread, want once", n)
	}
	if stops > 0 {
		t.Errorf("%d messages of the finished answer still show a Stop button", stops)
	}
}

// Slack is slow for a while (posts land but answer after 12 s) as a long answer outgrows its first
// message: the interim post of part 2 times out, though Slack posted it. A timed-out post may have
// landed, so it must not be repeated: part 2 shows once, and no stray copy keeps a Stop button.
func TestTimedOutInterimPostIsNotRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := slowSecondPart(a, b)
		fs := newQuestionSlack()
		chat := &llmtest.Chat{Steps: steps}
		t0 := time.Now()
		opt := testOptions()
		opt.Buttons = true
		r := NewReplies(fs, lagPoster{fs, t0.Add(time.Second), t0.Add(50 * time.Second)}, fs, fs, chat, nil, opt)
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		checkPart2OnceWithoutStop(t, fs)
		as := assistantMessages(askAgain(t, &replyTest{slack: fs, chat: chat, r: r, req: req}))
		if len(as) != 1 || strings.Count(as[0], "Bravo sentence 0 of") != 1 {
			n := 0
			for _, a := range as {
				n += strings.Count(a, "Bravo sentence 0 of")
			}
			t.Errorf("the next question sees the answer as %d assistant messages with part 2 %d times, want once", len(as), n)
		}
	})
}

// As TestTimedOutInterimPostIsNotRepeated, but the asker presses Stop (or the bot shuts down) while
// the slow interim post of part 2 is under way: that post is given up (half the closing time after
// the cancellation), though Slack posted it. It may have landed as much as one that timed out
// before the cancellation: part 2 shows once, and no stray copy keeps a Stop button.
func TestInterimPostCutByCancelIsNotRepeated(t *testing.T) {
	for _, cause := range []error{ErrStopped, ErrShutdown} {
		t.Run(cause.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := longTwoPartAnswer()
				steps := slowSecondPart(a, b)
				fs := newQuestionSlack()
				chat := &llmtest.Chat{Steps: steps}
				t0 := time.Now()
				opt := testOptions()
				opt.Buttons = true
				opt.ShutdownTimeout = 10 * time.Second
				r := NewReplies(fs, lagPoster{fs, t0.Add(time.Second), t0.Add(14 * time.Second)}, fs, fs, chat, nil, opt)
				req := testRequest()
				ctx, cancel := context.WithCancelCause(t.Context())
				time.AfterFunc(12*time.Second, func() { cancel(cause) }) // the post of part 2 went at +10.1 s
				err := r.Reply(ctx, req)
				t.Logf("Reply = %v after %v", err, time.Since(t0))
				logCalls(t, fs, t0)
				checkPart2OnceWithoutStop(t, fs)
			})
		})
	}
}

// Slack is slow for a while (posts land but answer after 12 s) as a long answer outgrows its first
// message: the interim post of part 2 times out (it landed, with a Stop button). The bot then shuts
// down, or the asker presses Stop; the read that looks for the lost part meets Tier 3's 429
// (Retry-After 30 s). The read is optional, the closing writes are not: the answer is still closed
// with its note (in it or under it).
func TestLostPostReadDoesNotEatClosingTime(t *testing.T) {
	t.Run("shutdown", func(t *testing.T) {
		testLostPostClosing(t, ErrShutdown, []string{textInterrupted, textInterruptedAbove})
	})
	t.Run("stop", func(t *testing.T) {
		testLostPostClosing(t, ErrStopped, []string{"Stopped"})
	})
}

func testLostPostClosing(t *testing.T, cause error, notes []string) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := slowSecondPart(a, b)
		fs := newQuestionSlack()
		chat := &llmtest.Chat{Steps: steps}
		t0 := time.Now()
		fs.RepliesErr = func(n int, c gatewaytest.Call) error {
			return &slack.RateLimitedError{RetryAfter: 30 * time.Second}
		}
		opt := testOptions()
		opt.Buttons = true
		r := NewReplies(fs, lagPoster{fs, t0.Add(time.Second), t0.Add(25 * time.Second)}, fs, fs, chat, nil, opt)
		req := testRequest()
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(30*time.Second, func() { cancel(cause) })
		err := r.Reply(ctx, req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		if len(fs.CallsOf("replies")) == 0 {
			t.Fatalf("no thread read: not the case under test")
		}
		var all strings.Builder
		for i, m := range fs.BotMessages(testTS) {
			t.Logf("message %d: buttons %v mark %+v text %.60q", i, buttonKey(m.Buttons), m.Mark, m.Text)
			all.WriteString(m.Text + "\n")
		}
		found := false
		for _, n := range notes {
			found = found || strings.Contains(all.String(), n)
		}
		if !found {
			t.Errorf("the thread shows none of the notes %q: the closing time went on the read", notes)
		}
	})
}

// As TestTimedOutInterimPostIsNotRepeated: the interim post of part 2 times out, and the final
// write looks in the thread for it; Slack's read budget (Tier 3) is spent, and that read gets a
// 429 with Retry-After 30 s. Another reply, in another channel, starts a second later and reads its
// thread: a 429 pauses every reader for its Retry-After (Replies.read), so it waits for the pause
// instead of drawing a 429 of its own.
func TestLostPostLookA429PausesOtherReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := slowSecondPart(a, b)
		fs := newQuestionSlack()
		fs.Threads["C2/"+testTS] = []slack.Message{mention("<@UBOT> go")}
		t0 := time.Now()
		var spent time.Time // Slack's read budget is spent from the first read on, for 30 s
		first := make(chan struct{})
		fs.RepliesErr = func(n int, c gatewaytest.Call) error {
			if spent.IsZero() {
				spent = time.Now()
				close(first)
			}
			if time.Since(spent) < 30*time.Second {
				return &slack.RateLimitedError{RetryAfter: 30*time.Second - time.Since(spent)}
			}
			return nil
		}
		chat := &llmtest.Chat{Steps: steps}
		opt := testOptions()
		opt.Buttons = true
		r := NewReplies(fs, lagPoster{fs, t0.Add(time.Second), t0.Add(30 * time.Second)}, fs, fs, chat, nil, opt)
		req := testRequest()
		other := route.ReplyRequest{Channel: "C2", ChannelType: "channel", User: "U1", Team: "T1",
			TS: "1700000000.000050", ThreadTS: testTS, Text: "<@UBOT> and then?"}
		var wg sync.WaitGroup
		wg.Go(func() {
			select {
			case <-first:
			case <-t.Context().Done():
				return
			}
			time.Sleep(time.Second)
			if err := r.Reply(t.Context(), other); err != nil {
				t.Errorf("the other reply: %v", err)
			}
		})
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		wg.Wait()
		logCalls(t, fs, t0)
		reads := fs.CallsOf("replies")
		if len(reads) == 0 || !reads[0].At.After(t0.Add(20*time.Second)) {
			t.Fatalf("no look for the lost part: not the case under test")
		}
		limited := 0
		for _, c := range reads {
			if c.Err != nil {
				limited++
			}
		}
		if limited != 1 {
			t.Errorf("%d reads got a 429, want only the first: its Retry-After did not pause the other reader", limited)
		}
	})
}
