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
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

// Slack is slow for a minute while an answer streams (appends land but answer after 12 s): an append
// times out, the stream is marked broken and the final write rescues the answer with posts, whose
// first times out too (and did not land). The streamed message is then stopped as it stands, with a
// note that the rest is missing, not left streaming.
func TestFailedRescueStopsTheStreamWithANote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(20)
		chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, time.Second)}
		t0 := time.Now()
		fs.PostErr = nthTimesOut(1, "chat.postMessage") // the rescue's post times out (and did not land); Slack takes later posts
		r := slowStreaming(fs, fs, chat, streamOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		var all strings.Builder
		for i, m := range fs.BotMessages(testTS) {
			t.Logf("message %d: streaming %v mark %+v text %q", i, m.Streaming, m.Mark, m.Text)
			all.WriteString(m.Text + "\n")
			if m.Streaming {
				t.Errorf("message %d is left streaming after the reply ended", i)
			}
		}
		end := strings.TrimSpace(ws[len(ws)-1])
		if !strings.Contains(all.String(), end) && !strings.Contains(all.String(), textUnfinished) &&
			!strings.Contains(all.String(), "went wrong") {
			t.Errorf("the thread shows neither the answer's end %q nor any note that it is missing", end)
		}
	})
}

// As TestFailedRescueStopsTheStreamWithANote, with buttons: the streamed message stopped as it
// stands, with the note that asks to ask again, is the answer's last message, and carries
// Regenerate as every finished answer's last message does (buttons.go).
func TestFailedRescueStopKeepsRegenerate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(20)
		chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, time.Second)}
		t0 := time.Now()
		fs.PostErr = nthTimesOut(1, "chat.postMessage") // the rescue's post times out (and did not land)
		opt := streamOptions()
		opt.Buttons = true
		r := slowStreaming(fs, fs, chat, opt)
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		regen, noted := false, false
		for i, m := range fs.BotMessages(testTS) {
			t.Logf("message %d: streaming %v buttons %q mark %+v text %.80q", i, m.Streaming, buttonKey(m.Buttons), m.Mark, m.Text)
			regen = regen || buttonKey(m.Buttons) == route.ActionRegenerate
			noted = noted || strings.Contains(m.Text, textUnfinished)
		}
		if !noted {
			t.Fatalf("no message shows %q: not the case under test", textUnfinished)
		}
		if !regen {
			t.Errorf("the answer ends with %q, and no message carries Regenerate", textUnfinished)
		}
	})
}

// A long streamed answer fills its first message, which is stopped; the chat.startStream of the
// next one times out (Slack is in trouble), so the stream is broken and the final write rescues the
// answer, whose first post times out too. No streamed message is open then: the note that the rest is
// missing goes in a new streamed message, so the first does not pass for the whole answer.
//   - "post slot": with a channel post budget of one a second (burst 1; ReplyOptions.Posts covers
//     chat.postMessage and chat.startStream) and a Slack that holds to it (a post or a stream start in
//     the channel less than a second after the last one gets a 429), the note's chat.startStream waits
//     for the channel's post slot like any other, and the note shows.
func TestFailedRescueWithoutOpenStreamStillSaysSo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options func() ReplyOptions // called in the test's bubble, where its budgets keep time
		gap     time.Duration       // the least time between a channel's posts and stream starts that Slack takes without a 429 (0: none)
	}{
		{"any budget", streamOptions, 0},
		{"post slot", func() ReplyOptions {
			opt := streamOptions()
			opt.Budgets.Posts = pace.NewKeyed(60, 1)
			return opt
		}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var steps []llmtest.Step
				total := 0
				for i := 0; total < slackmd.MarkdownLimit+2000; i++ {
					l := fmt.Sprintf("Line %d: %s\n", i, strings.Repeat("abc ", 20))
					total += len(l)
					steps = append(steps, llmtest.Step{Wait: 20 * time.Millisecond, Chunk: llm.Chunk{Content: l}})
				}
				steps = append(steps, llmtest.Step{Wait: time.Second, Chunk: llm.Chunk{Content: "The END.\n"}},
					llmtest.Step{Chunk: llm.Chunk{FinishReason: "stop"}})
				rt := newReplyTest(t, steps, tc.options())
				t0 := time.Now()
				var last time.Time // the channel's last post or stream start, as Slack saw it
				perChannel := func() error {
					now := time.Now()
					if !last.IsZero() && now.Sub(last) < tc.gap {
						return &slack.RateLimitedError{RetryAfter: time.Second}
					}
					last = now
					return nil
				}
				rt.slack.StartErr = func(n int, c gatewaytest.Call) error {
					if err := perChannel(); err != nil {
						return err
					}
					if n == 2 { // the answer's second streamed message
						return timedOut("chat.startStream")
					}
					return nil
				}
				rt.slack.PostErr = func(n int, c gatewaytest.Call) error {
					if err := perChannel(); err != nil {
						return err
					}
					if n == 1 { // the rescue's first post
						return timedOut("chat.postMessage")
					}
					return nil
				}
				err := rt.r.Reply(t.Context(), rt.req)
				t.Logf("Reply = %v after %v", err, time.Since(t0))
				rt.slack.Mu.Lock()
				for _, c := range rt.slack.Calls {
					if c.Method != "appendStream" {
						t.Logf("+%v %s ts=%s %d bytes err=%v", c.At.Sub(t0), c.Method, c.TS, len(c.Text), c.Err)
					}
				}
				rt.slack.Mu.Unlock()
				var all strings.Builder
				for i, m := range rt.slack.BotMessages(testTS) {
					t.Logf("message %d: streaming %v mark %+v %d bytes, ends %q", i, m.Streaming, m.Mark, len(m.Text), m.Text[max(0, len(m.Text)-60):])
					all.WriteString(m.Text + "\n")
				}
				if strings.Contains(all.String(), "The END.") {
					t.Fatalf("the thread shows the answer's end: not the case under test")
				}
				if !strings.Contains(all.String(), textUnfinished) {
					t.Errorf("the thread lacks the answer's end and shows no note %q that it is missing", textUnfinished)
				}
			})
		})
	}
}

// A long streamed answer is rescued (an append timed out), and the rescue's second post times out
// (and did not land) after its first went through. The rescue's first part (which repeats the start
// of the answer) is taken back, and the stream is stopped as it stands with the note that the rest
// is missing: the start of the answer shows once, and the last message carries the note.
func TestPartlyFailedRescueShowsNoTextTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(200)
		chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, 100*time.Millisecond)}
		t0 := time.Now()
		fs.PostErr = nthTimesOut(2, "chat.postMessage") // the rescue's second post times out (and did not land)
		r := slowStreaming(fs, fs, chat, streamOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		ms := fs.BotMessages(testTS)
		var all strings.Builder
		for i, m := range ms {
			t.Logf("message %d: streaming %v mark %+v %d bytes, starts %.30q ends %q", i, m.Streaming, m.Mark, len(m.Text), m.Text, m.Text[max(0, len(m.Text)-70):])
			all.WriteString(m.Text + "\n")
		}
		if !strings.Contains(all.String(), textUnfinished) {
			t.Fatalf("no message shows %q: not the case under test", textUnfinished)
		}
		if n := strings.Count(all.String(), "Line 0 of the answer."); n != 1 {
			t.Errorf("the answer's first line shows %d times in the thread, want once", n)
		}
		if last := ms[len(ms)-1]; !strings.Contains(last.Text, textUnfinished) {
			t.Errorf("the answer's last message ends %q, without the note %q (it is above, on the streamed message)", last.Text[max(0, len(last.Text)-50):], textUnfinished)
		}
	})
}

// As TestPartlyFailedRescueShowsNoTextTwice, but the rescue's second post, which times out, did land
// (a timed-out post may have: edit.go). The rescue takes back the part that landed too (found in the
// thread by its mark), not only the first: no part is left naming a deleted first part, and the next
// question in the thread sees the answer from its start, not the second part alone in its place.
func TestPartlyFailedRescueLandedPartKeepsReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(200)
		chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, 100*time.Millisecond)}
		t0 := time.Now()
		posts := 0
		msgs := landedTimeoutPoster{fs, 2, &posts}
		r := slowStreaming(fs, msgs, chat, streamOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		var all strings.Builder
		for i, m := range fs.BotMessages(testTS) {
			t.Logf("message %d: ts %s streaming %v mark %+v %d bytes, starts %.30q ends %q", i, m.TS, m.Streaming, m.Mark, len(m.Text), m.Text, m.Text[max(0, len(m.Text)-70):])
			all.WriteString(m.Text + "\n")
		}
		if !strings.Contains(all.String(), textUnfinished) {
			t.Fatalf("no message shows %q: not the case under test", textUnfinished)
		}
		as := assistantMessages(askAgain(t, &replyTest{slack: fs, chat: chat, r: r, req: req}))
		for i, a := range as {
			t.Logf("replayed assistant message %d: %d bytes, starts %.40q", i, len(a), a)
		}
		if len(as) != 1 || !strings.Contains(as[0], "Line 0 of the answer.") {
			t.Errorf("the next question sees the answer as %d assistant messages, without its start (Line 0): the part that landed replaces it", len(as))
		}
	})
}

// As TestPartlyFailedRescueShowsNoTextTwice (the rescue's second post times out and did NOT land),
// but the optional look in the thread cannot be made: Slack's Tier 3 read budget is spent (429), or
// no read token is free. The posted part is still taken back (docs/design.md: "a rescue that fails
// takes back the parts it posted"): each line shows once.
func TestFailedRescueTakesBackPostedPartsWhenItCannotLook(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cannotLook func(fs *gatewaytest.Slack, opt *ReplyOptions) // keeps the look in the thread from being made
	}{
		{"read429", func(fs *gatewaytest.Slack, _ *ReplyOptions) {
			fs.RepliesErr = func(n int, c gatewaytest.Call) error {
				if n == 1 { // the look: Slack's read budget is spent for now
					return &slack.RateLimitedError{RetryAfter: 30 * time.Second}
				}
				return nil
			}
		}},
		{"noReadToken", func(_ *gatewaytest.Slack, opt *ReplyOptions) {
			opt.Budgets.Reads = pace.NewBucket(0.001, 1)
			opt.Budgets.Reads.TryTake() // other replies spent the workspace's read budget
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := newQuestionSlack()
				ws := lines(200)
				chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, 100*time.Millisecond)}
				t0 := time.Now()
				fs.PostErr = nthTimesOut(2, "chat.postMessage") // the rescue's second post times out (and did not land)
				opt := streamOptions()
				tc.cannotLook(fs, &opt)
				r := slowStreaming(fs, fs, chat, opt)
				req := testRequest()
				err := r.Reply(t.Context(), req)
				t.Logf("Reply = %v after %v", err, time.Since(t0))
				logCalls(t, fs, t0)
				var all strings.Builder
				for i, m := range fs.BotMessages(testTS) {
					t.Logf("message %d: streaming %v mark %+v %d bytes, starts %.30q", i, m.Streaming, m.Mark, len(m.Text), m.Text)
					all.WriteString(m.Text + "\n")
				}
				if !strings.Contains(all.String(), textUnfinished) {
					t.Fatalf("no message shows %q: not the case under test", textUnfinished)
				}
				if n := strings.Count(all.String(), "Line 0 of the answer."); n != 1 {
					t.Errorf("the answer's first line shows %d times in the thread, want once: the failed rescue kept its posted part", n)
				}
			})
		})
	}
}
