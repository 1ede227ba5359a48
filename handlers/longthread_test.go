package handlers

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/threads"
)

// failFirst is a Chat whose first request fails (the summary's), the others going to Chat.
type failFirst struct {
	*llmtest.Chat
	calls atomic.Int32
}

func (f *failFirst) Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error] {
	if f.calls.Add(1) == 1 {
		return func(yield func(llm.Chunk, error) bool) {
			yield(llm.Chunk{}, &llm.Error{Kind: llm.KindServer, Message: "model unavailable", Err: errors.New("503")})
		}
	}
	return f.Chat.Stream(ctx, req)
}

// longThreadTest is a thread far over a small context budget: the question, then 40 messages of the
// asker's, numbered.
func longThreadTest(t *testing.T, chat Chat, made *atomic.Int32) (*Replies, *gatewaytest.Slack, func(text string) route.ReplyRequest) {
	t.Helper()
	fs := newQuestionSlack()
	key := testCh + "/" + testTS
	for i := range 40 {
		var m slack.Message
		m.User, m.ThreadTimestamp = "U1", testTS
		m.Timestamp, m.Text = fmt.Sprintf("1700000001.%06d", i), fmt.Sprintf("thread message %02d %s", i, strings.Repeat("words ", 20))
		fs.Threads[key] = append(fs.Threads[key], m)
	}
	opt := testOptions()
	opt.Budget = 1500
	opt.Summaries = threads.NewSummaries(chat, threads.SummaryOptions{Made: func() { made.Add(1) }})
	r := NewReplies(fs, fs, fs, fs, chat, zaptest.NewLogger(t), opt)
	n := 0
	ask := func(text string) route.ReplyRequest { // a follow-up at the end of the thread
		n++
		var q slack.Message
		q.User, q.Text, q.Timestamp, q.ThreadTimestamp = "U1", "<@UBOT> "+text, fmt.Sprintf("1700000002.%06d", n), testTS
		fs.Threads[key] = append(fs.Threads[key], q)
		req := testRequest()
		req.TS, req.Text = q.Timestamp, q.Text
		return req
	}
	return r, fs, ask
}

// TestLongThreadSummarised: a thread over the budget is asked with a summary of its oldest messages
// (made once, by the model, through the answers' chat) and its recent messages in full; the next
// answer in the thread reuses the summary.
func TestLongThreadSummarised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chat := &llmtest.Chat{Steps: llmtest.Deltas([]string{"the gist"}, 10*time.Millisecond)}
		var made atomic.Int32
		r, _, ask := longThreadTest(t, chat, &made)
		mustNoErr(t, r.Reply(t.Context(), ask("and then?")))
		mustNoErr(t, r.Reply(t.Context(), ask("and after that?")))
		calls := chat.Calls()
		if len(calls) != 3 || made.Load() != 1 {
			t.Fatalf("model calls = %d, summaries made = %d; want 3 (one summary, two answers) and 1", len(calls), made.Load())
		}
		if sum := contents(calls[0].Messages); !strings.Contains(sum, "Write a summary") || !strings.Contains(sum, "explain token buckets") {
			t.Errorf("summary request does not ask for a summary of the thread's beginning:\n%s", sum)
		}
		for i, c := range calls[1:] {
			all := contents(c.Messages)
			if !strings.Contains(all, "a summary of the earlier messages of this thread") || !strings.Contains(all, "\nthe gist\n") {
				t.Errorf("answer %d: request does not carry the fenced summary:\n%s", i+1, all)
			}
			if !strings.Contains(all, "thread message 39") {
				t.Errorf("answer %d: request lacks the recent messages in full:\n%s", i+1, all)
			}
			if strings.Contains(all, "explain token buckets") {
				t.Errorf("answer %d: the thread's beginning is in full, not summarised:\n%s", i+1, all)
			}
		}
	})
}

// TestLongThreadSummaryMadeAgainAfterAnEdit: an edit among the messages the summary stands for
// makes a new one.
func TestLongThreadSummaryMadeAgainAfterAnEdit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chat := &llmtest.Chat{Steps: llmtest.Deltas([]string{"the gist"}, 10*time.Millisecond)}
		var made atomic.Int32
		r, fs, ask := longThreadTest(t, chat, &made)
		mustNoErr(t, r.Reply(t.Context(), ask("and then?")))
		fs.Threads[testCh+"/"+testTS][1].Text = "thread message 00, edited"
		mustNoErr(t, r.Reply(t.Context(), ask("and after that?")))
		if n := len(chat.Calls()); n != 4 || made.Load() != 2 {
			t.Errorf("model calls = %d, summaries made = %d; want 4 (two summaries, two answers) and 2", n, made.Load())
		}
	})
}

// TestLongThreadSummaryFailsToTheCut: when the summary cannot be made, the answer goes on with the
// thread cut oldest-first, as without summaries.
func TestLongThreadSummaryFailsToTheCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chat := &failFirst{Chat: &llmtest.Chat{Steps: llmtest.Deltas([]string{"answer"}, 10*time.Millisecond)}}
		var made atomic.Int32
		r, _, ask := longThreadTest(t, chat, &made)
		rt := ask("and then?")
		mustNoErr(t, r.Reply(t.Context(), rt))
		calls := chat.Chat.Calls()
		if len(calls) != 1 || made.Load() != 0 {
			t.Fatalf("answer calls = %d, summaries made = %d; want 1 and 0", len(calls), made.Load())
		}
		all := contents(calls[0].Messages)
		if !strings.Contains(all, "earlier messages omitted]") || strings.Contains(all, "a summary of the earlier messages") {
			t.Errorf("request is not the cut thread:\n%s", all)
		}
	})
}

func contents(msgs []llm.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Content + "\n")
	}
	return b.String()
}
