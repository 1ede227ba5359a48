package handlers

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
)

// shortAnswer is a model answer of one word.
var shortAnswer = []llmtest.Step{{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "ok"}},
	{Chunk: llm.Chunk{FinishReason: "stop"}}}

func TestNewThreadMentionReadsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions()) // a top-level mention in a channel
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		if n := len(rt.slack.CallsOf("replies")) + len(rt.slack.CallsOf("history")); n != 0 {
			t.Errorf("%d reads, want none: nothing was said in a new thread", n)
		}
		reqs := rt.chat.Calls()
		if len(reqs) != 1 || !strings.Contains(fmt.Sprint(reqs[0].Messages), "explain token buckets") {
			t.Errorf("model requests = %+v, want one with the question", reqs)
		}
		if got := rt.texts(); len(got) != 1 || got[0] != "ok" {
			t.Errorf("answer = %q, want [ok]", got)
		}
	})
}

func TestMentionInExistingThreadReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		var q slack.Message
		q.User, q.Text, q.Timestamp, q.ThreadTimestamp = "U2", "<@UBOT> and leaky buckets?", "1700000000.000050", testTS
		key := testCh + "/" + testTS
		rt.slack.Threads[key] = append(rt.slack.Threads[key], q)
		rt.req.User, rt.req.TS, rt.req.Text = q.User, q.Timestamp, q.Text
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		if n := len(rt.slack.CallsOf("replies")); n != 1 {
			t.Errorf("conversations.replies called %d times, want 1", n)
		}
		reqs := rt.chat.Calls()
		if len(reqs) != 1 || !strings.Contains(fmt.Sprint(reqs[0].Messages), "explain token buckets") {
			t.Errorf("model requests = %+v, want one with the thread's first message as context", reqs)
		}
	})
}

// limitedBy is a fake Slack method's hook that answers 429 with Retry-After (whole seconds, as Slack
// sends) beyond lim.
func limitedBy(lim *gatewaytest.Limiter) gatewaytest.Hook {
	return func(int, gatewaytest.Call) error {
		if ok, wait := lim.Allow(); !ok {
			return &slack.RateLimitedError{RetryAfter: time.Duration(math.Ceil(wait.Seconds())) * time.Second}
		}
		return nil
	}
}

// TestConcurrentReadsShareTheReadBudget: replies in existing threads that all start together queue for
// conversations.replies on the shared budget instead of retrying into a 429 storm, and all succeed.
// "drained" starts with Slack's budget used up elsewhere: the first read's 429 pauses every reader
// for its Retry-After and no further 429 follows.
func TestConcurrentReadsShareTheReadBudget(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name    string
		tokens  float64 // Slack's read budget left at the start, of its burst of 5
		limited bool    // some reads get a 429
	}{
		{"drained=false", 5, false},
		{"drained=true", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := gatewaytest.NewSlack()
				lim := gatewaytest.NewLimiter(50, 5)
				lim.Tokens = tc.tokens
				fs.RepliesErr = limitedBy(lim) // Tier 3: 50 a minute, burst 5
				r := NewReplies(fs, fs, fs, fs, &llmtest.Chat{Steps: shortAnswer}, zap.NewNop(), testOptions())
				for i := range n {
					fs.Threads[fmt.Sprint("C", i, "/", testTS)] = []slack.Message{mention("<@UBOT> go")}
				}
				var wg sync.WaitGroup
				for i := range n {
					ch := fmt.Sprint("C", i)
					req := route.ReplyRequest{Channel: ch, ChannelType: "channel", User: "U1", Team: "T1",
						TS: "1700000000.000050", ThreadTS: testTS, Text: "<@UBOT> and then?"}
					wg.Go(func() {
						if err := r.Reply(t.Context(), req); err != nil {
							t.Errorf("%s: %v", ch, err)
						}
					})
				}
				wg.Wait()
				var ok int
				var limited []time.Time
				for _, c := range fs.CallsOf("replies") {
					if c.Err == nil {
						ok++
					} else {
						limited = append(limited, c.At)
					}
				}
				if ok != n {
					t.Errorf("%d successful reads, want %d", ok, n)
				}
				// Drained: the first read's 429, and any read already under way with it (goroutines run
				// in parallel within the bubble), but none after the pause it starts.
				if got := len(limited) > 0; got != tc.limited {
					t.Errorf("%d reads got a 429, want any: %t", len(limited), tc.limited)
				}
				if slices.ContainsFunc(limited, func(at time.Time) bool { return !at.Equal(limited[0]) }) {
					t.Errorf("429s at %v, want them all at the start, before the first pause", limited)
				}
				if m := len(fs.BotMessages(testTS)); m != n {
					t.Errorf("%d answers, want %d", m, n)
				}
			})
		})
	}
}

// TestPostBudgetsAfterA429: Slack's post budget is spent when the replies start (as after a restart
// mid-load).
//   - "spent channel": four replies in one channel take its three slots of burst and queue for the
//     workspace's (burst 1); Slack answers posts after 50 ms, so the first post's 429 comes while the
//     others hold their channel slots. They queue for the channel again, behind its pause and lowered
//     rate, instead of going into the same spent budget as the workspace lets them: one 429 in all.
//   - "quiet channels": one reply in each of three channels, Slack's workspace-wide budget spent. The
//     posts in flight together draw one volley of 429s.
//
// Either way the workspace's rate is lowered once.
func TestPostBudgetsAfterA429(t *testing.T) {
	for _, tc := range []struct {
		name      string
		channels  []string
		slack     float64       // Slack's post budget a minute (a burst of 6 s of it), spent at the start
		workspace float64       // the bot's workspace post budget a minute
		burst     int           // and its burst
		latency   time.Duration // of Slack's answers to posts
		most429s  int           // 429s at most (all at once in any case)
		rate      float64       // the workspace budget's rate after the run
	}{
		{"spent channel", []string{"C1", "C1", "C1", "C1"}, 60, 240, 1, 50 * time.Millisecond, 1, 192},
		{"quiet channels", []string{"C1", "C2", "C3"}, 600, 300, 20, 0, math.MaxInt, 240}, // any number, in one volley
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := gatewaytest.NewSlack()
				spent := gatewaytest.NewLimiter(tc.slack, tc.slack/10)
				spent.Tokens = 0
				fs.PostErr = limitedBy(spent)
				opt := testOptions()
				opt.Budgets.PostsWorkspace = pace.NewBucket(tc.workspace, tc.burst)
				r := NewReplies(fs, slowPosts{fs, tc.latency}, fs, fs, &llmtest.Chat{Steps: shortAnswer}, zap.NewNop(), opt)
				t0 := time.Now()
				var wg sync.WaitGroup
				for i, ch := range tc.channels {
					ts := fmt.Sprintf("1700000000.%06d", i)
					req := route.ReplyRequest{Channel: ch, ChannelType: "channel", User: "U1", Team: "T1",
						TS: ts, ThreadTS: ts, Text: "<@UBOT> go"}
					wg.Go(func() { mustNoErr(t, r.Reply(t.Context(), req)) })
				}
				wg.Wait()
				var posted int
				var limited []time.Duration
				for _, c := range fs.CallsOf("post") {
					if c.Err != nil {
						limited = append(limited, c.At.Sub(t0))
					} else {
						posted++
					}
				}
				if posted != len(tc.channels) {
					t.Errorf("%d placeholders posted, want %d", posted, len(tc.channels))
				}
				if len(limited) == 0 || limited[len(limited)-1] != limited[0] {
					t.Errorf("429s at %v from the start, want one volley at once", limited)
				}
				if len(limited) > tc.most429s {
					t.Errorf("%d 429s, want at most %d", len(limited), tc.most429s)
				}
				if got := opt.Budgets.PostsWorkspace.Rate(); math.Abs(got-tc.rate) > 1e-9 {
					t.Errorf("workspace post rate %.1f/min after the run, want %.1f", got, tc.rate)
				}
			})
		})
	}
}

// slowPosts answers posts after a latency, as Slack does (outside the fake's lock, so that other calls go
// on meanwhile).
type slowPosts struct {
	*gatewaytest.Slack
	latency time.Duration
}

func (s slowPosts) Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (string, error) {
	time.Sleep(s.latency)
	return s.Slack.Post(ctx, channel, threadTS, m)
}

// TestPlaceholdersRespectWorkspacePostBudget: placeholders for replies in many channels are paced by
// the workspace chat.postMessage budget (default 300/min, burst gateway.PostsWorkspaceBurst), not only per channel.
func TestPlaceholdersRespectWorkspacePostBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, burst, perSec = 60, gateway.PostsWorkspaceBurst, 5
		fs := gatewaytest.NewSlack()
		r := NewReplies(fs, fs, fs, fs, &llmtest.Chat{Steps: shortAnswer}, zap.NewNop(), testOptions())
		t0 := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			req := route.ReplyRequest{Channel: fmt.Sprint("C", i), ChannelType: "channel", User: "U1", Team: "T1",
				TS: testTS, ThreadTS: testTS, Text: "<@UBOT> go"}
			wg.Go(func() { mustNoErr(t, r.Reply(t.Context(), req)) })
		}
		wg.Wait()
		// Every post: the placeholders, and the first texts posted in place of those whose edit
		// turn would come late under this load.
		var at, placeholders []time.Time
		for _, c := range fs.CallsOf("post") {
			at = append(at, c.At)
			if c.Text == textThinking {
				placeholders = append(placeholders, c.At)
			}
		}
		slices.SortFunc(at, time.Time.Compare)
		slices.SortFunc(placeholders, time.Time.Compare)
		if len(placeholders) != n {
			t.Fatalf("%d placeholders posted, want %d", len(placeholders), n)
		}
		// The k-th post (from 0) may go once the burst is spent and k-burst+1 more tokens are earned.
		for k, a := range at {
			earliest := t0.Add(time.Duration(k-burst+1) * time.Second / perSec)
			if a.Before(earliest) {
				t.Errorf("post %d at +%v, before +%v: over the workspace budget", k, a.Sub(t0), earliest.Sub(t0))
			}
		}
		if last, want := placeholders[n-1].Sub(t0), time.Duration(n-burst+1)*time.Second/perSec; last > want+time.Second {
			t.Errorf("last placeholder at +%v: slower than the workspace budget", last)
		}
	})
}

// The bucket the test above relies on is the default; an explicit one is used as given.
func TestPostsWorkspaceOptionUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := testOptions()
		opt.Budgets.PostsWorkspace = pace.NewBucket(60, 1)
		fs := gatewaytest.NewSlack()
		r := NewReplies(fs, fs, fs, fs, &llmtest.Chat{Steps: shortAnswer}, zap.NewNop(), opt)
		t0 := time.Now()
		var wg sync.WaitGroup
		for i := range 3 {
			req := route.ReplyRequest{Channel: fmt.Sprint("C", i), ChannelType: "channel", User: "U1", Team: "T1",
				TS: testTS, ThreadTS: testTS, Text: "<@UBOT> go"}
			wg.Go(func() { mustNoErr(t, r.Reply(t.Context(), req)) })
		}
		wg.Wait()
		var at []time.Time
		for _, c := range fs.CallsOf("post") {
			at = append(at, c.At)
		}
		slices.SortFunc(at, time.Time.Compare)
		if len(at) != 3 || at[2].Sub(t0) < 2*time.Second {
			t.Errorf("posts at %v from start, want 3 a second apart", at)
		}
	})
}

// TestConcurrentLookupsShareTheLookupBudget: replies from many people starting together look their
// names up on the shared users.info budget (Tier 4: 100/min, burst 10) instead of each retrying into
// a 429 storm. Every reply is answered; a name that cannot be looked up within the names time limit
// keeps its user id. "drained" starts with Slack's budget used up elsewhere: the first 429 (and any
// look-up under way with it) pauses every look-up, and no 429 follows the pause.
func TestConcurrentLookupsShareTheLookupBudget(t *testing.T) {
	const n = 40
	for _, tc := range []struct {
		name    string
		tokens  float64 // Slack's users.info budget left at the start, of its burst of 10
		limited bool    // some look-ups get a 429
	}{
		{"drained=false", 10, false},
		{"drained=true", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := gatewaytest.NewSlack()
				lim := gatewaytest.NewLimiter(100, 10)
				lim.Tokens = tc.tokens
				fs.NamesErr = limitedBy(lim) // Tier 4: 100 a minute, burst 10
				for i := range n {
					fs.Names[fmt.Sprint("V", i)] = fmt.Sprint("person", i)
				}
				r := NewReplies(fs, fs, fs, fs, &llmtest.Chat{Steps: shortAnswer}, zap.NewNop(), testOptions())
				var wg sync.WaitGroup
				for i := range n {
					req := route.ReplyRequest{Channel: fmt.Sprint("C", i), ChannelType: "channel", User: fmt.Sprint("U", i),
						Team: "T1", TS: testTS, ThreadTS: testTS, Text: fmt.Sprintf("<@UBOT> what does <@V%d> think?", i)}
					wg.Go(func() { mustNoErr(t, r.Reply(t.Context(), req)) }) // one look-up each: the person mentioned
				}
				wg.Wait()
				var limited []time.Time
				for _, c := range fs.CallsOf("users.info") {
					if c.Err != nil {
						limited = append(limited, c.At)
					}
				}
				// Drained: the first look-up's 429, and any under way with it (goroutines run in parallel
				// within the bubble), but none after the pause it starts.
				if got := len(limited) > 0; got != tc.limited {
					t.Errorf("%d look-ups got a 429, want any: %t", len(limited), tc.limited)
				}
				if slices.ContainsFunc(limited, func(at time.Time) bool { return !at.Equal(limited[0]) }) {
					t.Errorf("429s at %v, want them all at the start, before the first pause", limited)
				}
				if m := len(fs.BotMessages(testTS)); m != n {
					t.Errorf("%d answers, want %d", m, n)
				}
			})
		})
	}
}
