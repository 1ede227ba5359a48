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
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

const (
	testTS = "1700000000.000001"
	testCh = "C1"
)

// replyTest is one Replies over the fakes, with the triggering mention already in the thread.
type replyTest struct {
	slack *gatewaytest.Slack
	chat  *llmtest.Chat
	r     *Replies
	req   route.ReplyRequest
}

func newReplyTest(t *testing.T, steps []llmtest.Step, opt ReplyOptions) *replyTest {
	t.Helper()
	fs := newQuestionSlack()
	chat := &llmtest.Chat{Steps: steps}
	r := NewReplies(fs, fs, fs, fs, chat, zaptest.NewLogger(t), opt)
	return &replyTest{slack: fs, chat: chat, r: r, req: testRequest()}
}

// newQuestionSlack is a fake Slack whose test thread holds the question testRequest asks.
func newQuestionSlack() *gatewaytest.Slack {
	fs := gatewaytest.NewSlack()
	fs.Threads[testCh+"/"+testTS] = []slack.Message{mention(testQuestion)}
	return fs
}

// testQuestion is the text of the mention that starts the test thread.
const testQuestion = "<@UBOT> explain token buckets"

// testRequest is the reply request for the test thread's question.
func testRequest() route.ReplyRequest {
	return route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", Team: "T1", TS: testTS,
		ThreadTS: testTS, Text: testQuestion}
}

// texts returns the bot's messages in the test thread.
func (rt *replyTest) texts() []string {
	var out []string
	for _, m := range rt.slack.BotMessages(testTS) {
		out = append(out, m.Text)
	}
	return out
}

func numbered(n int) []string {
	var ws []string
	for i := range n {
		ws = append(ws, fmt.Sprintf("word%d ", i))
	}
	return ws
}

func TestReplyStreamsThrottledEditsAndFinalEqualsAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := numbered(40)
		opt := testOptions()
		opt.Budgets.Edits = pace.NewScheduler(50, 3)
		rt := newReplyTest(t, llmtest.Deltas(ws, 300*time.Millisecond), opt)
		t0 := time.Now()
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))

		posts := rt.slack.CallsOf("post")
		if len(posts) != 1 {
			t.Fatalf("posts = %d, want 1 (the placeholder)", len(posts))
		}
		if p := posts[0]; p.Text != "_Thinking…_" || p.Mark.Kind != convo.MarkPlaceholder || p.Thread != testTS || !p.At.Equal(t0) {
			t.Errorf("placeholder = %q %v in %q at +%v, want _Thinking…_ placeholder in the thread at once", p.Text, p.Mark, p.Thread, p.At.Sub(t0))
		}
		reqs := rt.chat.Calls()
		if len(reqs) != 1 {
			t.Fatalf("model calls = %d, want 1", len(reqs))
		}
		msgs := reqs[0].Messages
		if msgs[0].Role != llm.RoleSystem || msgs[len(msgs)-1].Role != llm.RoleUser || !strings.Contains(msgs[len(msgs)-1].Content, "token buckets") {
			t.Errorf("request messages = %+v, want system first and the question last", msgs)
		}

		ups := rt.slack.CallsOf("update")
		if first := ups[0].At.Sub(t0); first != 300*time.Millisecond {
			t.Errorf("first text at +%v, want +300ms (with the first token)", first)
		}
		// The budget: at most burst + elapsed*rate edits in any interval.
		for i := range ups {
			for j := i + 1; j < len(ups); j++ {
				allowed := 3 + ups[j].At.Sub(ups[i].At).Seconds()*50/60
				if float64(j-i+1) > allowed+1e-9 {
					t.Fatalf("edits %d..%d (%v apart) exceed the budget", i, j, ups[j].At.Sub(ups[i].At))
				}
			}
		}
		// 12 s of streaming at 50/min: the budget allows about 13 edits; fewer than one per token.
		if n := len(ups); n < 8 || n > 15 {
			t.Errorf("edits = %d, want throttled but steady (8..15) for 40 tokens over 12s", n)
		}
		want := slackmd.Split(joined(ws), slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)
		if got := rt.texts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("final messages = %q, want %q", got, want)
		}
		last := ups[len(ups)-1]
		if last.Mark.Kind != convo.MarkAnswer || last.Mark.Note != "" {
			t.Errorf("final mark = %+v, want a plain answer", last.Mark)
		}
		if lag := last.At.Sub(t0) - 12*time.Second; lag > 1300*time.Millisecond {
			t.Errorf("final text %v after the last token, want within one edit slot", lag)
		}
	})
}

func TestReplyHonoursRetryAfterAndFinalLands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := numbered(20)
		full := slackmd.Split(joined(ws), slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)[0]
		opt := testOptions()
		opt.Budgets.Edits = pace.NewScheduler(50, 3)
		rt := newReplyTest(t, llmtest.Deltas(ws, 300*time.Millisecond), opt)
		finals := 0
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if n == 2 { // an interim edit
				return &slack.RateLimitedError{RetryAfter: 4 * time.Second}
			}
			if c.Text == full {
				if finals++; finals <= 2 { // the final edit, twice
					return &slack.RateLimitedError{RetryAfter: 3 * time.Second}
				}
			}
			return nil
		}
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		ups := rt.slack.CallsOf("update")
		for i, u := range ups {
			var rl *slack.RateLimitedError
			if errors.As(u.Err, &rl) && i+1 < len(ups) {
				if gap := ups[i+1].At.Sub(u.At); gap < rl.RetryAfter {
					t.Errorf("edit %d came %v after a 429 with Retry-After %v", i+1, gap, rl.RetryAfter)
				}
			}
		}
		if got := rt.texts(); len(got) != 1 || got[0] != full {
			t.Errorf("final = %q, want %q", got, full)
		}
		if got := opt.Budgets.Edits.Bucket().Rate(); got >= 50 {
			t.Errorf("edit rate after 429s = %v/min, want lowered", got)
		}
	})
}

func TestReplyLongAnswerContinuesInParts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		for i := 0; b.Len() < 10000; i++ {
			fmt.Fprintf(&b, "Line %d of a long answer, with *some* words to make it about eighty characters.\n", i)
			if i%10 == 9 {
				b.WriteString("\n")
			}
		}
		md := b.String()
		ws := llmtest.Words(md, 97)
		rt := newReplyTest(t, llmtest.Deltas(ws, 50*time.Millisecond), testOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		want := slackmd.Split(md, slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)
		got := rt.texts()
		if len(want) < 3 {
			t.Fatalf("test needs an answer of 3+ parts, got %d", len(want))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("parts = %d %q..., want %d parts equal to slackmd.Split", len(got), got, len(want))
		}
		ms := rt.slack.BotMessages(testTS)
		for i, m := range ms {
			if len([]rune(m.Text)) > 4000 || m.Mark.Kind != convo.MarkAnswer {
				t.Errorf("part %d: %d chars, mark %v; want <= 4000 and an answer", i, len([]rune(m.Text)), m.Mark)
			}
		}
		checkAnswerIDs(t, ms, testTS)
	})
}

// checkAnswerIDs checks the marks of one answer's messages ms: each names the question, and each
// after the first names the first (convo.Build joins exactly those).
func checkAnswerIDs(t *testing.T, ms []gatewaytest.Message, question string) {
	t.Helper()
	for i, m := range ms {
		first := ""
		if i > 0 {
			first = ms[0].TS
		}
		if m.Mark.Question != question || m.Mark.First != first {
			t.Errorf("part %d: mark %+v, want question %s and first %q", i, m.Mark, question, first)
		}
	}
}

func TestReplyEmptyMentionGetsHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, nil, testOptions())
		rt.slack.Threads[testCh+"/"+testTS] = []slack.Message{mention("<@UBOT>")}
		rt.req.Text = "<@UBOT>"
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		if n := len(rt.chat.Calls()); n != 0 {
			t.Errorf("model calls = %d, want 0", n)
		}
		ms := rt.slack.BotMessages(testTS)
		if len(ms) != 1 || !strings.Contains(ms[0].Text, "Ask me anything") || ms[0].Mark.Kind != convo.MarkNotice {
			t.Errorf("messages = %+v, want the placeholder edited into a hint", ms)
		}
	})
}

func botReply(text string) slack.Message {
	var m slack.Message
	m.User, m.BotID, m.Text, m.Timestamp, m.ThreadTimestamp = "UBOT", "BBOT", text, "1700000000.000002", "1700000000.000000"
	return m
}

func TestFollowUp(t *testing.T) {
	parent := func(text string) slack.Message {
		var m slack.Message
		m.User, m.Text, m.Timestamp = "U2", text, "1700000000.000000"
		return m
	}
	tests := []struct {
		name      string
		thread    []slack.Message
		wantErr   error
		wantMsgs  int
		wantReads int // over two follow-ups
	}{
		// One read decides (and is cached); nothing is written.
		{"not a bot thread", []slack.Message{parent("lunch anyone?")}, ErrIgnored, 0, 1},
		// The first read decides and is reused as context; the second reply reads the thread afresh.
		{"parent mentions the bot", []slack.Message{parent("<@UBOT> what is a token bucket?")}, nil, 1, 2},
		{"bot answered in it", []slack.Message{parent("lunch?"), botReply("I'm a bot, I don't eat.")}, nil, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, llmtest.Deltas([]string{"Sure."}, time.Millisecond), testOptions())
				follow := mention("and what about bursts?")
				follow.Timestamp, follow.ThreadTimestamp = "1700000000.000005", "1700000000.000000"
				rt.slack.Threads[testCh+"/1700000000.000000"] = append(tt.thread, follow)
				req := rt.req
				req.TS, req.ThreadTS, req.Text, req.FollowUp = follow.Timestamp, "1700000000.000000", follow.Text, true
				if rt.r.KnownFollowUp(req) {
					t.Error("KnownFollowUp before the thread was read = true, want false (unknown)")
				}
				for range 2 {
					if err := rt.r.Reply(t.Context(), req); !errors.Is(err, tt.wantErr) {
						t.Fatalf("Reply = %v, want %v", err, tt.wantErr)
					}
				}
				if got, want := rt.r.KnownFollowUp(req), tt.wantErr == nil; got != want {
					t.Errorf("KnownFollowUp after the thread was read = %v, want %v", got, want)
				}
				if got := len(rt.slack.CallsOf("replies")); got != tt.wantReads {
					t.Errorf("thread reads = %d, want %d", got, tt.wantReads)
				}
				if got := len(rt.slack.CallsOf("post")); got != tt.wantMsgs*2 {
					t.Errorf("posts = %d, want %d", got, tt.wantMsgs*2)
				}
			})
		})
	}
}

func TestFollowUpIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := testOptions()
		opt.FollowUps = nil // off
		rt := newReplyTest(t, nil, opt)
		req := rt.req
		req.FollowUp = true
		if err := rt.r.Reply(t.Context(), req); !errors.Is(err, ErrIgnored) {
			t.Errorf("follow-ups off: Reply = %v, want ErrIgnored", err)
		}
		rt.r.followUps = testFollowUps(nil)
		req.ThreadTS, req.Text = "1700000000.000000", "<@U2> what do you think?" // meant for Bob
		if err := rt.r.Reply(t.Context(), req); !errors.Is(err, ErrIgnored) {
			t.Errorf("follow-up for someone else: Reply = %v, want ErrIgnored", err)
		}
		req.ThreadTS = req.TS // a top-level channel message without a mention
		if err := rt.r.Reply(t.Context(), req); !errors.Is(err, ErrIgnored) {
			t.Errorf("top-level message: Reply = %v, want ErrIgnored", err)
		}
		if n := len(rt.slack.Calls); n != 0 {
			t.Errorf("Slack calls = %d, want none", n)
		}
		// In a thread the bot takes part in, a follow-up for someone else is still not the bot's.
		rt.r.followUps.Joined(t.Context(), testCh, "1700000000.000000")
		req.ThreadTS = "1700000000.000000"
		if rt.r.KnownFollowUp(req) {
			t.Error("KnownFollowUp of a follow-up for someone else = true, want false")
		}
		req.Text = "and for me?"
		if !rt.r.KnownFollowUp(req) {
			t.Error("KnownFollowUp in a known bot thread = false, want true")
		}
	})
}

// TestReplyCountsWhatTheReadLeftOut: the messages a long thread's read left out are counted in
// the context's note on omitted messages, as if Build had left them out.
func TestReplyCountsWhatTheReadLeftOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"ok"}, 100*time.Millisecond), testOptions())
		rt.slack.LeftOut = 37
		var q slack.Message // a question in the thread, after the messages left out
		q.User, q.Text, q.Timestamp, q.ThreadTimestamp = "U1", "<@UBOT> and then?", "1700000000.900000", testTS
		key := testCh + "/" + testTS
		rt.slack.Threads[key] = append(rt.slack.Threads[key], q)
		req := rt.req
		req.TS, req.Text = q.Timestamp, q.Text
		mustNoErr(t, rt.r.Reply(t.Context(), req))
		reqs := rt.chat.Calls()
		if len(reqs) != 1 {
			t.Fatalf("model calls = %d, want 1", len(reqs))
		}
		if msgs := reqs[0].Messages; len(msgs) < 3 || msgs[1].Content != "[37 earlier messages omitted]" {
			t.Errorf("request messages = %+v, want the note on 37 omitted after the system prompt", msgs)
		}
	})
}

func TestReplyTopLevelDM(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"Hello ", "there."}, 100*time.Millisecond), testOptions())
		dm := mention("hi bot")
		rt.slack.TopLevel["D1"] = []slack.Message{dm}
		req := route.ReplyRequest{Channel: "D1", ChannelType: "im", User: "U1", Team: "T1", TS: dm.Timestamp, Text: dm.Text}
		mustNoErr(t, rt.r.Reply(t.Context(), req))
		if n := len(rt.slack.CallsOf("history")); n != 1 {
			t.Errorf("history reads = %d, want 1", n)
		}
		ms := rt.slack.BotMessages("")
		if len(ms) != 1 || ms[0].Text != "Hello there." {
			t.Errorf("DM messages = %+v, want one top-level answer", ms)
		}
	})
}

func TestReplyFailuresShowReasonAndKeepPartial(t *testing.T) {
	const kept = "Partial answer."
	partial := llmtest.Step{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: kept}}
	fail := func(err error) []llmtest.Step {
		return []llmtest.Step{partial, {Wait: 100 * time.Millisecond, Err: err}}
	}
	finish := func(reason string) []llmtest.Step {
		return []llmtest.Step{partial, {Chunk: llm.Chunk{FinishReason: reason}}}
	}
	tests := []struct {
		name     string
		steps    []llmtest.Step
		wantNote string
		wantErr  bool
		kept     string         // the text the message keeps above the note ("": no partial answer, the note alone)
		wantKind convo.MarkKind // an answer, or an error when no text came
	}{
		{"bad request", fail(&llm.Error{Kind: llm.KindBadRequest, Status: 400, Message: "context too long"}),
			"The model service refused the request: context too long", true, kept, convo.MarkAnswer},
		{"rate limited after retries", fail(&llm.Error{Kind: llm.KindRateLimit, Status: 429}), notes.Busy, true, kept, convo.MarkAnswer},
		{"server error", fail(&llm.Error{Kind: llm.KindServer, Status: 502}), notes.Busy, true, kept, convo.MarkAnswer},
		{"quota", fail(&llm.Error{Kind: llm.KindQuota, Status: 429}), notes.Quota, true, kept, convo.MarkAnswer},
		{"auth", fail(&llm.Error{Kind: llm.KindAuth, Status: 401, Message: "bad key sk-123"}), notes.Auth, true, kept, convo.MarkAnswer},
		{"truncated", fail(&llm.Error{Kind: llm.KindTruncated}), notes.Truncated, true, kept, convo.MarkAnswer},
		{"idle timeout after text", fail(&llm.Error{Kind: llm.KindTimeout}), notes.Stalled, true, kept, convo.MarkAnswer},
		{"connection dropped", fail(&llm.Error{Kind: llm.KindConnection, Message: "unexpected EOF"}), notes.Truncated, true, kept, convo.MarkAnswer},
		{"timeout before any text", []llmtest.Step{{Wait: time.Second, Err: &llm.Error{Kind: llm.KindTimeout}}}, notes.Timeout, true, "", convo.MarkError},
		{"could not connect", []llmtest.Step{{Err: &llm.Error{Kind: llm.KindConnection}}}, notes.Busy, true, "", convo.MarkError},
		{"length", finish("length"), textLength, false, kept, convo.MarkAnswer},
		{"content filter", finish("content_filter"), notes.Filter, false, kept, convo.MarkAnswer},
		{"stall", []llmtest.Step{partial, {Wait: 10 * time.Minute, Chunk: llm.Chunk{Content: "late"}}}, notes.Stalled, true, kept, convo.MarkAnswer},
		{"error before any text", []llmtest.Step{{Wait: time.Second, Err: &llm.Error{Kind: llm.KindServer, Status: 500}}}, notes.Busy, true, "", convo.MarkError},
		{"empty answer", []llmtest.Step{{Chunk: llm.Chunk{Reasoning: "hmm"}}, {Chunk: llm.Chunk{FinishReason: "stop"}}}, textEmpty, false, "", convo.MarkError},
		{"reasoning spent the budget", []llmtest.Step{{Chunk: llm.Chunk{Reasoning: "hmm"}}, {Chunk: llm.Chunk{FinishReason: "length"}}}, textEmptyLength, false, "", convo.MarkError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, tt.steps, testOptions())
				err := rt.r.Reply(t.Context(), rt.req)
				if (err != nil) != tt.wantErr {
					t.Errorf("Reply = %v, want error %v", err, tt.wantErr)
				}
				ms := rt.slack.BotMessages(testTS)
				if len(ms) != 1 {
					t.Fatalf("messages = %+v, want 1", ms)
				}
				// The note alone has no text above it to keep apart from.
				want := strings.TrimPrefix(tt.kept+convo.NoteSuffix(tt.wantNote, slackmd.FormatMrkdwn), "\n\n")
				if ms[0].Text != want || ms[0].Mark.Kind != tt.wantKind || ms[0].Mark.Note != tt.wantNote {
					t.Errorf("message = %q %+v, want %q kind %s note %q", ms[0].Text, ms[0].Mark, want, tt.wantKind, tt.wantNote)
				}
				if strings.Contains(ms[0].Text, "sk-123") {
					t.Error("provider error details leaked into Slack")
				}
			})
		})
	}
}

func TestReplyCancelled(t *testing.T) {
	tests := []struct {
		name  string
		cause error
		at    time.Duration
		kept  string // the answer so far as its message shows it ("": none, the note alone)
		note  string
	}{
		{"shutdown mid-answer", ErrShutdown, 1100 * time.Millisecond, "word0 word1 word2", textInterrupted},
		{"stopped mid-answer", ErrStopped, 1100 * time.Millisecond, "word0 word1 word2", "Stopped by Alice."}, // the asker's name
		{"stopped before any text", ErrStopped, 100 * time.Millisecond, "", "Stopped by Alice."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, llmtest.Deltas(numbered(20), 300*time.Millisecond), testOptions())
				ctx, cancel := context.WithCancelCause(t.Context())
				time.AfterFunc(tt.at, func() { cancel(tt.cause) })
				err := rt.r.Reply(ctx, rt.req)
				if !errors.Is(err, tt.cause) {
					t.Errorf("Reply = %v, want %v", err, tt.cause)
				}
				// The note alone has no text above it to keep apart from.
				want := strings.TrimPrefix(tt.kept+convo.NoteSuffix(tt.note, slackmd.FormatMrkdwn), "\n\n")
				ms := rt.slack.BotMessages(testTS)
				if len(ms) != 1 || ms[0].Text != want || ms[0].Mark.Note != tt.note {
					t.Errorf("messages = %+v, want %q", ms, want)
				}
			})
		})
	}
}

// TestReplyShutdownBeforeAnyText: at shutdown a bare placeholder is taken back (the asker is told
// privately and it is deleted) rather than edited; when either call fails, it is edited into the
// interrupted note instead, so the asker always sees a reason.
func TestReplyShutdownBeforeAnyText(t *testing.T) {
	fail := func(int, gatewaytest.Call) error { return slack.SlackErrorResponse{Err: "internal_error"} }
	tests := []struct {
		name               string
		ephErr, deleteErr  gatewaytest.Hook
		wantMsgs, wantEphs int
		wantDeletes        int
	}{
		{"withdrawn", nil, nil, 0, 1, 1},
		{"ephemeral fails: edited", fail, nil, 1, 0, 0},
		{"delete fails: edited", nil, fail, 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, llmtest.Deltas(numbered(20), 300*time.Millisecond), testOptions())
				rt.slack.EphErr, rt.slack.DeleteErr = tt.ephErr, tt.deleteErr
				ctx, cancel := context.WithCancelCause(t.Context())
				time.AfterFunc(100*time.Millisecond, func() { cancel(ErrShutdown) })
				if err := rt.r.Reply(ctx, rt.req); !errors.Is(err, ErrShutdown) {
					t.Errorf("Reply = %v, want ErrShutdown", err)
				}
				ms := rt.slack.BotMessages(testTS)
				if len(ms) != tt.wantMsgs {
					t.Fatalf("messages = %+v, want %d", ms, tt.wantMsgs)
				}
				if len(ms) == 1 {
					want := strings.TrimPrefix(convo.NoteSuffix(textInterrupted, slackmd.FormatMrkdwn), "\n\n")
					if ms[0].Text != want || ms[0].Mark.Kind != convo.MarkNotice {
						t.Errorf("message = %q %+v, want %q, a notice", ms[0].Text, ms[0].Mark, want)
					}
				}
				var ephs []gatewaytest.Call
				for _, c := range rt.slack.CallsOf("ephemeral") {
					if c.Err == nil {
						ephs = append(ephs, c)
					}
				}
				if len(ephs) != tt.wantEphs {
					t.Fatalf("ephemerals = %+v, want %d", ephs, tt.wantEphs)
				}
				if len(ephs) == 1 && (ephs[0].User != "U1" || ephs[0].Thread != testTS || ephs[0].Text != textNotAnswered) {
					t.Errorf("ephemeral = %+v, want %q to U1 in the thread", ephs[0], textNotAnswered)
				}
				deletes := 0
				for _, c := range rt.slack.CallsOf("delete") {
					if c.Err == nil {
						deletes++
					}
				}
				if deletes != tt.wantDeletes {
					t.Errorf("%d deletes, want %d", deletes, tt.wantDeletes)
				}
				if n := len(rt.slack.CallsOf("update")); n != tt.wantMsgs {
					t.Errorf("%d chat.update calls, want %d (only the fallback edits)", n, tt.wantMsgs)
				}
			})
		})
	}
}

func TestReplyPlaceholderFailureReturnsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, nil, testOptions())
		rt.slack.PostErr = func(int, gatewaytest.Call) error { return slack.SlackErrorResponse{Err: "not_in_channel"} }
		err := rt.r.Reply(t.Context(), rt.req)
		var se slack.SlackErrorResponse
		if !errors.As(err, &se) || se.Err != "not_in_channel" {
			t.Errorf("Reply = %v, want the not_in_channel error", err)
		}
	})
}

func TestReplyThreadReadFailureShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, nil, testOptions())
		rt.req.TS = "1700000000.000050" // a mention inside the thread: the thread is read
		rt.slack.RepliesErr = func(int, gatewaytest.Call) error {
			return slack.SlackErrorResponse{Err: "missing_scope", Needed: "channels:history"}
		}
		if err := rt.r.Reply(t.Context(), rt.req); err == nil {
			t.Error("Reply = nil, want the read error")
		}
		ms := rt.slack.BotMessages(testTS)
		if len(ms) != 1 || !strings.Contains(ms[0].Text, "channels:history") || ms[0].Mark.Kind != convo.MarkError {
			t.Errorf("messages = %+v, want the placeholder edited into the reason", ms)
		}
	})
}

func TestReplyEvery20ChunksPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := numbered(45)
		opt := testOptions()
		opt.Budgets.Edits = pace.NewScheduler(50, 3, pace.WithPolicy(pace.PolicyEvery20Chunks))
		rt := newReplyTest(t, llmtest.Deltas(ws, 100*time.Millisecond), opt)
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		// Edits after chunk 20 and 40, then the final one.
		if got := len(rt.slack.CallsOf("update")); got != 3 {
			t.Errorf("edits = %d, want 3", got)
		}
		if got, want := rt.texts(), slackmd.Split(joined(ws), slackmd.FormatMrkdwn, slackmd.MrkdwnLimit); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("final = %q, want %q", got, want)
		}
	})
}

func TestReplyResolvesNamesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"Yes."}, time.Millisecond), testOptions())
		bob := mention("I think buckets refill continuously")
		bob.User, bob.Timestamp, bob.ThreadTimestamp = "U2", "1700000000.000002", testTS
		ask := mention("<@UBOT> who is right?")
		ask.Timestamp, ask.ThreadTimestamp = "1700000000.000003", testTS
		rt.slack.Threads[testCh+"/"+testTS] = append(rt.slack.Threads[testCh+"/"+testTS], bob, ask)
		req := rt.req
		req.TS, req.Text = ask.Timestamp, ask.Text
		for range 2 {
			mustNoErr(t, rt.r.Reply(t.Context(), req))
		}
		lookups := map[string]int{}
		for _, c := range rt.slack.CallsOf("users.info") {
			lookups[c.Text]++
		}
		if lookups["U1"] != 1 || lookups["U2"] != 1 || lookups["UBOT"] != 0 {
			t.Errorf("users.info lookups = %v, want U1 and U2 once each (cached), never the bot", lookups)
		}
		var all strings.Builder
		for _, m := range rt.chat.Calls()[1].Messages {
			all.WriteString(m.Content)
		}
		if !strings.Contains(all.String(), "Bob") {
			t.Errorf("request %q does not name Bob", all.String())
		}
	})
}

// One person's question shows no names to the model (no speaker labels), so it costs no users.info
// call: under load the look-up budget (100/min) would otherwise hold back the start of every answer.
func TestReplyToOnePersonLooksUpNoName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"Hi."}, time.Millisecond), testOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		if calls := rt.slack.CallsOf("users.info"); len(calls) != 0 {
			t.Errorf("users.info calls = %v, want none", calls)
		}
		if got := rt.texts(); len(got) != 1 || got[0] != "Hi." {
			t.Errorf("reply = %q, want [Hi.]", got)
		}
	})
}

// A question the thread read does not show yet (Slack's replies lag a moment behind its events) still
// counts as a second person: both are labelled with their names.
func TestReplyNamesTheAskerMissingFromTheRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"Yes."}, time.Millisecond), testOptions())
		bob := mention("I think buckets refill continuously")
		bob.User, bob.ThreadTimestamp = "U2", testTS
		rt.slack.Threads[testCh+"/"+testTS] = []slack.Message{bob}
		req := rt.req
		req.TS, req.Text = "1700000000.000003", "<@UBOT> is Bob right?"
		mustNoErr(t, rt.r.Reply(t.Context(), req))
		var all strings.Builder
		for _, m := range rt.chat.Calls()[0].Messages {
			all.WriteString(m.Content + "\n")
		}
		// The asker's words are labelled; Bob's are fenced as data from him, by name.
		if !strings.Contains(all.String(), "Alice: ") || !strings.Contains(all.String(), `a message by "Bob"`) {
			t.Errorf("request %q does not name Alice and Bob", all.String())
		}
	})
}

func TestReplyFinalWaitsItsTurnUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := []string{"All ", "good ", "here."}
		opt := testOptions()
		opt.Budgets.Edits = pace.NewScheduler(6, 1) // 12 finals need two minutes: far beyond FinalTimeout
		rt := newReplyTest(t, llmtest.Deltas(ws, 100*time.Millisecond), opt)
		const n = 12
		for i := range n {
			rt.slack.Threads[fmt.Sprint("C", i, "/", testTS)] = rt.slack.Threads[testCh+"/"+testTS]
		}
		var wg sync.WaitGroup
		for i := range n {
			req := rt.req
			req.Channel = fmt.Sprint("C", i) // separate threads
			wg.Go(func() { mustNoErr(t, rt.r.Reply(t.Context(), req)) })
		}
		wg.Wait()
		// Each answer ends complete: in its message, or, when its edit turn is far off, with the rest
		// posted below what its message shows (one more message at most).
		want := slackmd.Split(joined(ws), slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)[0]
		for i := range n {
			ms := messagesIn(rt.slack, fmt.Sprint("C", i))
			if got := shownText(rt.slack, fmt.Sprint("C", i)); got != want || len(ms) > 2 {
				t.Errorf("C%d: %d messages showing %q, want %q in at most 2", i, len(ms), got, want)
			}
		}
	})
}

func TestReplyLogsNoErrorsAndNoTextAtInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.DebugLevel)
		fs := gatewaytest.NewSlack()
		fs.Threads[testCh+"/"+testTS] = []slack.Message{mention("<@UBOT> secret question")}
		chat := &llmtest.Chat{Steps: []llmtest.Step{
			{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "secret answer"}},
			{Wait: 100 * time.Millisecond, Err: &llm.Error{Kind: llm.KindServer, Status: 500}},
		}}
		r := NewReplies(fs, fs, fs, fs, chat, zap.New(core), testOptions())
		req := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", Team: "T1", TS: testTS,
			ThreadTS: testTS, Text: "<@UBOT> secret question"}
		if err := r.Reply(t.Context(), req); err == nil {
			t.Fatal("Reply = nil, want the model error (returned for the caller to log once)")
		}
		for _, e := range logs.All() {
			if e.Level >= zap.WarnLevel {
				t.Errorf("logged %s %q: handlers return errors, the caller logs them", e.Level, e.Message)
			}
			if e.Level >= zap.InfoLevel {
				for k, v := range e.ContextMap() {
					if s := fmt.Sprint(v); strings.Contains(s, "secret") {
						t.Errorf("info entry %q field %s carries message text: %q", e.Message, k, s)
					}
				}
			}
		}
	})
}

// A Slack outage (503s) of about ten seconds just as an answer ends: the final edit keeps retrying
// (backoff capped at 5 s) until Slack is back, instead of giving up after six attempts (~8 s) and
// leaving "Thinking…" in the thread for good with the answer lost.
func TestReplyFinalEditRidesOutAShortSlackOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"The ", "whole ", "answer."}, 100*time.Millisecond), testOptions())
		t0 := time.Now()
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if time.Since(t0) < 10*time.Second {
				return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply returned after %v: %v", time.Since(t0), err)
		if got := rt.texts(); len(got) != 1 || got[0] != "The whole answer." {
			t.Errorf("thread shows %q after Slack recovered at +10s, want the answer %q", got, "The whole answer.")
		}
	})
}

// The final edit's retries stay bounded: with Slack down for good, a reply ends gateway.FinalOutage after the
// first failure of its final edit, and one cancelled for shutdown meanwhile ends within its
// ShutdownTimeout (the bot's grace period), not when the outage ends.
func TestReplyFinalEditRetriesAreTimeBoxed(t *testing.T) {
	down := func(int, gatewaytest.Call) error { return slack.StatusCodeError{Code: 502, Status: "502 Bad Gateway"} }
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"An ", "answer."}, 100*time.Millisecond), testOptions())
		rt.slack.UpdateErr = down
		t0 := time.Now()
		if err := rt.r.Reply(t.Context(), rt.req); err == nil {
			t.Error("Reply = nil with Slack down, want the final write's error")
		}
		if got, limit := time.Since(t0), gateway.FinalOutage+10*time.Second; got > limit {
			t.Errorf("Reply took %v with Slack down, want at most %v", got, limit)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"An ", "answer."}, 100*time.Millisecond), testOptions())
		rt.slack.UpdateErr = down
		rt.slack.PostErr = func(n int, c gatewaytest.Call) error {
			if n > 1 { // the placeholder goes; the interrupted note posted at shutdown does not
				return down(n, c)
			}
			return nil
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(5*time.Second, func() { cancel(ErrShutdown) })
		t0 := time.Now()
		_ = rt.r.Reply(ctx, rt.req)
		if got, limit := time.Since(t0), 5*time.Second+rt.r.opt.ShutdownTimeout; got > limit {
			t.Errorf("Reply took %v with a shutdown at +5s, want at most %v", got, limit)
		}
	})
}

// A four-second Slack hiccup (502s) early in a long answer: interim edits back off while it lasts
// and resume once Slack is back, instead of stopping for good after three failures and leaving the
// message frozen for the rest of the answer (here 30 s).
func TestReplyInterimEditsResumeAfterASlackHiccup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas(numbered(100), 300*time.Millisecond), testOptions())
		t0 := time.Now()
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if d := time.Since(t0); d >= time.Second && d < 5*time.Second {
				return slack.StatusCodeError{Code: 502, Status: "502 Bad Gateway"}
			}
			return nil
		}
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		var after int
		for _, u := range rt.slack.CallsOf("update") {
			if d := u.At.Sub(t0); d >= 5*time.Second && d < 29*time.Second {
				after++
			}
		}
		if after == 0 {
			t.Errorf("no edit between +5s (Slack fine again) and +29s while the answer streamed until +30s: the message froze")
		}
	})
}

// An interim edit Slack refuses for good (an API error such as invalid_blocks, not a 5xx): the
// writer stops after maxInterimFailures in a row instead of retrying for the whole answer, and the
// final edit still writes the answer.
func TestReplyInterimEditsStopOnPermanentErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas(numbered(30), 300*time.Millisecond), testOptions())
		t0 := time.Now()
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if time.Since(t0) < 8*time.Second {
				return slack.SlackErrorResponse{Err: "invalid_blocks"}
			}
			return nil
		}
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		var interim int
		for _, u := range rt.slack.CallsOf("update") {
			if u.At.Sub(t0) < 8*time.Second {
				interim++
			}
		}
		if interim != maxInterimFailures {
			t.Errorf("%d interim edits refused, want the writer to stop after %d", interim, maxInterimFailures)
		}
		if got := rt.texts(); len(got) != 1 || !strings.HasSuffix(got[0], "word29") {
			t.Errorf("thread shows %q, want the whole answer", got)
		}
	})
}

// TestReplyPlaceholderPostRetriesStayBounded: with Slack down (503), the placeholder post gives up
// after gateway.MaxWriteAttempts (~8 s) instead of the final write's outage time, so it does not hold the
// thread's turn for minutes.
func TestReplyPlaceholderPostRetriesStayBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"Hi."}, time.Millisecond), testOptions())
		rt.slack.PostErr = func(int, gatewaytest.Call) error {
			return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
		}
		t0 := time.Now()
		err := rt.r.Reply(t.Context(), rt.req)
		took, posts := time.Since(t0), len(rt.slack.CallsOf("post"))
		t.Logf("Reply = %v after %v, %d placeholder posts", err, took, posts)
		if posts > gateway.MaxWriteAttempts {
			t.Errorf("%d placeholder posts, want at most maxWriteAttempts = %d", posts, gateway.MaxWriteAttempts)
		}
		if took > 15*time.Second {
			t.Errorf("the placeholder post held the thread's turn %v with Slack down, want ~8 s (6 attempts)", took)
		}
	})
}

// TestReplyFinalOutageBoundsTheWholeFinalWrite: with Slack down as a long answer ends, the final
// write of all its parts waits out one gateway.FinalOutage, not one per part.
func TestReplyFinalOutageBoundsTheWholeFinalWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		for i := 0; b.Len() < 6000; i++ {
			fmt.Fprintf(&b, "Paragraph %d of a long answer about token buckets and refill rates.\n\n", i)
		}
		rt := newReplyTest(t, llmtest.Deltas(llmtest.Words(b.String(), 80), 10*time.Millisecond), testOptions())
		down := func(int, gatewaytest.Call) error { return slack.StatusCodeError{Code: 502, Status: "502 Bad Gateway"} }
		rt.slack.UpdateErr = down
		rt.slack.PostErr = func(n int, c gatewaytest.Call) error {
			if n > 1 { // the placeholder goes, nothing after it
				return down(n, c)
			}
			return nil
		}
		t0 := time.Now()
		err := rt.r.Reply(t.Context(), rt.req)
		took := time.Since(t0)
		t.Logf("Reply after %v: %v", took, err)
		if limit := gateway.FinalOutage + 15*time.Second; took > limit {
			t.Errorf("Reply held the thread's turn %v with Slack down, want at most finalOutage+15s = %v", took, limit)
		}
	})
}

// TestReplyFinalOutageClockRestartsAfterASuccess: the final write's outage clock restarts after a
// write succeeds, so a Slack blip minutes after an earlier, recovered one is retried too, and the
// rest of a long answer is posted.
func TestReplyFinalOutageClockRestartsAfterASuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		for i := 0; b.Len() < 8000; i++ {
			fmt.Fprintf(&b, "Paragraph %d of a long answer about token buckets and refill rates.\n\n", i)
		}
		md := b.String()
		ws := llmtest.Words(md, 80)
		rt := newReplyTest(t, llmtest.Deltas(ws, 10*time.Millisecond), testOptions())
		t0 := time.Now()
		end := time.Duration(len(ws)) * 10 * time.Millisecond // the stream ends: later calls are the final write's
		final := func() bool { return time.Since(t0) >= end }
		refuse := slack.SlackErrorResponse{Err: "cant_update_message"} // interim writes break (non-transient)
		bad := slack.StatusCodeError{Code: 502, Status: "502 Bad Gateway"}
		finalUpdates := 0
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if !final() {
				return refuse
			}
			if finalUpdates++; finalUpdates == 1 {
				return bad // a blip: the next try succeeds
			}
			return nil
		}
		finalPosts := 0
		rt.slack.PostErr = func(n int, c gatewaytest.Call) error {
			if n == 1 {
				return nil // the placeholder
			}
			if !final() {
				return refuse
			}
			switch finalPosts++; finalPosts {
			case 1, 2:
				return &slack.RateLimitedError{RetryAfter: 61 * time.Second}
			case 3:
				return bad // another blip, 2 min after the first
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		got := rt.texts()
		if len(got) < 3 {
			t.Errorf("thread shows %d messages, want the whole answer (3 parts): a single 502 two minutes after an earlier, recovered one got no retry", len(got))
		}
	})
}

// TestFollowUpThanksIgnored: in a thread the bot takes part in, a message that only thanks or
// reacts is for the people in it: no answer ("You're welcome!" under every "thanks" is noise).
func TestFollowUpThanksIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, nil, testOptions())
		req := rt.req
		req.FollowUp, req.ThreadTS, req.Text = true, "1700000000.000000", "thanks a lot!"
		rt.r.followUps.Joined(t.Context(), testCh, req.ThreadTS)
		if err := rt.r.Reply(t.Context(), req); !errors.Is(err, ErrIgnored) {
			t.Errorf("thanks: Reply = %v, want ErrIgnored", err)
		}
		if rt.r.KnownFollowUp(req) {
			t.Error("KnownFollowUp of a thanks = true, want false (no busy note either)")
		}
		if n := len(rt.slack.Calls); n != 0 {
			t.Errorf("Slack calls = %d, want none", n)
		}
	})
}

// TestFollowUpForwardedMessageAnswered: a follow-up that is only a forwarded message (Slack's
// "share", no text of its own; convo reads it as "[shared a message from Bob: ...]") has no words,
// yet is no thanks: it is answered.
func TestFollowUpForwardedMessageAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		req := rt.req
		req.FollowUp, req.ThreadTS, req.Text = true, "1700000000.000000", ""
		req.Attachments = []slack.Attachment{{IsShare: true, AuthorName: "Bob",
			Text: "deploy failed: ImagePullBackOff on api-7f9c"}}
		rt.r.followUps.Joined(t.Context(), testCh, req.ThreadTS)
		if err := rt.r.Reply(t.Context(), req); errors.Is(err, ErrIgnored) {
			t.Errorf("forwarded message as a follow-up: Reply = %v, want an answer", err)
		}
		if !rt.r.KnownFollowUp(req) {
			t.Error("KnownFollowUp of a forwarded message = false, want true")
		}
	})
}

// TestEditedMentionAnsweredOnce: a thread reply edited to add the bot's mention is answered, unless
// the bot answered that reply already (as a follow-up, or for an earlier edit).
func TestEditedMentionAnsweredOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		reply := mention("<@UBOT> and for TLS?")
		reply.Timestamp, reply.ThreadTimestamp = "1700000000.000050", testTS
		key := testCh + "/" + testTS
		rt.slack.Threads[key] = append(rt.slack.Threads[key], reply)
		req := rt.req
		req.TS, req.Text, req.Edited = reply.Timestamp, reply.Text, true
		mustNoErr(t, rt.r.Reply(t.Context(), req))
		if n := len(rt.chat.Calls()); n != 1 {
			t.Fatalf("%d model requests, want the edited reply answered", n)
		}
		writes := len(rt.slack.Calls)
		if err := rt.r.Reply(t.Context(), req); !errors.Is(err, ErrIgnored) {
			t.Errorf("the same edit again: Reply = %v, want ErrIgnored (answered already)", err)
		}
		var after []string
		for _, c := range rt.slack.Calls[writes:] {
			after = append(after, c.Method)
		}
		if n := len(rt.chat.Calls()); n != 1 || slices.ContainsFunc(after, func(m string) bool { return m != "replies" }) {
			t.Errorf("%d model requests and Slack calls %v after the second edit, want one request and only the thread read", n, after)
		}
	})
}

// TestEditedTopLevelMentionAnsweredOnce: a top-level mention the bot answered, whose mention is
// then taken out and put back by an edit, is not answered a second time. The edit has its own
// dedupe key ("/edited"), so the bot's dedupe by channel and ts does not keep it out; the
// answered check must cover a top-level message (its thread is its own) as it does a reply.
func TestEditedTopLevelMentionAnsweredOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		if n := len(rt.chat.Calls()); n != 1 {
			t.Fatalf("%d model requests, want the mention answered", n)
		}
		req := rt.req
		req.Edited = true
		if err := rt.r.Reply(t.Context(), req); !errors.Is(err, ErrIgnored) {
			t.Errorf("the edit putting the mention back: Reply = %v, want ErrIgnored (answered already)", err)
		}
		if n := len(rt.chat.Calls()); n != 1 {
			t.Errorf("%d model requests, want 1: the mention was answered twice (bot messages %q)", n, rt.texts())
		}
	})
}

// TestEditedTopLevelMentionReadFailureShown: a top-level message edited to add the bot's mention
// is a mention: when the thread read that looks for an earlier answer fails, the asker is told why
// (as TestReplyThreadReadFailureShown for a mention inside a thread) or answered as before, not
// left with no answer and no reason. Before the edited check covered top-level messages this mention
// needed no read at all (startsThread) and was answered.
func TestEditedTopLevelMentionReadFailureShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		rt.slack.RepliesErr = func(int, gatewaytest.Call) error {
			return slack.SlackErrorResponse{Err: "missing_scope", Needed: "groups:history"}
		}
		req := rt.req
		req.Edited = true
		err := rt.r.Reply(t.Context(), req)
		ms := rt.slack.BotMessages(testTS)
		answered := len(ms) == 1 && ms[0].Mark.Kind == convo.MarkAnswer
		shown := len(ms) == 1 && ms[0].Mark.Kind == convo.MarkError && strings.Contains(ms[0].Text, "groups:history")
		if !answered && !shown {
			t.Errorf("Reply = %v; bot messages %+v, want the mention answered or the reason it is not shown in its thread", err, ms)
		}
	})
}

// Reasoning some servers leave in the content (<think>…</think>, as Ollama or llama.cpp send it for
// reasoning models) is neither shown nor kept: the placeholder stays until the answer comes, in
// edit mode and in stream mode (which cannot take back what it appended).
func TestReplyHidesReasoningLeftInTheContent(t *testing.T) {
	const thinking = "<think>\nThe user asks about token buckets. Let me recall the refill rule.\n</think>\n\n"
	const answer = "A bucket holds up to *burst* tokens and refills at a steady rate."
	for _, tc := range []struct {
		name string
		opt  ReplyOptions
		want func(md string) string // what Slack shows for the whole answer md
	}{
		{"edit", testOptions(), func(md string) string { return slackmd.Split(md, slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)[0] }},
		{"stream", streamOptions(), streamed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, llmtest.Deltas(llmtest.Words(thinking+answer, 4), 100*time.Millisecond), tc.opt)
				mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
				for _, c := range rt.slack.Calls {
					if strings.Contains(c.Text, "refill rule") || strings.Contains(c.Text, "think") {
						t.Errorf("%s showed the reasoning: %q", c.Method, c.Text)
					}
				}
				if got, want := rt.texts(), tc.want(answer); len(got) != 1 || got[0] != want {
					t.Errorf("final messages = %q, want [%q]", got, want)
				}
			})
		})
	}
}

// An answer that is only the beginning of "<think>" ("<", as a model may answer "which sign goes
// between 3 and 5?") is held back while the opening tag may still be arriving, but when the stream
// ends no block ever opened: it is the answer and must be shown, not "The model returned an empty
// answer."
func TestReplyShowsAnAnswerThatOnlyLooksLikeTheStartOfAThinkTag(t *testing.T) {
	for _, answer := range []string{"<", "\n<"} {
		for _, tc := range []struct {
			name string
			opt  ReplyOptions
			want func(md string) string
		}{
			{"edit", testOptions(), func(md string) string { return slackmd.Split(md, slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)[0] }},
			{"stream", streamOptions(), streamed},
		} {
			t.Run(tc.name+"/"+answer, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					rt := newReplyTest(t, llmtest.Deltas([]string{answer}, 100*time.Millisecond), tc.opt)
					mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
					if got, want := rt.texts(), tc.want(answer); len(got) != 1 || got[0] != want {
						t.Errorf("final messages = %q, want [%q]", got, want)
					}
				})
			})
		}
	}
}

// The model's first token is the opening tag of its reasoning ("<think>", one token for Qwen3,
// DeepSeek-R1 and the like), then the stream breaks. No answer came: the reply says what went wrong,
// and shows no "<think>" as a partial answer (marked as an answer, it would be replayed as what the
// bot said).
func TestReplyStreamBrokenRightAfterTheOpeningThinkTag(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  ReplyOptions
	}{
		{"edit", testOptions()},
		{"stream", streamOptions()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				steps := []llmtest.Step{
					{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "<think>"}},
					{Wait: 100 * time.Millisecond, Err: errTruncated()},
				}
				rt := newReplyTest(t, steps, tc.opt)
				_ = rt.r.Reply(t.Context(), rt.req)
				for _, c := range rt.slack.Calls {
					if strings.Contains(c.Text, "think") {
						t.Errorf("%s showed the opening reasoning tag: %q", c.Method, c.Text)
					}
				}
				for _, m := range rt.slack.BotMessages(testTS) {
					if m.Mark.Kind == convo.MarkAnswer {
						t.Errorf("message %q marked as an answer, want an error (no answer came)", m.Text)
					}
				}
			})
		})
	}
}
