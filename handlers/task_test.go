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
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/route"
)

// turnsOf is the i-th model request's messages after the system prompt, as "role: content".
func turnsOf(rt *replyTest, i int) []string {
	var out []string
	for _, m := range rt.chat.Calls()[i].Messages[1:] {
		out = append(out, string(m.Role)+": "+m.Content)
	}
	return out
}

// setSteps scripts the model's next answers.
func (rt *replyTest) setSteps(steps []llmtest.Step) {
	rt.chat.SetSteps(steps)
}

// A task (the "Summarize thread" shortcut) answers in the thread like a mention, with the whole
// thread as its context and the task's instruction in place of a question. Regenerate on its
// answer does the task again, in place, without the old summary in the context; the next question
// in the thread sees both the earlier answer and the summary.
func TestTaskSummarizesTheThreadAndRegenerateSummarizesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"Tokens refill at a steady rate."}, time.Millisecond), buttonOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		key := testCh + "/" + testTS
		// Bob wrote before the answer came (the fake lists people's messages before the bot's).
		var later slack.Message
		later.User, later.Text, later.Timestamp, later.ThreadTimestamp = "U2", "we'll use them for the API", "1700000000.000050", testTS
		rt.slack.Threads[key] = append(rt.slack.Threads[key], later)

		// Bob uses the shortcut on the thread's first message.
		rt.setSteps(llmtest.Deltas([]string{"Alice asked about token buckets; Bob will use them."}, time.Millisecond))
		task := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U2", Team: "T1", TS: testTS,
			ThreadTS: testTS, Task: TaskSummarize}
		mustNoErr(t, rt.r.Reply(t.Context(), task))
		// Whoever asks for the summary, the others' messages are data from them.
		aliceSaid := "user: " + fenced(`a message by "Alice" (another person)`, "explain token buckets")
		bobSaid := "user: " + fenced(`a message by "Bob" (another person)`, "we'll use them for the API")
		want := []string{
			aliceSaid,
			"user: Bob: we'll use them for the API",
			"assistant: Tokens refill at a steady rate.",
			"user: Bob: " + taskInstructions[TaskSummarize],
		}
		if got := turnsOf(rt, 1); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("summary request = %q\nwant %q", got, want)
		}
		msgs := rt.slack.BotMessages(testTS)
		if len(msgs) != 2 {
			t.Fatalf("%d bot messages, want the answer and the summary", len(msgs))
		}
		summary := msgs[1]
		if summary.Text != "Alice asked about token buckets; Bob will use them." {
			t.Errorf("summary text %q", summary.Text)
		}
		if summary.Mark.Kind != convo.MarkAnswer || summary.Mark.Question == "" || summary.Mark.Question == testTS {
			t.Errorf("summary mark %+v: want an answer whose question is not the first message's", summary.Mark)
		}
		ref, err := route.ParseReplyRef(summary.Buttons[0].Value)
		if err != nil || summary.Buttons[0].ActionID != route.ActionRegenerate || ref != (route.ReplyRef{ThreadTS: testTS, TS: testTS, Task: TaskSummarize}) {
			t.Fatalf("summary buttons %+v (ref %+v, %v): want Regenerate carrying the task", summary.Buttons, ref, err)
		}

		// Alice presses Regenerate on the summary: summarised again, written over the old summary.
		rt.setSteps(llmtest.Deltas([]string{"Token buckets: Bob adopts them for the API."}, time.Millisecond))
		h := RegenerateHandler(rt.r)
		click := &route.Request{Kind: route.Action, Name: route.ActionRegenerate, Channel: testCh, User: "U1", Team: "T1",
			ThreadTS: testTS, MessageTS: summary.TS, Text: summary.Buttons[0].Value}
		if d := h.Accept(click); !d.Run || click.Reply == nil || click.Reply.Task != TaskSummarize || click.Reply.Replace != summary.TS {
			t.Fatalf("regenerate accepted %+v with %+v: want the task again in place of the summary", d, click.Reply)
		}
		mustNoErr(t, h.Run(t.Context(), click))
		want[0], want[1] = "user: Alice: explain token buckets", bobSaid
		want[len(want)-1] = "user: Alice: " + taskInstructions[TaskSummarize]
		if got := turnsOf(rt, 2); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("regenerated summary request = %q\nwant %q (the old summary left out)", got, want)
		}
		msgs = rt.slack.BotMessages(testTS)
		if len(msgs) != 2 || msgs[1].TS != summary.TS || msgs[1].Text != "Token buckets: Bob adopts them for the API." {
			t.Fatalf("thread after Regenerate = %+v, want the new summary in the old one's message", msgs)
		}
		if msgs[1].Mark.Question != summary.Mark.Question {
			t.Errorf("regenerated summary's question %q, want the old one's %q", msgs[1].Mark.Question, summary.Mark.Question)
		}

		// The next question sees the first answer and the summary, each once.
		var q slack.Message
		q.User, q.Text, q.Timestamp, q.ThreadTimestamp = "U1", "<@UBOT> and leaky buckets?", "1700000000.000900", testTS
		rt.slack.Threads[key] = append(rt.slack.Threads[key], q)
		rt.setSteps(llmtest.Deltas([]string{"Leaky buckets drain."}, time.Millisecond))
		next := rt.req
		next.TS, next.Text = q.Timestamp, q.Text
		mustNoErr(t, rt.r.Reply(t.Context(), next))
		want = []string{
			"user: Alice: explain token buckets",
			bobSaid,
			"assistant: Tokens refill at a steady rate.",
			"assistant: Token buckets: Bob adopts them for the API.",
			"user: Alice: and leaky buckets?",
		}
		if got := turnsOf(rt, 3); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("next question's context = %q\nwant %q", got, want)
		}
	})
}

// A task starts no thread of its own: a top-level message with no replies yet is read from
// Slack (the shortcut gives no text), and the summary answers in that message's thread.
func TestTaskOnATopLevelMessageReadsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"- One question about token buckets."}, time.Millisecond), testOptions())
		task := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U2", TS: testTS, ThreadTS: testTS, Task: TaskSummarize}
		mustNoErr(t, rt.r.Reply(t.Context(), task))
		if n := len(rt.slack.CallsOf("replies")); n != 1 {
			t.Errorf("%d thread reads, want 1", n)
		}
		if got := turnsOf(rt, 0); len(got) != 2 || got[0] != "user: "+fenced(`a message by "Alice" (another person)`, "explain token buckets") ||
			!strings.Contains(got[1], "Summarize this thread") {
			t.Errorf("request %q: want the message, then the instruction", got)
		}
	})
}

// A Regenerate button of a task this version does not know says so, and asks nothing.
func TestUnknownTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, nil, buttonOptions())
		req := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U2", TS: testTS, ThreadTS: testTS, Task: "translate"}
		mustNoErr(t, rt.r.Reply(context.Background(), req))
		if n := len(rt.chat.Calls()); n != 0 {
			t.Errorf("%d model requests, want none", n)
		}
		msgs := rt.slack.BotMessages(testTS)
		if len(msgs) != 1 || !strings.Contains(msgs[0].Text, textUnknownTask) || msgs[0].Mark.Kind != convo.MarkNotice || len(msgs[0].Buttons) != 0 {
			t.Errorf("thread %+v: want one notice saying so, without Regenerate", msgs)
		}
	})
}

func TestReplyRefTask(t *testing.T) {
	for _, tc := range []struct {
		ref  route.ReplyRef
		want string
	}{
		{route.ReplyRef{ThreadTS: "1.1", TS: "1.2"}, `{"thread_ts":"1.1","ts":"1.2"}`}, // the value buttons always had
		{route.ReplyRef{ThreadTS: "1.1", TS: "1.1", Task: TaskSummarize}, `{"thread_ts":"1.1","ts":"1.1","task":"summarize"}`},
	} {
		if got := tc.ref.Value(); got != tc.want {
			t.Errorf("%+v.Value() = %s, want %s", tc.ref, got, tc.want)
		}
		if back, err := route.ParseReplyRef(tc.want); err != nil || back != tc.ref {
			t.Errorf("route.ParseReplyRef(%s) = %+v, %v", tc.want, back, err)
		}
	}
}
