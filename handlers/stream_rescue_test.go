package handlers

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/slackmd"
)

// longStreamAnswer is an answer of about 1.5 native-streaming messages, one numbered line each.
func longStreamAnswer() []string {
	var ws []string
	for i := 0; len(joined(ws)) < slackmd.MarkdownLimit*3/2; i++ {
		ws = append(ws, fmt.Sprintf("Line %d: %s\n", i, strings.Repeat("abc ", 20)))
	}
	return ws
}

// checkEachLineOnce fails when a line of the answer shows other than once in the thread's bot
// messages.
func checkEachLineOnce(t *testing.T, fs *gatewaytest.Slack, ws []string) {
	t.Helper()
	ms := fs.BotMessages(testTS)
	var all strings.Builder
	for i, m := range ms {
		t.Logf("message %d: %d bytes, streaming %v, mark %+v", i, len(m.Text), m.Streaming, m.Mark)
		all.WriteString(m.Text)
		all.WriteString("\n")
	}
	twice := 0
	for _, w := range ws {
		key := strings.SplitN(w, ":", 2)[0] + ":" // "Line 7:"
		if n := strings.Count(all.String(), key); n != 1 {
			if twice++; twice <= 3 {
				t.Errorf("%q shows %d times in the thread, want once", key, n)
			}
		}
	}
	if twice > 3 {
		t.Errorf("... %d lines in all show other than once", twice)
	}
}

// A long answer streams into two native messages; the first is stopped when full, the second cannot
// be stopped (message_not_in_streaming_state). The rescue posts the answer in place of the streamed
// messages, which it deletes: every line of the answer shows once.
func TestStreamRescueRepeatsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := longStreamAnswer()
		rt := newReplyTest(t, llmtest.Deltas(ws, 20*time.Millisecond), streamOptions())
		rt.slack.StopErr = func(n int, _ gatewaytest.Call) error {
			if n >= 2 { // the first stop (the full first message) goes; the last cannot
				return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v; starts %d, stops %d, rescue posts %d", err, len(rt.slack.CallsOf("startStream")),
			len(rt.slack.CallsOf("stopStream")), len(rt.slack.CallsOf("post")))
		checkEachLineOnce(t, rt.slack, ws)
	})
}

// The streamed message cannot be stopped (Slack stores its mark only at chat.stopStream), and the
// answer is rescued as ordinary messages: the next question in the thread sees the whole answer,
// once, as one assistant message.
func TestStreamRescueReplaysWholeAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := lines(6)
		rt := newReplyTest(t, llmtest.Deltas(ws, 100*time.Millisecond), streamOptions())
		rt.slack.StopErr = func(int, gatewaytest.Call) error {
			return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
		}
		_ = rt.r.Reply(t.Context(), rt.req)
		for i, m := range rt.slack.BotMessages(testTS) {
			t.Logf("message %d: streaming %v mark %+v text %q", i, m.Streaming, m.Mark, m.Text)
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
		steps := []llmtest.Step{
			{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "Here is the code:\n\n```\nx = 1\n"}},
			{Wait: 50 * time.Millisecond, Chunk: llm.Chunk{Content: "y = a*b*c\n```\n\nThat is all."}},
			{Chunk: llm.Chunk{FinishReason: "stop"}},
		}
		rt := newReplyTest(t, steps, streamOptions())
		t0 := time.Now()
		rt.slack.StopErr = func(int, gatewaytest.Call) error {
			return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
		}
		_ = rt.r.Reply(t.Context(), rt.req)
		logCalls(t, rt.slack, t0)
		posts := rt.slack.CallsOf("post")
		if len(posts) != 1 {
			t.Fatalf("%d rescue posts, want 1", len(posts))
		}
		p := posts[0].Text
		if !inCode(p, "y = a*b*c") {
			t.Errorf("rescue post %q shows the code line y = a*b*c outside a code block", p)
		}
		if inCode(p, "That is all.") {
			t.Errorf("rescue post %q shows the closing sentence inside a code block", p)
		}
	})
}

// A long answer cut off by the model (note notes.Truncated) continues in a new streamed message whose
// text carries the note, and that message cannot be stopped: after the rescue the note shows once.
func TestStreamRescueDoesNotRepeatTheNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var steps []llmtest.Step
		total := 0
		for i := 0; total < slackmd.MarkdownLimit-300; i++ {
			l := fmt.Sprintf("Line %d: %s\n", i, strings.Repeat("abc ", 20))
			total += len(l)
			steps = append(steps, llmtest.Step{Wait: 20 * time.Millisecond, Chunk: llm.Chunk{Content: l}})
		}
		steps = append(steps,
			llmtest.Step{Wait: 5 * time.Second, Chunk: llm.Chunk{Content: "The last line, " + strings.Repeat("xyz ", 100) + "\n"}},
			llmtest.Step{Err: errTruncated()})
		rt := newReplyTest(t, steps, streamOptions())
		t0 := time.Now()
		rt.slack.StopErr = func(n int, _ gatewaytest.Call) error {
			if n >= 2 { // the full first message stops; the last cannot
				return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v", err)
		for _, c := range rt.slack.CallsOf("startStream") {
			t.Logf("+%v startStream %s (%d bytes)", c.At.Sub(t0), c.TS, len(c.Text))
		}
		for _, c := range rt.slack.CallsOf("stopStream") {
			t.Logf("+%v stopStream %s %q err %v", c.At.Sub(t0), c.TS, c.Text, c.Err)
		}
		var all strings.Builder
		for i, m := range rt.slack.BotMessages(testTS) {
			t.Logf("message %d: %d bytes, streaming %v, mark %+v, ends %q", i, len(m.Text), m.Streaming, m.Mark, m.Text[max(0, len(m.Text)-80):])
			all.WriteString(m.Text + "\n")
		}
		if n := strings.Count(all.String(), notes.Truncated); n != 1 {
			t.Errorf("the note %q shows %d times in the thread, want once", notes.Truncated, n)
		}
	})
}

// chat.appendStream refuses three appends in a row (not transiently), so interim appends stop. The
// final write rescues the answer: no message is left streaming, and each line shows once.
func TestStreamBrokenAppendsStopTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := lines(40)
		rt := newReplyTest(t, llmtest.Deltas(ws, 200*time.Millisecond), streamOptions())
		rt.slack.AppendErr = func(n int, _ gatewaytest.Call) error {
			if n >= 3 && n <= 5 {
				return slack.SlackErrorResponse{Err: "invalid_arguments"}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v; appends %d, stops %d, rescue posts %d", err, len(rt.slack.CallsOf("appendStream")),
			len(rt.slack.CallsOf("stopStream")), len(rt.slack.CallsOf("post")))
		ms := rt.slack.BotMessages(testTS)
		for i, m := range ms {
			if m.Streaming {
				t.Errorf("message %d left streaming: %q", i, m.Text)
			}
		}
		var all strings.Builder
		for _, m := range ms {
			all.WriteString(m.Text + "\n")
		}
		for _, w := range ws[:2] {
			if n := strings.Count(all.String(), strings.TrimSpace(w)); n != 1 {
				t.Errorf("%q shows %d times, want once", strings.TrimSpace(w), n)
			}
		}
	})
}

// Slack is slow for a minute (appends land but answer after 12 s) while an answer streams: an append
// that timed out may have landed, so it is not repeated; the stream's text is then unknown and the
// final write rescues the answer. Every line shows once.
func TestTimedOutAppendIsNotRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(90)
		chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, time.Second)}
		r := slowStreaming(fs, fs, chat, streamOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v; appends %d", err, len(fs.CallsOf("appendStream")))
		var all strings.Builder
		for _, m := range fs.BotMessages(testTS) {
			all.WriteString(m.Text + "\n")
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
