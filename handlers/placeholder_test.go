package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/pane"
	"github.com/llmbot/llmbot/route"
)

// lazyOptions answer in edit mode with the placeholder held back for a second (PlaceholderAfter).
func lazyOptions() ReplyOptions {
	opt := buttonOptions()
	opt.PlaceholderAfter = time.Second
	return opt
}

// A model that writes within PlaceholderAfter: its first text is the answer's first message (a post:
// no "Thinking…" ever shows, and no chat.update is spent on it); one that is slow to start shows the
// placeholder after PlaceholderAfter, edited into the answer when the text comes.
func TestPlaceholderOnlyForASlowStart(t *testing.T) {
	for _, tc := range []struct {
		name        string
		firstToken  time.Duration
		placeholder bool
	}{
		{"first text within the wait", 300 * time.Millisecond, false},
		{"slow to start", 3 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				steps := append([]llmtest.Step{{Wait: tc.firstToken, Chunk: llm.Chunk{Content: "Token "}}},
					llmtest.Deltas([]string{"buckets ", "refill."}, 100*time.Millisecond)...)
				rt := newReplyTest(t, steps, lazyOptions())
				start := time.Now()
				mustNoErr(t, rt.r.Reply(t.Context(), rt.req))

				posts := rt.slack.CallsOf("post")
				if got := posts[0].Text == textThinking; got != tc.placeholder {
					t.Errorf("first post %q: placeholder %t, want %t", posts[0].Text, got, tc.placeholder)
				}
				if got := posts[0].At.Sub(start); got > min(tc.firstToken, time.Second)+300*time.Millisecond {
					t.Errorf("first post %s after the question, want by the first token or the placeholder's second", got)
				}
				if buttonKey(posts[0].Buttons) != route.ActionStop {
					t.Errorf("first post shows %+v, want Stop", posts[0].Buttons)
				}
				ms := rt.slack.BotMessages(testTS)
				if len(ms) != 1 || ms[0].Text != "Token buckets refill." || ms[0].TS != posts[0].TS || ms[0].Mark.Kind != convo.MarkAnswer {
					t.Errorf("thread = %+v, want the answer in the first message", ms)
				}
				if len(posts) != 1 {
					t.Errorf("%d posts, want 1", len(posts))
				}
			})
		})
	}
}

// Many answers at once with a spent edit budget: every asker still sees the first text within a
// moment of the model's first token, posted from the channels' budgets.
func TestFirstTextDoesNotWaitForTheEditBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := lazyOptions()
		opt.Budgets.Edits = pace.NewScheduler(1, 1) // one chat.update a minute for the whole workspace
		fs := newQuestionSlack()
		chat := &llmtest.Chat{Steps: llmtest.Deltas([]string{"The ", "answer ", "is ", "here."}, 200*time.Millisecond)}
		r := NewReplies(fs, fs, fs, fs, chat, nil, opt)
		const n = 10
		start := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			req := testRequest()
			req.Channel = "C" + string(rune('A'+i))
			fs.Threads[req.Channel+"/"+testTS] = fs.Threads[testCh+"/"+testTS]
			wg.Go(func() { _ = r.Reply(t.Context(), req) })
		}
		synctest.Wait()
		time.Sleep(2 * time.Second)
		fs.Mu.Lock()
		first := map[string]time.Duration{} // thread's channel -> its first text
		for _, m := range fs.Msgs {
			for _, c := range fs.Calls {
				if c.Method == "post" && c.TS == m.TS && c.Text != textThinking && first[m.Channel] == 0 {
					first[m.Channel] = c.At.Sub(start)
				}
			}
		}
		fs.Mu.Unlock()
		if len(first) != n {
			t.Errorf("%d of %d askers see text after 2 s, want all", len(first), n)
		}
		for ch, d := range first {
			if d > time.Second {
				t.Errorf("the answer in %s first shown %s after the question, want within a second", ch, d)
			}
		}
		// Let the answers end: their final edits wait for the one-a-minute budget.
		time.Sleep(15 * time.Minute)
		wg.Wait()
	})
}

// A shutdown before the model wrote anything, with no placeholder posted yet: the asker is told
// privately, and nothing is posted in the thread.
func TestShutdownBeforeAnyTextTellsPrivately(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, []llmtest.Step{{Wait: time.Minute, Chunk: llm.Chunk{Content: "late"}}}, lazyOptions())
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(500*time.Millisecond, func() { cancel(ErrShutdown) })
		_ = rt.r.Reply(ctx, rt.req)
		if n := len(rt.slack.CallsOf("post")); n != 0 {
			t.Errorf("%d posts, want none", n)
		}
		eph := rt.slack.CallsOf("ephemeral")
		if len(eph) != 1 || eph[0].Text != textNotAnswered || eph[0].User != "U1" {
			t.Errorf("private notes %+v, want %q to the asker", eph, textNotAnswered)
		}
	})
}

// A model error before any text: the reason is the answer's one message.
func TestErrorBeforeAnyTextIsPosted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, []llmtest.Step{{Wait: 200 * time.Millisecond, Err: &llm.Error{Kind: llm.KindServer, Status: 500}}}, lazyOptions())
		_ = rt.r.Reply(t.Context(), rt.req)
		ms := rt.slack.BotMessages(testTS)
		if len(ms) != 1 || ms[0].Mark.Kind != convo.MarkError || !strings.Contains(ms[0].Text, "busy") {
			t.Errorf("thread = %+v, want one error note", ms)
		}
		if buttonKey(ms[0].Buttons) != route.ActionRegenerate {
			t.Errorf("error note shows %+v, want Regenerate", ms[0].Buttons)
		}
	})
}

// The first text's post timed out but Slack posted it: the final write finds it and edits it, so
// the answer shows once.
func TestLostFirstPostIsAdopted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		posts := 0
		chat := &llmtest.Chat{Steps: llmtest.Deltas([]string{"The ", "answer."}, 100*time.Millisecond)}
		r := NewReplies(fs, landedTimeoutPoster{fs, 1, &posts}, fs, fs, chat, nil, lazyOptions())
		_ = r.Reply(t.Context(), testRequest())
		ms := fs.BotMessages(testTS)
		if len(ms) != 1 || ms[0].Text != "The answer." {
			t.Errorf("thread = %+v, want the answer once", ms)
		}
	})
}

// paragraphs is an answer of n short paragraphs, as deltas of a few words.
func paragraphs(n int) []string {
	var ws []string
	for i := range n {
		ws = append(ws, "Paragraph ", fmt.Sprint(i), " says ", "one thing.\n\n")
	}
	return ws
}

// With the edit budget spent, an answer whose end would wait minutes for its last edit keeps what
// its message shows and gets the rest in one more message at once; the stale Stop button goes when
// the budget allows. Alone, an answer ends in its one message.
func TestAnswerEndsByPostWhenNoEditTurnComes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answers  int
		edits    float64 // chat.update a minute for the workspace
		messages int     // per answer
	}{
		{"alone", 1, 50, 1},
		{"ten at once", 10, 6, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opt := lazyOptions()
				opt.Budgets.Edits = pace.NewScheduler(tc.edits, 2)
				fs := newQuestionSlack()
				ws := paragraphs(12)
				chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, 150*time.Millisecond)}
				r := NewReplies(fs, fs, fs, fs, chat, nil, opt)
				var wg sync.WaitGroup
				for i := range tc.answers {
					req := testRequest()
					req.Channel = fmt.Sprint("C", i)
					fs.Threads[req.Channel+"/"+testTS] = fs.Threads[testCh+"/"+testTS]
					wg.Go(func() { _ = r.Reply(t.Context(), req) })
				}
				lastToken := time.Now().Add(time.Duration(len(ws)) * 150 * time.Millisecond)
				time.Sleep(time.Until(lastToken) + 3*time.Second)
				want := strings.TrimSpace(strings.ReplaceAll(joined(ws), "\n\n", " "))
				for i := range tc.answers {
					if got := shownText(fs, fmt.Sprint("C", i)); got != want {
						t.Errorf("answer %d shows %q 3 s after the model's last token\nwant %q", i, got, want)
					}
				}
				wg.Wait()
				for i := range tc.answers {
					ms := messagesIn(fs, fmt.Sprint("C", i))
					if len(ms) != tc.messages {
						t.Errorf("answer %d in %d messages, want %d", i, len(ms), tc.messages)
					}
					for j, m := range ms {
						want := ""
						if j == len(ms)-1 {
							want = route.ActionRegenerate
						}
						if buttonKey(m.Buttons) != want {
							t.Errorf("answer %d message %d shows %q at the end, want %q", i, j, buttonKey(m.Buttons), want)
						}
					}
				}
			})
		})
	}
}

// shownText is what the bot's messages in the test thread of channel show, joined, with the
// paragraph breaks between and inside messages as spaces.
func shownText(fs *gatewaytest.Slack, channel string) string {
	var texts []string
	for _, m := range messagesIn(fs, channel) {
		texts = append(texts, m.Text)
	}
	return strings.Join(strings.Fields(strings.Join(texts, " ")), " ")
}

// messagesIn returns f's bot messages in the test thread of channel, oldest first.
func messagesIn(f *gatewaytest.Slack, channel string) []gatewaytest.Message {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []gatewaytest.Message
	for _, m := range f.Msgs {
		if m.Channel == channel && m.Thread == testTS {
			out = append(out, *m)
		}
	}
	return out
}

// Under load (the answer's edits a minute apart) a model slow to start: an answer whose thread shows
// "is thinking…" posts no placeholder (it would clear the status and wait long for its edit) and
// posts its first text; one without the status posts the placeholder, and when its first text gets
// no edit turn within a second, posts that text in a new message and deletes the placeholder. Either
// way the end of the answer is posted below the first text, and no "Thinking…" is left.
func TestPlaceholderUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name      string
		statusErr error
		posts     []string // the texts posted, in order; the last two are what the thread shows
		deleted   int      // the placeholder's deletes (and posts before the first text)
	}{
		{"the thread shows the thinking status", nil, []string{"Token", "buckets refill at a steady rate."}, 0},
		{"no thinking status", errors.New("network down"),
			[]string{textThinking, "Token buckets", "refill at a steady rate."}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opt := lazyOptions()
				opt.Pane = pane.New(&statusPane{err: tc.statusErr}, nil, nil)
				opt.Budgets.Edits = pace.NewScheduler(1, 1) // one chat.update a minute for the whole workspace
				busy := opt.Budgets.Edits.Lane()            // another answer, which just took this minute's edit
				mustNoErr(t, busy.Wait(t.Context(), pace.Pending, time.Now()))
				steps := append([]llmtest.Step{{Wait: 3 * time.Second, Chunk: llm.Chunk{Content: "Token "}},
					{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "buckets "}}},
					llmtest.Deltas([]string{"refill ", "at ", "a ", "steady ", "rate."}, 2*time.Second)...)
				rt := newReplyTest(t, steps, opt)
				start := time.Now()
				mustNoErr(t, rt.r.Reply(t.Context(), rt.req))

				var posted []string
				for _, c := range rt.slack.CallsOf("post") {
					posted = append(posted, c.Text)
				}
				if strings.Join(posted, "|") != strings.Join(tc.posts, "|") {
					t.Errorf("posts %q, want %q", posted, tc.posts)
				}
				if got := len(rt.slack.CallsOf("delete")); got != tc.deleted {
					t.Errorf("%d deletes, want %d", got, tc.deleted)
				}
				if got := rt.texts(); strings.Join(got, "|") != strings.Join(tc.posts[len(tc.posts)-2:], "|") {
					t.Errorf("thread shows %q, want the answer in two messages", got)
				}
				// The first text shows within the second its edit turn is waited for.
				if first := rt.slack.CallsOf("post")[tc.deleted]; first.At.Sub(start) > 4*time.Second {
					t.Errorf("first text posted %v after the question, want within a second of the model's", first.At.Sub(start))
				}
			})
		})
	}
}

// A question in a thread whose read waits for the read budget (spent by other answers): the
// placeholder shows after PlaceholderAfter while the thread is still being read, and becomes the
// answer.
func TestPlaceholderWhileTheThreadIsRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := lazyOptions()
		opt.Budgets.Reads = pace.NewBucket(1, 1) // one read a minute
		opt.Budgets.Reads.TryTake()              // spent by another answer a moment ago
		rt := newReplyTest(t, llmtest.Deltas([]string{"Token ", "buckets ", "refill."}, 100*time.Millisecond), opt)
		rt.req.TS = "1700000000.000009" // a reply in the thread: the thread is read first
		start := time.Now()
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))

		posts := rt.slack.CallsOf("post")
		if len(posts) == 0 || posts[0].Text != textThinking {
			t.Fatalf("posts %+v, want the placeholder first", posts)
		}
		if got := posts[0].At.Sub(start); got != time.Second {
			t.Errorf("placeholder posted %v after the question, want PlaceholderAfter (1s) while the thread is read", got)
		}
		if reads := rt.slack.CallsOf("replies"); len(reads) != 1 || !reads[0].At.After(posts[0].At) {
			t.Errorf("thread reads %+v, want one, after the placeholder", reads)
		}
		if got := rt.texts(); strings.Join(got, "|") != "Token buckets refill." {
			t.Errorf("thread shows %q, want the answer in the placeholder's message", got)
		}
	})
}

// underLoad is opt with one chat.update a minute for the whole workspace, this minute's just taken
// by another answer, and no thinking status: a placeholder's text cannot have its edit soon.
func underLoad(t *testing.T, opt ReplyOptions) ReplyOptions {
	opt.Pane = pane.New(&statusPane{err: errors.New("network down")}, nil, nil)
	opt.Budgets.Edits = pace.NewScheduler(1, 1)
	busy := opt.Budgets.Edits.Lane()
	mustNoErr(t, busy.Wait(t.Context(), pace.Pending, time.Now()))
	return opt
}

// slowStart is a model that writes its first words after 3 s (the placeholder shows from 1 s).
func slowStart(rest ...string) []llmtest.Step {
	return append([]llmtest.Step{{Wait: 3 * time.Second, Chunk: llm.Chunk{Content: "Token "}},
		{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "buckets "}}}, llmtest.Deltas(rest, time.Second)...)
}

// The post that follows a withdrawn placeholder gets a 429: it waits out the Retry-After in the
// channel's post budget (it does not take an edit turn instead).
func TestWithdrawnPlaceholderPostWaitsOutA429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, slowStart("refill ", "steadily."), underLoad(t, lazyOptions()))
		rt.slack.PostErr = func(n int, c gatewaytest.Call) error {
			if n == 2 { // the first text, after the placeholder was deleted
				return &slack.RateLimitedError{RetryAfter: 30 * time.Second}
			}
			return nil
		}
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		posts := rt.slack.CallsOf("post")
		if len(posts) < 3 {
			t.Fatalf("%d posts, want the placeholder, the refused first text and its retry", len(posts))
		}
		if d := posts[2].At.Sub(posts[1].At); d < 30*time.Second {
			t.Errorf("post retried %v after a 429 with Retry-After 30 s", d)
		}
		if got := rt.texts(); strings.Join(got, " ") != "Token buckets refill steadily." || len(rt.slack.CallsOf("delete")) != 1 {
			t.Errorf("thread %q after %d deletes, want the answer and the placeholder deleted", got, len(rt.slack.CallsOf("delete")))
		}
	})
}

// Stop pressed while the first text waits for the post that follows the placeholder's withdrawal:
// the placeholder is still there (it goes only when the post can follow), and the answer closes in
// it with what was written and the stop note. No "Thinking…" is left.
func TestStopWhileAPlaceholderWaitsUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		opt.Budgets.Edits = pace.NewScheduler(13.5, 1) // an edit every 4.4 s, under load with two answers
		busy := opt.Budgets.Edits.Lane()
		mustNoErr(t, busy.Wait(t.Context(), pace.Pending, time.Now()))
		opt.Budgets.Posts = pace.NewKeyed(2, 1) // a post every 30 s in the channel
		rt := newReplyTest(t, slowStart("refill ", "steadily."), opt)
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(4500*time.Millisecond, func() { cancel(ErrStopped) })
		_ = rt.r.Reply(ctx, rt.req)
		ms := rt.slack.BotMessages(testTS)
		if len(ms) != 1 || !strings.HasPrefix(ms[0].Text, "Token buckets") || ms[0].Mark.Note == "" {
			t.Errorf("thread %q, want the text so far with its note in the placeholder's message", rt.texts())
		}
	})
}

// A first snapshot inside a heading ("## Over") under load: the first text is not cut after the
// heading's marker (it would show "**" alone, and lose the heading).
func TestFirstTextUnderLoadIsNeverABlockMarkerAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := append([]llmtest.Step{{Wait: 300 * time.Millisecond, Chunk: llm.Chunk{Content: "## Over"}}},
			llmtest.Deltas([]string{"view\n\n", "Token buckets ", "refill at a steady rate."}, 200*time.Millisecond)...)
		rt := newReplyTest(t, steps, underLoad(t, lazyOptions()))
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		for _, s := range rt.texts() {
			if strings.Trim(s, "*• ") == "" {
				t.Errorf("a message of the answer shows only %q; thread %q", s, rt.texts())
			}
		}
	})
}

// sortedThread answers conversations.replies in ts order, as Slack does (the fake lists people's
// messages first).
type sortedThread struct{ *gatewaytest.Slack }

func (s sortedThread) Replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	ms, leftOut, err := s.Slack.Replies(ctx, channel, threadTS)
	slices.SortStableFunc(ms, func(a, b slack.Message) int { return convo.CompareTS(a.Timestamp, b.Timestamp) })
	return ms, leftOut, err
}

// A Regenerate of an earlier answer under load is written in place of the old answer (its
// placeholder is never withdrawn), so the thread and the next question's context keep their order.
func TestRegenerateUnderLoadStaysInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"First answer: a bucket of tokens."}, time.Millisecond), buttonOptions())
		rt.r = NewReplies(sortedThread{rt.slack}, rt.slack, rt.slack, rt.slack, rt.chat, nil, buttonOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		a1 := rt.slack.BotMessages(testTS)[0]

		key := testCh + "/" + testTS
		var q2 slack.Message
		q2.User, q2.Text, q2.Timestamp, q2.ThreadTimestamp = "U1", "<@UBOT> and leaky buckets?", "1700000000.000500", testTS
		rt.slack.Mu.Lock()
		rt.slack.Threads[key] = append(rt.slack.Threads[key], q2)
		rt.slack.NextTS = 600
		rt.slack.Mu.Unlock()
		rt.setSteps(llmtest.Deltas([]string{"Leaky buckets drain."}, time.Millisecond))
		req2 := rt.req
		req2.TS, req2.Text = q2.Timestamp, q2.Text
		mustNoErr(t, rt.r.Reply(t.Context(), req2))

		busy := underLoad(t, buttonOptions())
		r2 := NewReplies(sortedThread{rt.slack}, rt.slack, rt.slack, rt.slack, rt.chat, nil, busy)
		rt.setSteps(append([]llmtest.Step{{Wait: 2 * time.Second, Chunk: llm.Chunk{Content: "Second "}}},
			llmtest.Deltas([]string{"answer: tokens ", "refill over time."}, 100*time.Millisecond)...))
		regen := rt.req
		regen.User, regen.Text, regen.Regenerate, regen.Replace = "U2", "", true, a1.TS
		mustNoErr(t, r2.Reply(t.Context(), regen))
		for _, m := range rt.slack.BotMessages(testTS) {
			if strings.HasPrefix(m.Text, "Second") && m.TS != a1.TS {
				t.Errorf("the regenerated answer is at %s, below the later question (%s), not in place of %s", m.TS, q2.Timestamp, a1.TS)
			}
		}

		var q3 slack.Message
		q3.User, q3.Text, q3.Timestamp, q3.ThreadTimestamp = "U1", "<@UBOT> thanks", "1700000000.000900", testTS
		rt.slack.Mu.Lock()
		rt.slack.Threads[key] = append(rt.slack.Threads[key], q3)
		rt.slack.Mu.Unlock()
		rt.setSteps(llmtest.Deltas([]string{"ok"}, time.Millisecond))
		req3 := rt.req
		req3.TS, req3.Text = q3.Timestamp, q3.Text
		mustNoErr(t, r2.Reply(t.Context(), req3))
		reqs := rt.chat.Calls()
		var roles []string
		for _, m := range reqs[len(reqs)-1].Messages[1:] {
			roles = append(roles, string(m.Role)+": "+m.Content)
		}
		want := []string{"user: explain token buckets", "assistant: Second answer: tokens refill over time.",
			"user: and leaky buckets?", "assistant: Leaky buckets drain.", "user: thanks"}
		if fmt.Sprint(roles) != fmt.Sprint(want) {
			t.Errorf("next question's context = %q\nwant %q", roles, want)
		}
	})
}

// Under load, a thread showing "is thinking…" gets no placeholder while the status lasts; a model
// silent for longer than Slack keeps a status (two minutes without a message) gets the placeholder
// before the status is gone.
func TestPlaceholderOnceTheThinkingStatusLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := underLoad(t, lazyOptions())
		opt.Pane = pane.New(&statusPane{}, nil, nil)
		steps := append([]llmtest.Step{{Wait: 150 * time.Second, Chunk: llm.Chunk{Content: "Token "}}},
			llmtest.Deltas([]string{"buckets ", "refill."}, 100*time.Millisecond)...)
		rt := newReplyTest(t, steps, opt)
		start := time.Now()
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		posts := rt.slack.CallsOf("post")
		if len(posts) == 0 || posts[0].Text != textThinking || posts[0].At.Sub(start) != thinkingLasts {
			t.Errorf("posts %+v, want the placeholder first, %v after the question", posts, thinkingLasts)
		}
	})
}
