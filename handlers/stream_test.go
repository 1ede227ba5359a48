package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/slackmd"
)

func streamOptions() ReplyOptions {
	opt := testOptions()
	opt.Mode = ModeStream
	return opt
}

// budgetedStreamOptions are streamOptions with budgets of their own (Slack's tiers: chat.startStream
// and stopStream 20 a minute, appends 50), whose rates a test can read.
func budgetedStreamOptions() ReplyOptions {
	opt := streamOptions()
	opt.Budgets.Streams = pace.NewBucket(20, 5)
	opt.Budgets.Appends = pace.NewScheduler(50, 5)
	return opt
}

// streamed is what Slack shows for a whole answer streamed through slackmd.MarkdownStream.
func streamed(md string) string {
	ms := slackmd.NewMarkdownStream()
	return ms.Feed(md) + ms.Flush()
}

func lines(n int) []string {
	var ws []string
	for i := range n {
		ws = append(ws, fmt.Sprintf("Line %d of the answer.\n", i))
	}
	return ws
}

func TestStreamModeAppendsAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := lines(30)
		rt := newReplyTest(t, llmtest.Deltas(ws, 200*time.Millisecond), streamOptions())
		t0 := time.Now()
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))

		starts := rt.slack.CallsOf("startStream")
		if len(starts) != 1 {
			t.Fatalf("startStream calls = %d, want 1", len(starts))
		}
		want := gateway.StreamStart{Channel: testCh, ThreadTS: testTS, RecipientUserID: "U1", RecipientTeamID: "T1"}
		if got := starts[0].Start; got != want || !starts[0].At.Equal(t0) {
			t.Errorf("startStream = %+v at +%v, want %+v at once", got, starts[0].At.Sub(t0), want)
		}
		if n := len(rt.slack.CallsOf("post")); n != 0 {
			t.Errorf("posts = %d, want none in stream mode", n)
		}
		appends := rt.slack.CallsOf("appendStream")
		if len(appends) < 2 {
			t.Errorf("appends = %d, want the answer appended as it streams", len(appends))
		}
		if first := appends[0].At.Sub(t0); first != 200*time.Millisecond {
			t.Errorf("first append at +%v, want with the first line", first)
		}
		ms := rt.slack.BotMessages(testTS)
		if len(ms) != 1 || ms[0].Text != streamed(joined(ws)) || ms[0].Streaming {
			t.Errorf("streamed message = %+v, want the whole answer, stopped", ms)
		}
		stops := rt.slack.CallsOf("stopStream")
		if len(stops) != 1 || stops[0].Mark != (convo.Mark{Kind: convo.MarkAnswer, Question: testTS, Done: true}) {
			t.Errorf("stopStream = %+v, want one with an answer mark, done", stops)
		}
	})
}

func TestStreamModeLongAnswerContinuesInNewMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ws []string
		for i := 0; len(joined(ws)) < 2*slackmd.MarkdownLimit+500; i++ {
			ws = append(ws, fmt.Sprintf("Line %d: %s\n", i, strings.Repeat("abc ", 20)))
		}
		rt := newReplyTest(t, llmtest.Deltas(ws, 20*time.Millisecond), streamOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		ms := rt.slack.BotMessages(testTS)
		if len(ms) != 3 {
			t.Fatalf("streamed messages = %d, want 3", len(ms))
		}
		var all strings.Builder
		for i, m := range ms {
			if len(m.Text) > slackmd.MarkdownLimit || m.Streaming {
				t.Errorf("message %d: %d chars, streaming %v; want <= %d and stopped", i, len(m.Text), m.Streaming, slackmd.MarkdownLimit)
			}
			all.WriteString(m.Text)
		}
		if all.String() != streamed(joined(ws)) {
			t.Error("the streamed messages together differ from the answer")
		}
		checkAnswerIDs(t, ms, testTS)
	})
}

func TestStreamModeWholeLongAnswerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		for i := 0; b.Len() < 25000; i++ {
			fmt.Fprintf(&b, "Line %d: %s\n", i, strings.Repeat("xyz ", 15))
		}
		md := b.String()
		rt := newReplyTest(t, []llmtest.Step{{Wait: time.Second, Chunk: llm.Chunk{Content: md, FinishReason: "stop"}}}, streamOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		var all strings.Builder
		for i, m := range rt.slack.BotMessages(testTS) {
			if len(m.Text) > slackmd.MarkdownLimit || m.Streaming {
				t.Errorf("message %d: %d chars, streaming %v", i, len(m.Text), m.Streaming)
			}
			all.WriteString(m.Text)
		}
		if all.String() != streamed(md) {
			t.Error("the streamed messages together differ from the answer")
		}
		if n := len(rt.slack.CallsOf("post")); n != 0 {
			t.Errorf("posts = %d, want no rescue", n)
		}
	})
}

func TestStreamModeFallsBackWhenRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := []string{"Hello ", "from ", "the fallback."}
		rt := newReplyTest(t, llmtest.Deltas(ws, 100*time.Millisecond), streamOptions())
		rt.slack.StartErr = func(int, gatewaytest.Call) error { return slack.SlackErrorResponse{Err: "channel_type_not_supported"} }
		for range 2 {
			mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		}
		if n := len(rt.slack.CallsOf("startStream")); n != 1 {
			t.Errorf("startStream calls = %d, want 1 (the refusal is remembered)", n)
		}
		ms := rt.slack.BotMessages(testTS)
		want := slackmd.Split(joined(ws), slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)[0]
		if len(ms) != 2 || ms[0].Text != want || ms[1].Text != want {
			t.Errorf("messages = %+v, want two post-and-edit answers %q", ms, want)
		}
	})
}

func TestStreamModeChannelProblemIsNotARefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"Hi."}, 100*time.Millisecond), streamOptions())
		rt.slack.StartErr = func(n int, _ gatewaytest.Call) error {
			if n == 1 {
				return slack.SlackErrorResponse{Err: "thread_not_found"}
			}
			return nil
		}
		for range 2 {
			mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		}
		if n := len(rt.slack.CallsOf("startStream")); n != 2 {
			t.Errorf("startStream calls = %d, want 2 (one thread's problem is not remembered)", n)
		}
	})
}

func TestStreamModeRateLimitedStartFallsBackOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"Hi."}, 100*time.Millisecond), streamOptions())
		rt.slack.StartErr = func(n int, _ gatewaytest.Call) error {
			if n == 1 {
				return &slack.RateLimitedError{RetryAfter: time.Second}
			}
			return nil
		}
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req)) // 429: this reply edits
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req)) // within the Retry-After: edits without asking
		if n := len(rt.slack.CallsOf("startStream")); n != 1 {
			t.Errorf("startStream calls during the Retry-After = %d, want 1", n)
		}
		time.Sleep(2 * time.Second)
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		if n := len(rt.slack.CallsOf("startStream")); n != 2 {
			t.Errorf("startStream calls = %d, want 2 (rate limiting is not a refusal)", n)
		}
		if n := len(rt.slack.CallsOf("post")); n != 2 {
			t.Errorf("placeholders = %d, want 2 (the replies that could not stream)", n)
		}
	})
}

func TestStreamModeBudgetUsedUpFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := streamOptions()
		opt.Budgets.Streams = pace.NewBucket(20, 1)
		rt := newReplyTest(t, llmtest.Deltas([]string{"Hi.\n"}, 100*time.Millisecond), opt)
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req)) // streams; its stop waits for the next token
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req)) // no token at once: edits
		if n, p := len(rt.slack.CallsOf("startStream")), len(rt.slack.CallsOf("post")); n != 1 || p != 1 {
			t.Errorf("startStream calls = %d, placeholders = %d; want 1 and 1", n, p)
		}
		for i, m := range rt.slack.BotMessages(testTS) {
			if m.Streaming || strings.TrimSpace(m.Text) != "Hi." {
				t.Errorf("message %d = %+v, want the answer, finished", i, m)
			}
		}
	})
}

func TestStreamModeStoppedByUser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas(lines(50), 200*time.Millisecond), streamOptions())
		rt.slack.AppendErr = func(n int, _ gatewaytest.Call) error {
			if n == 3 {
				return slack.SlackErrorResponse{Err: "stopped_by_user"}
			}
			return nil
		}
		t0 := time.Now()
		err := rt.r.Reply(t.Context(), rt.req)
		if !errors.Is(err, ErrStopped) {
			t.Errorf("Reply = %v, want ErrStopped", err)
		}
		cause := rt.chat.Cause()
		if !errors.Is(cause, ErrStopped) {
			t.Errorf("model request ended with cause %v, want ErrStopped", cause)
		}
		if took := time.Since(t0); took > 2*time.Second {
			t.Errorf("Reply took %v after the stop, want the model request cancelled at once", took)
		}
		if n := len(rt.slack.CallsOf("appendStream")); n != 3 {
			t.Errorf("appends = %d, want none after stopped_by_user", n)
		}
	})
}

func TestStreamModeFailureKeepsPartial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := append(llmtest.Deltas(lines(3), 100*time.Millisecond)[:3], llmtest.Step{Wait: 100 * time.Millisecond, Err: errTruncated()})
		rt := newReplyTest(t, steps, streamOptions())
		if err := rt.r.Reply(t.Context(), rt.req); err == nil {
			t.Error("Reply = nil, want the stream error")
		}
		ms := rt.slack.BotMessages(testTS)
		want := streamed(joined(lines(3))) + convo.NoteSuffix(notes.Truncated, slackmd.FormatMarkdown)
		if len(ms) != 1 || ms[0].Text != want || ms[0].Mark.Note != notes.Truncated {
			t.Errorf("message = %+v, want %q", ms, want)
		}
	})
}

// When the streamed message cannot be stopped, the whole answer is posted as ordinary messages and the
// streamed message deleted: nothing lost, nothing twice, and the posts carry the answer's marks.
func TestStreamModeRescuesAnswerWhenStopFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := lines(3)
		rt := newReplyTest(t, llmtest.Deltas(ws, 100*time.Millisecond), streamOptions())
		rt.slack.StopErr = func(int, gatewaytest.Call) error {
			return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
		}
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req)) // rescued: the answer stands
		want := slackmd.Split(joined(ws), slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)
		if got := rt.texts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("thread shows %q, want the whole answer %q (the streamed message deleted)", got, want)
		}
		if ms := rt.slack.BotMessages(testTS); len(ms) != 1 || ms[0].Mark.Kind != convo.MarkAnswer || ms[0].Mark.Question != testTS {
			t.Errorf("messages %+v, want one marked as the answer to %s", ms, testTS)
		}
	})
}

func TestStreamModeShutdownAndEmptyMention(t *testing.T) {
	t.Run("shutdown", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newReplyTest(t, llmtest.Deltas(lines(20), 300*time.Millisecond), streamOptions())
			ctx, cancel := context.WithCancelCause(t.Context())
			time.AfterFunc(1100*time.Millisecond, func() { cancel(ErrShutdown) })
			if err := rt.r.Reply(ctx, rt.req); !errors.Is(err, ErrShutdown) {
				t.Errorf("Reply = %v, want ErrShutdown", err)
			}
			ms := rt.slack.BotMessages(testTS)
			want := streamed(joined(lines(3))) + convo.NoteSuffix(textInterrupted, slackmd.FormatMarkdown)
			if len(ms) != 1 || ms[0].Text != want || ms[0].Streaming {
				t.Errorf("message = %+v, want %q, stopped", ms, want)
			}
		})
	})
	t.Run("empty mention", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rt := newReplyTest(t, nil, streamOptions())
			rt.slack.Threads[testCh+"/"+testTS] = []slack.Message{mention("<@UBOT>")}
			rt.req.Text = "<@UBOT>"
			mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
			ms := rt.slack.BotMessages(testTS)
			if len(ms) != 1 || !strings.Contains(ms[0].Text, "Ask me anything") || ms[0].Mark.Kind != convo.MarkNotice || ms[0].Streaming {
				t.Errorf("messages = %+v, want the stream closed with the hint", ms)
			}
		})
	})
}

// TestStreamModeRateLimitedPieceIsNotSentTwice: a write longer than one message goes out in
// pieces; a 429 on a later piece retries from that piece, never repeating what Slack took.
func TestStreamModeRateLimitedPieceIsNotSentTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		for i := 0; b.Len() < 25000; i++ {
			fmt.Fprintf(&b, "Line %d: %s\n", i, strings.Repeat("xyz ", 15))
		}
		md := b.String()
		rt := newReplyTest(t, []llmtest.Step{{Wait: time.Second, Chunk: llm.Chunk{Content: md, FinishReason: "stop"}}}, streamOptions())
		rt.slack.StartErr = func(n int, _ gatewaytest.Call) error {
			if n == 2 { // the continuation in a second message
				return &slack.RateLimitedError{RetryAfter: time.Second}
			}
			return nil
		}
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		var all strings.Builder
		for _, m := range rt.slack.BotMessages(testTS) {
			all.WriteString(m.Text)
		}
		if all.String() != streamed(md) {
			t.Errorf("the streamed messages together (%d bytes) differ from the answer (%d bytes)", all.Len(), len(streamed(md)))
		}
	})
}

// TestStreamModeRateLimitCharged: a 429 lowers the rate of the budget of the call that got it, and
// only that one: chat.startStream (a long answer continuing in a new message) and chat.stopStream
// are paced by Streams, chat.appendStream by the appends scheduler. The answer is whole either way.
func TestStreamModeRateLimitCharged(t *testing.T) {
	var long []string
	for i := 0; len(joined(long)) < slackmd.MarkdownLimit+500; i++ {
		long = append(long, fmt.Sprintf("Line %d: %s\n", i, strings.Repeat("abc ", 20)))
	}
	whole := func(ws []string) []llmtest.Step {
		return []llmtest.Step{{Wait: time.Second, Chunk: llm.Chunk{Content: joined(ws), FinishReason: "stop"}}}
	}
	start := func(f *gatewaytest.Slack) *gatewaytest.Hook { return &f.StartErr }
	tests := []struct {
		name               string
		words              []string
		steps              []llmtest.Step
		hook               func(*gatewaytest.Slack) *gatewaytest.Hook
		nth                int // the call of the hook's method that gets the 429
		streamsCut, appCut bool
	}{
		{"continuation start while streaming", long, llmtest.Deltas(long, 20*time.Millisecond), start, 2, true, false},
		{"continuation start in the final write", long, whole(long), start, 2, true, false},
		{"append while streaming", lines(40), llmtest.Deltas(lines(40), 100*time.Millisecond),
			func(f *gatewaytest.Slack) *gatewaytest.Hook { return &f.AppendErr }, 2, false, true},
		{"append in the final write", long, whole(long),
			func(f *gatewaytest.Slack) *gatewaytest.Hook { return &f.AppendErr }, 1, false, true},
		{"stop", long, llmtest.Deltas(long, 20*time.Millisecond),
			func(f *gatewaytest.Slack) *gatewaytest.Hook { return &f.StopErr }, 1, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opt := budgetedStreamOptions()
				streams, appends := opt.Budgets.Streams.Rate(), opt.Budgets.Appends.Bucket().Rate()
				rt := newReplyTest(t, tt.steps, opt)
				*tt.hook(rt.slack) = func(n int, _ gatewaytest.Call) error {
					if n == tt.nth {
						return &slack.RateLimitedError{RetryAfter: time.Second}
					}
					return nil
				}
				mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
				if got := opt.Budgets.Streams.Rate() < streams; got != tt.streamsCut {
					t.Errorf("Streams' rate lowered = %v, want %v", got, tt.streamsCut)
				}
				if got := opt.Budgets.Appends.Bucket().Rate() < appends; got != tt.appCut {
					t.Errorf("appends' rate lowered = %v (%v), want %v", got, opt.Budgets.Appends.Bucket().Rate(), tt.appCut)
				}
				var all strings.Builder
				for _, m := range rt.slack.BotMessages(testTS) {
					all.WriteString(m.Text)
				}
				if all.String() != streamed(joined(tt.words)) {
					t.Errorf("the streamed messages together (%d bytes) differ from the answer (%d bytes)", all.Len(), len(streamed(joined(tt.words))))
				}
			})
		})
	}
}

// TestStreamModeFinalAppendWaitsRetryAfter: a chat.appendStream 429 holds back the final write's
// next appendStream until its Retry-After has passed, whether the final write got it (not retried
// at once on the stops' budget) or an interim write did (its Retry-After is on the appends budget,
// which the final write's appends wait for too).
func TestStreamModeFinalAppendWaitsRetryAfter(t *testing.T) {
	var long []string
	for i := 0; len(joined(long)) < slackmd.MarkdownLimit+500; i++ {
		long = append(long, fmt.Sprintf("Line %d: %s\n", i, strings.Repeat("abc ", 20)))
	}
	end := llmtest.Step{Wait: time.Second, Chunk: llm.Chunk{Content: joined(long), FinishReason: "stop"}}
	tests := []struct {
		name  string
		steps []llmtest.Step
	}{
		{"the final write's own 429", []llmtest.Step{end}},
		{"an interim write's 429", []llmtest.Step{{Wait: time.Second, Chunk: llm.Chunk{Content: "Hello.\n\n"}}, end}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opt := budgetedStreamOptions()
				rt := newReplyTest(t, tt.steps, opt)
				const retryAfter = 10 * time.Second
				rt.slack.AppendErr = func(n int, _ gatewaytest.Call) error {
					if n == 1 {
						return &slack.RateLimitedError{RetryAfter: retryAfter}
					}
					return nil
				}
				mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
				apps := rt.slack.CallsOf("appendStream")
				if len(apps) < 2 {
					t.Fatalf("appendStream calls = %d, want >= 2", len(apps))
				}
				if gap := apps[1].At.Sub(apps[0].At); gap < retryAfter {
					t.Errorf("the appendStream after the 429'd one came %v after it, want >= Retry-After %v", gap, retryAfter)
				}
			})
		})
	}
}

// slowAppender is a Slack whose chat.appendStream takes latency from slowFrom on. Slack carries out a
// call it has received, whether or not the caller stops waiting for its answer.
type slowAppender struct {
	*gatewaytest.Slack
	slowFrom time.Time
	latency  time.Duration
}

func (s slowAppender) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	if time.Now().Before(s.slowFrom) {
		return s.Slack.AppendStream(ctx, channel, ts, markdown)
	}
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	err := s.Slack.AppendStream(context.WithoutCancel(ctx), channel, ts, markdown)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// TestStreamModeStopDuringAnAppendShowsItOnce: a Stop while an interim chat.appendStream is under way
// does not cancel it (Slack may already have taken the text, as in edit mode): the final write then
// appends only what came after it, and no line shows twice.
func TestStreamModeStopDuringAnAppendShowsItOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(60)
		chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, 300*time.Millisecond)}
		opt := streamOptions()
		r := NewReplies(fs, fs, slowAppender{fs, time.Now().Add(5 * time.Second), 3 * time.Second}, fs, chat, nil, opt)
		req := testRequest()
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(7*time.Second, func() { cancel(ErrStopped) })
		err := r.Reply(ctx, req)
		t.Logf("Reply = %v", err)
		ms := fs.BotMessages(testTS)
		if len(ms) != 1 || !strings.Contains(ms[0].Text, "Stopped") || ms[0].Streaming {
			t.Fatalf("messages = %+v, want one, stopped, with the stopped note", ms)
		}
		for _, w := range ws {
			if n := strings.Count(ms[0].Text, strings.TrimSpace(w)); n > 1 {
				t.Errorf("%q shows %d times in %q", strings.TrimSpace(w), n, ms[0].Text)
			}
		}
		if !strings.Contains(ms[0].Text, "Line 0 of") {
			t.Errorf("message = %q, want the answer's start", ms[0].Text)
		}
	})
}
