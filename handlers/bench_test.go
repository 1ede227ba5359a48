package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/pace"
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
			ws := words(sb.String(), 12)
			steps := make([]step, 0, len(ws)+1)
			for _, w := range ws {
				steps = append(steps, step{chunk: llm.Chunk{Content: w}})
			}
			steps = append(steps, step{chunk: llm.Chunk{FinishReason: "stop"}})
			fs := newFakeSlack()
			fs.threads[testCh+"/"+testTS] = []slack.Message{mention("<@UBOT> write a lot")}
			opt := testOptions()
			opt.Mode = mode
			opt.Edits = pace.NewScheduler(1e9, 1e6)
			opt.Appends = pace.NewScheduler(1e9, 1e6)
			opt.Posts = pace.NewKeyed(1e9, 1e6)
			opt.Streams = pace.NewBucket(1e9, 1e6)
			r := NewReplies(fs, fs, fs, fs, &fakeChat{steps: steps}, zap.NewNop(), opt)
			req := ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", Team: "T1", TS: testTS,
				ThreadTS: testTS, Text: "<@UBOT> write a lot"}
			ctx := context.Background()
			writes := 0
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Reply(ctx, req); err != nil {
					b.Fatal(err)
				}
				fs.mu.Lock()
				for _, c := range fs.calls {
					if c.method != "replies" && c.method != "users.info" {
						writes++
					}
				}
				fs.calls, fs.msgs = fs.calls[:0], fs.msgs[:0] // keep the thread small
				fs.mu.Unlock()
			}
			b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
		})
	}
}
