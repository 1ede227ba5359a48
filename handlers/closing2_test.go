package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/pace"
)

// askAgain asks a second question in the test thread (all Slack hooks cleared) and returns the
// messages the model is sent for it.
func askAgain(t *testing.T, rt *replyTest) []llm.Message {
	t.Helper()
	fs := rt.slack
	fs.mu.Lock()
	fs.updateErr, fs.postErr, fs.startErr, fs.appendErr, fs.stopErr = nil, nil, nil, nil, nil
	var q2 slack.Message
	q2.User, q2.Text, q2.Timestamp, q2.ThreadTimestamp = "U1", "<@UBOT> and then?", "1700000000.900000", testTS
	key := testCh + "/" + testTS
	fs.threads[key] = append(fs.threads[key], q2)
	fs.mu.Unlock()
	rt.chat.mu.Lock()
	rt.chat.steps = deltas([]string{"ok"}, time.Millisecond)
	rt.chat.mu.Unlock()
	req2 := rt.req
	req2.TS, req2.Text = q2.Timestamp, q2.Text
	if err := rt.r.Reply(t.Context(), req2); err != nil {
		t.Logf("second reply: %v", err)
	}
	reqs := rt.chat.calls()
	return reqs[len(reqs)-1].Messages
}

func assistantMessages(msgs []llm.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Role == llm.RoleAssistant {
			out = append(out, m.Content)
		}
	}
	return out
}

// The streamed message cannot be stopped (Slack stores its mark only at chat.stopStream), and the
// answer is rescued as ordinary messages: the next question in the thread sees the whole answer,
// once, as one assistant message.
func TestStreamRescueReplaysWholeAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := lines(6)
		rt := newReplyTest(t, deltas(ws, 100*time.Millisecond), streamOptions())
		rt.slack.stopErr = func(int, call) error { return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"} }
		_ = rt.r.Reply(t.Context(), rt.req)
		for i, m := range rt.slack.botMessages(testTS) {
			t.Logf("message %d: streaming %v mark %+v text %q", i, m.streaming, m.mark, m.text)
		}
		as := assistantMessages(askAgain(t, rt))
		if len(as) != 1 {
			t.Fatalf("the answer is replayed as %d assistant messages %q, want 1", len(as), as)
		}
		for _, w := range ws {
			if n := strings.Count(as[0], strings.TrimSpace(w)); n != 1 {
				t.Errorf("%q shows %d times in the replayed answer %q, want once", strings.TrimSpace(w), n, as[0])
			}
		}
	})
}

// The answer is complete and the final chat.stopStream fails transiently (502) as the bot shuts down;
// Slack answers again within the closing time. The shutdown rule's try goes on with what the first
// try did not get written: the thread shows the answer's end, or the interrupted note, never a
// finished-looking answer without its end.
func TestStreamShutdownDuringFinalKeepsTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := []step{
			{wait: 100 * time.Millisecond, chunk: llm.Chunk{Content: "Line one of the answer.\n"}},
			{wait: 100 * time.Millisecond, chunk: llm.Chunk{Content: "Line two of the answer.\nThe END."}},
			{chunk: llm.Chunk{FinishReason: "stop"}},
		}
		opt := streamOptions()
		opt.Streams = pace.NewBucket(600, 20) // plenty: only Slack's 502s hold the stop back
		rt := newReplyTest(t, steps, opt)
		t0 := time.Now()
		rt.slack.stopErr = func(int, call) error {
			if time.Since(t0) < 2100*time.Millisecond {
				return slack.StatusCodeError{Code: 502, Status: "502 Bad Gateway"}
			}
			return nil
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(ErrShutdown) })
		err := rt.r.Reply(ctx, rt.req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, rt.slack, t0)
		ms := rt.slack.botMessages(testTS)
		var all strings.Builder
		for i, m := range ms {
			t.Logf("message %d: streaming %v mark %+v text %q", i, m.streaming, m.mark, m.text)
			all.WriteString(m.text + "\n")
		}
		if !strings.Contains(all.String(), "The END.") && !strings.Contains(all.String(), textInterruptedAbove) {
			t.Errorf("the thread shows %q: the answer's end is lost and no note says so", all.String())
		}
	})
}

// logCalls logs every Slack call since t0, its text cut short.
func logCalls(t *testing.T, fs *fakeSlack, t0 time.Time) {
	t.Helper()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, c := range fs.calls {
		t.Logf("+%v %s ts=%s text=%.50q err=%v", c.at.Sub(t0), c.method, c.ts, c.text, c.err)
	}
}

// A two-part answer whose second message's final edit is refused (or chat.update stays down beyond
// finalOutage): the message is deleted and its part posted anew, so the start of paragraph B shows
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

// twoPartSteps streams paragraph A and the start of B at once, then the rest of B 5 s later: the
// answer's second message shows part of B while it streams.
func twoPartSteps(a, b string) []step {
	return []step{
		{wait: 100 * time.Millisecond, chunk: llm.Chunk{Content: a + "\n\n" + b[:2000]}},
		{wait: 5 * time.Second, chunk: llm.Chunk{Content: b[2000:]}},
		{chunk: llm.Chunk{FinishReason: "stop"}},
	}
}

// slowSecondPart streams paragraph A at once, then B a word group a second: the answer outgrows its
// first message while Slack is slow.
func slowSecondPart(a, b string) []step {
	steps := []step{{wait: 100 * time.Millisecond, chunk: llm.Chunk{Content: a + "\n\n"}}}
	for _, w := range words(b, 60) {
		steps = append(steps, step{wait: time.Second, chunk: llm.Chunk{Content: w}})
	}
	return append(steps, step{chunk: llm.Chunk{FinishReason: "stop"}})
}

func testRefusedLastPart(t *testing.T, refuse func(since time.Duration, ts string) error) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := twoPartSteps(a, b)
		rt := newReplyTest(t, steps, testOptions())
		t0 := time.Now()
		rt.slack.updateErr = func(n int, c call) error { return refuse(time.Since(t0), c.ts) }
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

// inCode reports whether the first occurrence of s in text is inside a ``` code block.
func inCode(text, s string) bool {
	i := strings.Index(text, s)
	if i < 0 {
		return false
	}
	return strings.Count(text[:i], "```")%2 == 1
}

// The answer ends with a code block and a sentence; the stream shows the block's opening and
// chat.stopStream fails. The rescued answer keeps the code line in its code block and the closing
// sentence out of it.
func TestStreamRescueInsideCodeBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := []step{
			{wait: 100 * time.Millisecond, chunk: llm.Chunk{Content: "Here is the code:\n\n```\nx = 1\n"}},
			{wait: 50 * time.Millisecond, chunk: llm.Chunk{Content: "y = a*b*c\n```\n\nThat is all."}},
			{chunk: llm.Chunk{FinishReason: "stop"}},
		}
		rt := newReplyTest(t, steps, streamOptions())
		t0 := time.Now()
		rt.slack.stopErr = func(int, call) error { return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"} }
		_ = rt.r.Reply(t.Context(), rt.req)
		logCalls(t, rt.slack, t0)
		posts := rt.slack.callsOf("post")
		if len(posts) != 1 {
			t.Fatalf("%d rescue posts, want 1", len(posts))
		}
		p := posts[0].text
		if !inCode(p, "y = a*b*c") {
			t.Errorf("rescue post %q shows the code line y = a*b*c outside a code block", p)
		}
		if inCode(p, "That is all.") {
			t.Errorf("rescue post %q shows the closing sentence inside a code block", p)
		}
	})
}

// chat.stopStream is refused, so the final write rescues the answer with posts, which wait out a 429
// while the bot starts shutting down. The rescue lands in time: no "interrupted" note goes under the
// complete answer.
func TestShutdownAfterRescueNoFalseInterruptedNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := lines(3)
		rt := newReplyTest(t, deltas(ws, 100*time.Millisecond), streamOptions())
		t0 := time.Now()
		rt.slack.stopErr = func(int, call) error { return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"} }
		rt.slack.postErr = func(n int, c call) error {
			if time.Since(t0) < 1200*time.Millisecond {
				return &slack.RateLimitedError{RetryAfter: time.Second}
			}
			return nil
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(ErrShutdown) })
		err := rt.r.Reply(ctx, rt.req)
		t.Logf("Reply = %v", err)
		logCalls(t, rt.slack, t0)
		var all strings.Builder
		for _, m := range rt.slack.botMessages(testTS) {
			all.WriteString(m.text + "\n")
		}
		for _, w := range ws {
			if !strings.Contains(all.String(), strings.TrimSpace(w)) {
				t.Fatalf("the thread lacks %q: not the case under test", strings.TrimSpace(w))
			}
		}
		if strings.Contains(all.String(), textInterruptedAbove) {
			t.Errorf("the thread shows the whole answer and then %q", textInterruptedAbove)
		}
	})
}

// A long answer cut off by the model (note textTruncated) continues in a new streamed message whose
// text carries the note, and that message cannot be stopped: after the rescue the note shows once.
func TestStreamRescueDoesNotRepeatTheNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var steps []step
		total := 0
		for i := 0; total < convo.MarkdownLimit-300; i++ {
			l := fmt.Sprintf("Line %d: %s\n", i, strings.Repeat("abc ", 20))
			total += len(l)
			steps = append(steps, step{wait: 20 * time.Millisecond, chunk: llm.Chunk{Content: l}})
		}
		steps = append(steps,
			step{wait: 5 * time.Second, chunk: llm.Chunk{Content: "The last line, " + strings.Repeat("xyz ", 100) + "\n"}},
			step{err: errTruncated()})
		rt := newReplyTest(t, steps, streamOptions())
		t0 := time.Now()
		rt.slack.stopErr = func(n int, _ call) error {
			if n >= 2 { // the full first message stops; the last cannot
				return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v", err)
		for _, c := range rt.slack.callsOf("startStream") {
			t.Logf("+%v startStream %s (%d bytes)", c.at.Sub(t0), c.ts, len(c.text))
		}
		for _, c := range rt.slack.callsOf("stopStream") {
			t.Logf("+%v stopStream %s %q err %v", c.at.Sub(t0), c.ts, c.text, c.err)
		}
		var all strings.Builder
		for i, m := range rt.slack.botMessages(testTS) {
			t.Logf("message %d: %d bytes, streaming %v, mark %+v, ends %q", i, len(m.text), m.streaming, m.mark, m.text[max(0, len(m.text)-80):])
			all.WriteString(m.text + "\n")
		}
		if n := strings.Count(all.String(), textTruncated); n != 1 {
			t.Errorf("the note %q shows %d times in the thread, want once", textTruncated, n)
		}
	})
}

// slowStreaming is Replies on fs (messages written through msgs) whose chat.appendStream is slow for
// a minute from 2 s on: appends land but answer after 12 s (slowStreamer).
func slowStreaming(fs *fakeSlack, msgs Messenger, chat *fakeChat, opt ReplyOptions) *Replies {
	now := time.Now()
	return NewReplies(fs, msgs, slowStreamer{fs, now.Add(2 * time.Second), now.Add(62 * time.Second)}, fs, chat, nil, opt)
}

// slowStreamer is a Slack whose chat.appendStream, between from and to, carries out the append but
// answers only after 12 s: a caller that gives up sooner (writeCallTimeout, 10 s) gets its context's
// error although the text was appended.
type slowStreamer struct {
	*fakeSlack
	from, to time.Time
}

func (s slowStreamer) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	if err := s.fakeSlack.AppendStream(ctx, channel, ts, markdown); err != nil {
		return err
	}
	if now := time.Now(); !now.Before(s.from) && now.Before(s.to) {
		t := time.NewTimer(12 * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("Post \"https://slack.com/api/chat.appendStream\": %w", ctx.Err())
		}
	}
	return nil
}

// Slack is slow for a minute (appends land but answer after 12 s) while an answer streams: an append
// that timed out may have landed, so it is not repeated; the stream's text is then unknown and the
// final write rescues the answer. Every line shows once.
func TestTimedOutAppendIsNotRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(90)
		chat := &fakeChat{steps: deltas(ws, time.Second)}
		r := slowStreaming(fs, fs, chat, streamOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v; appends %d", err, len(fs.callsOf("appendStream")))
		var all strings.Builder
		for _, m := range fs.botMessages(testTS) {
			all.WriteString(m.text + "\n")
		}
		twice := 0
		for _, w := range ws {
			if n := strings.Count(all.String(), strings.TrimSpace(w)); n != 1 {
				if twice++; twice <= 3 {
					t.Errorf("%q shows %d times, want once", strings.TrimSpace(w), n)
				}
			}
		}
		if twice > 3 {
			t.Errorf("... %d lines in all show other than once", twice)
		}
	})
}
