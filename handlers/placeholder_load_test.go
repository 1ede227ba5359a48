package handlers

import (
	"context"
	"iter"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/pane"
)

// Under load an answer that ends within a second of its first text while its placeholder shows, in
// a channel whose post budget is spent: the placeholder is withdrawn only when the post of the
// answer can follow at once, so the thread never shows nothing meanwhile.
func TestPlaceholderKeptWhenTheAnswerEndsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		opt.Budgets.Posts = pace.NewKeyed(2, 1) // a post every 30 s in the channel
		steps := []llmtest.Step{{Wait: 3 * time.Second, Chunk: llm.Chunk{Content: "Token "}},
			{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "buckets refill."}},
			{Chunk: llm.Chunk{FinishReason: "stop"}}}
		rt := newReplyTest(t, steps, opt)
		start := time.Now()
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		posts, dels := rt.slack.CallsOf("post"), rt.slack.CallsOf("delete")
		for _, d := range dels {
			if i := slices.IndexFunc(posts, func(p gatewaytest.Call) bool { return !p.At.Before(d.At) }); i < 0 || posts[i].At.Sub(d.At) > time.Second {
				t.Errorf("placeholder deleted at %v with no post of the answer within a second", d.At.Sub(start))
			}
		}
		if got := rt.texts(); strings.Join(got, " ") != "Token buckets refill." {
			t.Errorf("thread %q, want the answer", got)
		}
	})
}

// The first text's post timed out and did not land, and a shutdown comes while the channel's post
// budget is spent: the asker is told privately that the question was not answered.
func TestLostFirstPostNotLandedThenShutdownTellsTheAsker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := lazyOptions()
		opt.Budgets.Posts = pace.NewKeyed(2, 1) // a post every 30 s in the channel
		steps := []llmtest.Step{{Wait: 200 * time.Millisecond, Chunk: llm.Chunk{Content: "Token "}},
			{Wait: time.Minute, Chunk: llm.Chunk{Content: "buckets."}}}
		rt := newReplyTest(t, steps, opt)
		rt.slack.PostErr = nthTimesOut(1, "chat.postMessage") // did not land
		start := time.Now()
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(500*time.Millisecond, func() { cancel(ErrShutdown) })
		_ = rt.r.Reply(ctx, rt.req)
		for _, c := range append(append(rt.slack.CallsOf("post"), rt.slack.CallsOf("delete")...), rt.slack.CallsOf("ephemeral")...) {
			t.Logf("%s at %v: %q %v", c.Method, c.At.Sub(start), c.Text, c.Err)
		}
		if len(rt.texts()) == 0 && len(rt.slack.CallsOf("ephemeral")) == 0 {
			t.Errorf("nothing shows and the asker was not told privately")
		}
	})
}

// timedChat records when each model request is made.
type timedChat struct {
	*llmtest.Chat
	at *[]time.Time
}

func (c timedChat) Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error] {
	*c.at = append(*c.at, time.Now())
	return c.Chat.Stream(ctx, req)
}

// The placeholder's post, due while the thread is read, waits for the channel's post turn; the
// read ends meanwhile: the model is asked at once (the writer takes the placeholder over), not
// after that post.
func TestModelAskedWhileThePlaceholderWaitsForItsPost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := lazyOptions()
		opt.Budgets.Reads = pace.NewBucket(50, 1)                 // a read every 1.2 s
		opt.Budgets.Reads.TryTake()                               // spent a moment ago: this read at 1.2 s
		opt.Budgets.Posts = pace.NewKeyed(6, 1)                   // a post every 10 s in the channel
		mustNoErr(t, opt.Budgets.Posts.Wait(t.Context(), testCh)) // spent by another answer
		fs := newQuestionSlack()
		var at []time.Time
		chat := timedChat{&llmtest.Chat{Steps: llmtest.Deltas([]string{"Token ", "buckets ", "refill."}, 100*time.Millisecond)}, &at}
		r := NewReplies(fs, fs, fs, fs, chat, nil, opt)
		req := testRequest()
		req.TS = "1700000000.000009" // a reply in the thread: the thread is read first
		start := time.Now()
		mustNoErr(t, r.Reply(t.Context(), req))
		for _, c := range fs.CallsOf("replies") {
			t.Logf("%s at %v: %q", c.Method, c.At.Sub(start), c.Text)
		}
		if len(at) != 1 {
			t.Fatalf("%d model requests", len(at))
		}
		t.Logf("model request at %v", at[0].Sub(start))
		if d := at[0].Sub(start); d > 2*time.Second {
			t.Errorf("model asked %v after the question; the thread was read at 1.2 s: it waited for the placeholder's post turn", d)
		}
	})
}

// panickyThread panics on a thread read after a pause (a bug in the read, the thread's content).
type panickyThread struct{ *gatewaytest.Slack }

func (p panickyThread) Replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	time.Sleep(500 * time.Millisecond)
	panic("boom")
}

// Reading the thread panics (the bot recovers and tells the asker): no placeholder is posted after
// Reply has returned, where nobody would close it.
func TestNoPlaceholderAfterAPanicWhileTheThreadIsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		r := NewReplies(panickyThread{fs}, fs, fs, fs, &llmtest.Chat{}, nil, lazyOptions())
		req := testRequest()
		req.TS = "1700000000.000009" // a reply in the thread: the thread is read first
		func() {
			defer func() { _ = recover() }() // as bot.run does
			_ = r.Reply(t.Context(), req)
		}()
		returned := time.Now()
		time.Sleep(5 * time.Second)
		for _, c := range fs.CallsOf("post") {
			if c.At.After(returned) {
				t.Errorf("%q posted %v after Reply returned (panicked)", c.Text, c.At.Sub(returned))
			}
		}
	})
}

// Under load with the thinking status, a thread read longer than the status lasts: the placeholder
// comes when the status would lapse, while the thread is still being read.
func TestPlaceholderWhenTheThinkingStatusLapsesDuringTheRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		opt.Pane = pane.New(&statusPane{}, nil, nil)
		opt.Budgets.Reads = pace.NewBucket(0.4, 1) // a read every 150 s
		opt.Budgets.Reads.TryTake()                // spent a moment ago
		rt := newReplyTest(t, llmtest.Deltas([]string{"Token ", "buckets ", "refill."}, 100*time.Millisecond), opt)
		rt.req.TS = "1700000000.000009" // a reply in the thread: the thread is read first
		start := time.Now()
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		posts := rt.slack.CallsOf("post")
		for _, c := range append(posts, rt.slack.CallsOf("replies")...) {
			t.Logf("%s at %v: %q", c.Method, c.At.Sub(start), c.Text)
		}
		if len(posts) == 0 || posts[0].Text != textThinking || posts[0].At.Sub(start) > thinkingLasts {
			t.Errorf("first post %+v, want the placeholder by %v (the status lapses at two minutes)", posts[0], thinkingLasts)
		}
	})
}

// Under load the first snapshot renders to nothing yet ("**", the start of a bold lead-in): the
// placeholder stays until there is text to post in its place.
func TestPlaceholderKeptForTextThatShowsNothingYet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		steps := []llmtest.Step{{Wait: 3 * time.Second, Chunk: llm.Chunk{Content: "**"}},
			{Wait: 20 * time.Second, Chunk: llm.Chunk{Content: "Token buckets** refill."}},
			{Chunk: llm.Chunk{FinishReason: "stop"}}}
		rt := newReplyTest(t, steps, opt)
		start := time.Now()
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		posts, dels := rt.slack.CallsOf("post"), rt.slack.CallsOf("delete")
		for _, c := range append(posts, dels...) {
			t.Logf("%s at %v: %q", c.Method, c.At.Sub(start), c.Text)
		}
		if len(dels) > 0 && len(posts) > 1 {
			if gap := posts[1].At.Sub(dels[0].At); gap > 2*time.Second {
				t.Errorf("placeholder withdrawn %v before any text was posted", gap)
			}
		}
	})
}

// The first text's post times out but landed, before PlaceholderAfter, and the model goes on past
// it: no placeholder is posted below that text (the final write finds the text and ends the
// answer in it), so the text shows once.
func TestLostFirstPostGetsNoPlaceholder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		posts := 0
		chat := &llmtest.Chat{Steps: []llmtest.Step{{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "The "}},
			{Wait: 3 * time.Second, Chunk: llm.Chunk{Content: "answer."}}, {Chunk: llm.Chunk{FinishReason: "stop"}}}}
		r := NewReplies(fs, landedTimeoutPoster{fs, 1, &posts}, fs, fs, chat, nil, lazyOptions())
		_ = r.Reply(t.Context(), testRequest())
		var got []string
		for _, m := range fs.BotMessages(testTS) {
			got = append(got, m.Text)
		}
		if len(got) != 1 || got[0] != "The answer." {
			t.Errorf("thread = %q, want the answer once", got)
		}
	})
}

// Under load the first text ends inside a heading ("## Overview of "), and the answer ends with no
// edit turn soon: the heading is never split between two messages.
func TestFirstTextUnderLoadNotCutInsideAHeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := append([]llmtest.Step{{Wait: 300 * time.Millisecond, Chunk: llm.Chunk{Content: "## Overview of token"}}},
			llmtest.Deltas([]string{"s\n\n", "Token buckets ", "refill at a steady rate."}, 200*time.Millisecond)...)
		rt := newReplyTest(t, steps, underLoad(t, lazyOptions()))
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		got := rt.texts()
		if len(got) > 1 && strings.HasPrefix(got[1], "tokens") {
			t.Errorf("heading split across messages: %q", got)
		}
	})
}

// The answer says it is done with the model (ModelDone, which frees its place in the bot's line)
// when the model's stream ends, not after its last writes, which under load wait for their turn.
func TestModelDoneBeforeTheLastWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		opt.PlaceholderAfter = 0 // the placeholder at once: its text needs an edit turn
		opt.Budgets.Deletes = pace.NewBucket(1, 1)
		opt.Budgets.Deletes.TryTake() // and it cannot be withdrawn for a post
		rt := newReplyTest(t, llmtest.Deltas([]string{"Token ", "buckets ", "refill."}, 100*time.Millisecond), opt)
		start := time.Now()
		var done []time.Duration
		rt.req.ModelDone = func() { done = append(done, time.Since(start)) }
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		if len(done) != 1 || done[0] > time.Second {
			t.Errorf("ModelDone at %v, want once, as the model's stream ends (0.3 s)", done)
		}
		if took := time.Since(start); took < 10*time.Second {
			t.Errorf("the answer's writes took %v: the case under test (a long wait for the last writes) did not happen", took)
		}
	})
}

// The model's stream ends while the writer waits for a post turn to withdraw the placeholder: the
// answer says it is done with the model at once (its place goes to the next question), not when the
// post turn comes.
func TestModelDoneAsTheStreamEndsWhileTheWriterWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		opt.Budgets.Posts = pace.NewKeyed(2, 1) // a post every 30 s in the channel
		steps := []llmtest.Step{{Wait: 3 * time.Second, Chunk: llm.Chunk{Content: "Token "}},
			{Wait: 2 * time.Second, Chunk: llm.Chunk{Content: "buckets refill."}},
			{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{FinishReason: "stop"}}}
		rt := newReplyTest(t, steps, opt)
		start := time.Now()
		var done time.Duration
		rt.req.ModelDone = func() { done = time.Since(start) }
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		logCalls(t, rt.slack, start)
		if done > 6*time.Second {
			t.Errorf("ModelDone at %v; the model's stream ended at 5.1 s", done)
		}
	})
}

// Under load the first snapshot renders to nothing ("**"); the text that comes two seconds later
// still gets the placeholder withdrawn for it, rather than waiting a minute for an edit.
func TestTextAfterAnEmptySnapshotWithdrawsThePlaceholder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		steps := append([]llmtest.Step{{Wait: 3 * time.Second, Chunk: llm.Chunk{Content: "**"}},
			{Wait: 2 * time.Second, Chunk: llm.Chunk{Content: "Token buckets** refill. "}}},
			llmtest.Deltas(numbered(30), time.Second)...)
		rt := newReplyTest(t, steps, opt)
		start := time.Now()
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		logCalls(t, rt.slack, start)
		var first time.Duration
		for _, c := range append(rt.slack.CallsOf("post"), rt.slack.CallsOf("update")...) {
			if c.Text != textThinking && (first == 0 || c.At.Sub(start) < first) {
				first = c.At.Sub(start)
			}
		}
		if first > 10*time.Second {
			t.Errorf("first text shown at %v; it came at 5 s (the withdrawal takes a second)", first)
		}
	})
}

// landedTimeoutDeleter is a Slack whose first chat.delete deletes the message but answers with
// net/http's timeout, as a slow Slack does.
type landedTimeoutDeleter struct {
	*gatewaytest.Slack
	deletes *int
}

func (s landedTimeoutDeleter) Delete(ctx context.Context, channel, ts string) error {
	err := s.Slack.Delete(ctx, channel, ts)
	if *s.deletes++; *s.deletes == 1 && err == nil {
		return timedOut("chat.delete")
	}
	return err
}

// The withdrawal's delete times out but landed: it is made again (message_not_found: gone), so
// the answer is posted rather than edited into a message that is no more.
func TestWithdrawalDeleteThatTimedOutButLanded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		opt.Budgets.Deletes = pace.NewBucket(1, 1) // one delete token: the withdrawal's
		fs := newQuestionSlack()
		n := 0
		chat := &llmtest.Chat{Steps: slowStart("refill ", "steadily.")}
		r := NewReplies(fs, landedTimeoutDeleter{fs, &n}, fs, fs, chat, nil, opt)
		start := time.Now()
		err := r.Reply(t.Context(), testRequest())
		logCalls(t, fs, start)
		var got []string
		for _, m := range fs.BotMessages(testTS) {
			got = append(got, m.Text)
		}
		if len(got) == 0 {
			t.Errorf("the thread shows nothing of the answer (Reply: %v; ephemerals %d)", err, len(fs.CallsOf("ephemeral")))
		}
	})
}

// A withdrawal's delete refused with a 429 pauses the chat.delete budget for every answer (the next
// withdrawal waits it out), and the text waits for its edit instead.
func TestWithdrawalDeleteRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		opt.Budgets.Deletes = pace.NewBucket(50, 5)
		rt := newReplyTest(t, slowStart("refill ", "steadily."), opt)
		rt.slack.DeleteErr = func(n int, _ gatewaytest.Call) error {
			return &slack.RateLimitedError{RetryAfter: 30 * time.Second}
		}
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		dels := rt.slack.CallsOf("delete")
		for i := 1; i < len(dels); i++ {
			if d := dels[i].At.Sub(dels[i-1].At); d < 30*time.Second {
				t.Errorf("a delete %v after a 429 with Retry-After 30 s", d)
			}
		}
		if got := rt.texts(); strings.Join(got, " ") != "Token buckets refill steadily." {
			t.Errorf("thread %q, want the answer", got)
		}
	})
}
