package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
)

// BenchmarkReply measures the handler's own cost (context build, the reader loop, the writer, Markdown
// rendering, the final write) for one 400-token answer, with in-memory Slack and model and a budget that
// never makes anyone wait: every snapshot the writer takes is rendered and written (an upper bound: under
// Slack's budget a reply writes about once a second). ns/op is per reply of 400 tokens; writes/op is the
// number of Slack writes it made.
func BenchmarkReply(b *testing.B) {
	for _, mode := range []ReplyMode{ModeEdit, ModeStream} {
		b.Run(string(mode), func(b *testing.B) {
			var sb strings.Builder
			for i := range 400 {
				if i%25 == 24 {
					sb.WriteString("\n\n")
				}
				fmt.Fprintf(&sb, "tok%d **b** ", i)
			}
			ws := llmtest.Words(sb.String(), 12)
			steps := make([]llmtest.Step, 0, len(ws)+1)
			for _, w := range ws {
				steps = append(steps, llmtest.Step{Chunk: llm.Chunk{Content: w}})
			}
			steps = append(steps, llmtest.Step{Chunk: llm.Chunk{FinishReason: "stop"}})
			r, fs, req := unlimitedReplies(mode, "<@UBOT> write a lot", steps)
			ctx := context.Background()
			writes := 0
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Reply(ctx, req); err != nil {
					b.Fatal(err)
				}
				fs.Mu.Lock()
				for _, c := range fs.Calls {
					if c.Method != "replies" && c.Method != "users.info" {
						writes++
					}
				}
				fs.Calls, fs.Msgs = fs.Calls[:0], fs.Msgs[:0] // keep the thread small
				fs.Mu.Unlock()
			}
			b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
		})
	}
}

// reasoningReplies returns Replies whose model reasons for n tokens, in the content as a <think>
// block (inContent) or apart (reasoning_content), then answers in 400 tokens, with in-memory Slack
// and model and budgets that never wait, and a request for it.
func reasoningReplies(n int, inContent bool) (*Replies, *gatewaytest.Slack, route.ReplyRequest) {
	var steps []llmtest.Step
	if inContent {
		steps = append(steps, llmtest.Step{Chunk: llm.Chunk{Content: "<think>\n"}})
	}
	for i := range n {
		w := fmt.Sprintf(" w%d", i%100)
		if inContent {
			steps = append(steps, llmtest.Step{Chunk: llm.Chunk{Content: w}})
		} else {
			steps = append(steps, llmtest.Step{Chunk: llm.Chunk{Reasoning: w}})
		}
	}
	if inContent {
		steps = append(steps, llmtest.Step{Chunk: llm.Chunk{Content: "\n</think>\n\n"}})
	}
	for i := range 400 {
		steps = append(steps, llmtest.Step{Chunk: llm.Chunk{Content: fmt.Sprintf("tok%d ", i)}})
	}
	steps = append(steps, llmtest.Step{Chunk: llm.Chunk{FinishReason: "stop"}})
	return unlimitedReplies(ModeEdit, "<@UBOT> think hard", steps)
}

// unlimitedReplies returns Replies writing in mode, with in-memory Slack (a thread of one message,
// question) and model (sending steps) and budgets that never wait, and the request of question.
func unlimitedReplies(mode ReplyMode, question string, steps []llmtest.Step) (*Replies, *gatewaytest.Slack, route.ReplyRequest) {
	fs := gatewaytest.NewSlack()
	fs.Threads[testCh+"/"+testTS] = []slack.Message{mention(question)}
	opt := testOptions()
	opt.Mode = mode
	opt.Budgets.Edits = pace.NewScheduler(1e9, 1e6)
	opt.Budgets.Appends = pace.NewScheduler(1e9, 1e6)
	opt.Budgets.Posts = pace.NewKeyed(1e9, 1e6)
	opt.Budgets.Streams = pace.NewBucket(1e9, 1e6)
	r := NewReplies(fs, fs, fs, fs, &llmtest.Chat{Steps: steps}, zap.NewNop(), opt)
	req := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", Team: "T1", TS: testTS,
		ThreadTS: testTS, Text: question}
	return r, fs, req
}

// BenchmarkReplyReasoning measures a reply whose model reasons for n tokens before a 400-token
// answer, the reasoning sent apart (reasoning_content) or left in the content as a <think> block
// (convo.ThinkFilter): per token, the second must cost no more as the reasoning grows (ns/op for
// 32k tokens about four times that for 8k).
func BenchmarkReplyReasoning(b *testing.B) {
	for _, where := range []string{"apart", "content"} {
		for _, n := range []int{8000, 32000} {
			b.Run(fmt.Sprintf("%s/%dk", where, n/1000), func(b *testing.B) {
				r, fs, req := reasoningReplies(n, where == "content")
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if err := r.Reply(ctx, req); err != nil {
						b.Fatal(err)
					}
					fs.Mu.Lock()
					fs.Calls, fs.Msgs = fs.Calls[:0], fs.Msgs[:0]
					fs.Mu.Unlock()
				}
			})
		}
	}
}
