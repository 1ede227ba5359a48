package handlers

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/pace"
)

// postsOf returns the successful posts in thread, oldest first.
func postsOf(fs *gatewaytest.Slack, thread string) []gatewaytest.Call {
	var out []gatewaytest.Call
	for _, c := range fs.CallsOf("post") {
		if c.Thread == thread && c.Err == nil {
			out = append(out, c)
		}
	}
	return out
}

// Under load an answer whose end finds no edit turn free posts the end below what its message shows
// at once, from the post its channel kept for it: the end shows as the model stops, not a second
// later.
func TestAnswerEndPostedAtOnceUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"Token buckets refill at a steady rate. ", "They never overflow."},
			300*time.Millisecond), underLoad(t, lazyOptions()))
		start := time.Now()
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		logCalls(t, rt.slack, start)
		posts := postsOf(rt.slack, testTS)
		if len(posts) != 2 || !strings.HasPrefix(posts[1].Text, "They never overflow.") {
			t.Fatalf("thread %q, want the first text and the end posted below it", rt.texts())
		}
		lastToken := 600 * time.Millisecond
		if at := posts[1].At.Sub(start); at != lastToken {
			t.Errorf("end posted at %v, want at %v, as the model stopped", at, lastToken)
		}
	})
}

// Two answers in one channel whose post budget is nearly spent: the long one, still streaming, has a
// part to post (progress) just as the other ends. The progress post leaves the channel's last post
// to the end, which shows at once; the long answer's part waits.
func TestProgressPostLeavesTheEndItsPost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		opt.Budgets.Posts = pace.NewKeyed(2, 3) // a post every 30 s in the channel after three
		opt.Budgets.PostsWorkspace = pace.NewBucket(300, 20)
		fs := gatewaytest.NewSlack()
		const longTS, shortTS = "1700000000.000001", "1700000000.000002"
		fs.Threads[testCh+"/"+longTS] = []slack.Message{mention(testQuestion)}
		fs.Threads[testCh+"/"+shortTS] = []slack.Message{mention(testQuestion)}
		// The long answer's first text is more than a message holds: its second part is a post that
		// only shows progress. It streams on until 6 s; the short one ends at 4 s.
		paragraphs := strings.Repeat(strings.Repeat("Buckets refill at a steady rate. ", 10)+"\n\n", 15)
		long := &llmtest.Chat{Steps: append([]llmtest.Step{{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: paragraphs}}},
			llmtest.Deltas(strings.Fields(strings.Repeat("and on ", 12)), 500*time.Millisecond)...)}
		short := &llmtest.Chat{Steps: []llmtest.Step{
			{Wait: 300 * time.Millisecond, Chunk: llm.Chunk{Content: "Token buckets refill. "}},
			{Wait: 3700 * time.Millisecond, Chunk: llm.Chunk{Content: "They never overflow."}},
			{Chunk: llm.Chunk{FinishReason: "stop"}}}}
		replies := map[string]*Replies{
			longTS:  NewReplies(fs, fs, fs, fs, long, zaptest.NewLogger(t), opt),
			shortTS: NewReplies(fs, fs, fs, fs, short, zaptest.NewLogger(t), opt),
		}
		start := time.Now()
		done := make(chan error, len(replies)) // one result from each answer, read below
		for ts, r := range replies {
			req := testRequest()
			req.TS, req.ThreadTS = ts, ts
			go func() { done <- r.Reply(t.Context(), req) }()
		}
		for range replies {
			mustNoErr(t, <-done)
		}
		logCalls(t, fs, start)
		posts := postsOf(fs, shortTS)
		if len(posts) != 2 || !strings.HasPrefix(posts[1].Text, "They never overflow.") {
			t.Fatalf("short answer's posts %+v, want its first text and its end below it", posts)
		}
		if at, lastToken := posts[1].At.Sub(start), 4*time.Second; at != lastToken {
			t.Errorf("short answer's end posted at %v, want at %v, as its model stopped", at, lastToken)
		}
		if n := len(postsOf(fs, longTS)); n < 2 {
			t.Errorf("long answer posted %d messages, want its parts", n)
		}
	})
}
