package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

// TestShutdownClosesEveryReplyBeyondTheEditBudget: 20 replies in flight are cancelled with
// ErrShutdown at once; chat.update (50 a minute, burst 5, already spent on first texts) cannot
// serve them in the 2 s closing window. Every reply still ends closed: its note edited in, or
// its bare placeholder deleted and the asker told privately, or its partial text followed by a
// note in the thread. None is left as a bare placeholder or as partial text without a note.
//
// In stream mode the first replies get native streams (chat.startStream and chat.stopStream share
// a budget of 20 a minute, burst 3) and the rest fall back to editing; the rule is the same.
func TestShutdownClosesEveryReplyBeyondTheEditBudget(t *testing.T) {
	for _, mode := range []ReplyMode{ModeEdit, ModeStream} {
		t.Run(string(mode), func(t *testing.T) { testShutdownClosesEveryReply(t, mode) })
	}
}

func testShutdownClosesEveryReply(t *testing.T, mode ReplyMode) {
	const n, talking = 20, 8 // talking replies stream text at once; the others still think
	synctest.Test(t, func(t *testing.T) {
		fs := gatewaytest.NewSlack()
		fs.Limit = gatewaytest.NewLimiter(50, 5) // Slack's chat.update limit, enforced with 429s
		opt := testOptions()
		opt.Budgets.Edits = pace.NewScheduler(50, 5)
		opt.Budgets.Posts = pace.NewKeyed(60, 3)
		// The defaults, shared by the two Replies below as the bot shares them.
		opt.Budgets.Streams, opt.Budgets.Deletes, opt.Budgets.Ephemerals = pace.NewBucket(20, 3), pace.NewBucket(50, 20), pace.NewBucket(100, 20)
		opt.ShutdownTimeout = 2 * time.Second
		opt.Mode = mode
		talk := &llmtest.Chat{Steps: llmtest.Deltas(numbered(200), 100*time.Millisecond)}
		think := &llmtest.Chat{Steps: append([]llmtest.Step{{Wait: time.Minute, Chunk: llm.Chunk{Reasoning: "hmm"}}},
			llmtest.Deltas(numbered(10), 100*time.Millisecond)...)}
		replies := []*Replies{
			NewReplies(fs, fs, fs, fs, talk, zap.NewNop(), opt),
			NewReplies(fs, fs, fs, fs, think, zap.NewNop(), opt),
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		threads := make([]string, n)
		reqs := make([]route.ReplyRequest, n)
		for i := range n {
			ch, ts := fmt.Sprintf("C%02d", i), fmt.Sprintf("1690000000.%06d", i)
			threads[i] = ts
			m := mention("<@UBOT> go")
			m.User, m.Timestamp = fmt.Sprintf("U%02d", i), ts
			fs.Threads[ch+"/"+ts] = []slack.Message{m}
			reqs[i] = route.ReplyRequest{Channel: ch, ChannelType: "channel", User: m.User, Team: "T1", TS: ts, ThreadTS: ts, Text: m.Text}
		}
		var wg sync.WaitGroup
		for i, req := range reqs {
			r := replies[1]
			if i < talking {
				r = replies[0]
			}
			wg.Go(func() {
				if err := r.Reply(ctx, req); !errors.Is(err, ErrShutdown) {
					t.Errorf("reply %d: Reply = %v, want ErrShutdown", i, err)
				}
			})
		}
		time.Sleep(3 * time.Second)
		cancelled := time.Now()
		cancel(ErrShutdown)
		wg.Wait()
		if took := time.Since(cancelled); took > opt.ShutdownTimeout {
			t.Errorf("closing took %v, want at most %v", took, opt.ShutdownTimeout)
		}

		edited := strings.TrimPrefix(convo.NoteSuffix(textInterrupted, slackmd.FormatMrkdwn), "\n\n")
		above := strings.TrimPrefix(convo.NoteSuffix(textInterruptedAbove, slackmd.FormatMrkdwn), "\n\n")
		ephemerals := map[string]int{} // thread -> private notes to its asker
		for _, c := range fs.CallsOf("ephemeral") {
			if c.Err == nil && c.Text == textNotAnswered {
				ephemerals[c.Thread]++
			}
		}
		var byNote, withdrawn, noteBelow int
		for i, ts := range threads {
			ms := fs.BotMessages(ts)
			switch {
			case len(ms) == 0:
				if ephemerals[ts] != 1 {
					t.Errorf("reply %d: placeholder deleted, but %d private notes to the asker", i, ephemerals[ts])
				}
				withdrawn++
			case strings.Contains(ms[0].Text, "Thinking") || ms[0].Text == "":
				t.Errorf("reply %d: left as a bare placeholder: %+v", i, ms)
			case ms[len(ms)-1].Text == above && ms[len(ms)-1].Mark.Kind == convo.MarkNotice && len(ms) >= 2:
				if !strings.HasPrefix(ms[0].Text, "word0") {
					t.Errorf("reply %d: partial text %q", i, ms[0].Text)
				}
				noteBelow++
			case strings.HasSuffix(ms[len(ms)-1].Text, edited) && ms[len(ms)-1].Mark.Note == textInterrupted:
				byNote++
			default:
				t.Errorf("reply %d: not closed with a note: %+v", i, ms)
			}
		}
		t.Logf("closed by its own message %d, withdrawn %d, note in thread %d; native streams %d; chat.update 429s %d",
			byNote, withdrawn, noteBelow, len(fs.CallsOf("startStream")), fs.Limit.Throttled)
		if mode == ModeStream && len(fs.CallsOf("startStream")) == 0 {
			t.Error("no native stream was started")
		}
		if withdrawn == 0 || noteBelow == 0 {
			t.Errorf("want both fallbacks used (withdrawn %d, note in thread %d): the edit budget cannot serve %d replies", withdrawn, noteBelow, n)
		}
		if got := withdrawn + byNote + noteBelow; got != n {
			t.Errorf("%d replies closed, want %d", got, n)
		}
	})
}

// SIGTERM while a mention's placeholder waits for the channel's post budget (a burst of mentions in
// one channel: Slack allows about one post a second): nothing is in the thread yet, so the asker is
// told privately that the bot is restarting (chat.postEphemeral) instead of the mention being
// dropped silently.
func TestReplyShutdownWhilePlaceholderWaitsTellsAsker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := testOptions()
		opt.Budgets.Posts = pace.NewKeyed(60, 1) // 1 post a second in a channel
		rt := newReplyTest(t, llmtest.Deltas([]string{"Hi."}, time.Millisecond), opt)
		for range 5 { // five other mentions' placeholders queue ahead in the channel
			go opt.Budgets.Posts.WaitSlot(t.Context(), testCh)
		}
		synctest.Wait()
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(2*time.Second, func() { cancel(ErrShutdown) })
		err := rt.r.Reply(ctx, rt.req)
		t.Logf("Reply = %v", err)
		if !errors.Is(err, ErrShutdown) {
			t.Errorf("Reply = %v, want ErrShutdown", err)
		}
		eph := rt.slack.CallsOf("ephemeral")
		if len(rt.texts()) == 0 && len(eph) == 0 {
			t.Fatalf("nothing in the thread and nothing told to the asker: the mention was dropped silently (Reply = %v)", err)
		}
		if len(eph) != 1 || eph[0].User != "U1" || eph[0].Text != textNotAnswered {
			t.Errorf("ephemerals = %+v, want one to U1 saying %q", eph, textNotAnswered)
		}
	})
}

// slowUpdater answers chat.update after latency from slowFrom on.
type slowUpdater struct {
	*gatewaytest.Slack
	slowFrom time.Time
	latency  time.Duration
}

func (s slowUpdater) Update(ctx context.Context, channel, ts string, m gateway.Msg) error {
	if !s.slowFrom.IsZero() && time.Now().After(s.slowFrom) {
		t := time.NewTimer(s.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.Slack.Update(ctx, channel, ts, m)
}

// slowInterimReplies answers a question with a 60-word answer streamed over 18 s, where every
// chat.update from 5 s on takes latency (Slack slow): a Stop or shutdown at 7 s finds one in flight.
func slowInterimReplies(opt ReplyOptions, latency time.Duration) (*Replies, *gatewaytest.Slack, route.ReplyRequest) {
	fs := newQuestionSlack()
	chat := &llmtest.Chat{Steps: llmtest.Deltas(numbered(60), 300*time.Millisecond)}
	r := NewReplies(fs, slowUpdater{fs, time.Now().Add(5 * time.Second), latency}, fs, fs, chat, nil, opt)
	req := testRequest()
	return r, fs, req
}

// TestShutdownDuringAnInterimCallEndsWithinShutdownTimeout: an interim chat.update in flight when
// the bot shuts down (it holds its slot, so it is not cancelled midway) does not push the closing
// writes' time box later: it counts from the cancellation.
func TestShutdownDuringAnInterimCallEndsWithinShutdownTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := buttonOptions()
		opt.ShutdownTimeout = 2 * time.Second
		t0 := time.Now()
		r, _, req := slowInterimReplies(opt, 8*time.Second)
		ctx, cancel := context.WithCancelCause(t.Context())
		cancelAt := t0.Add(7 * time.Second)
		time.AfterFunc(7*time.Second, func() { cancel(ErrShutdown) })
		err := r.Reply(ctx, req)
		took := time.Since(cancelAt)
		t.Logf("Reply = %v, %v after ErrShutdown", err, took)
		if took > opt.ShutdownTimeout {
			t.Errorf("closing took %v after ErrShutdown, want at most ShutdownTimeout = %v", took, opt.ShutdownTimeout)
		}
	})
}

// TestButtonsStopDuringASlowInterimCallStillCloses: after a Stop, the final write gets its whole
// FinalTimeout even when an interim call in flight at the Stop took part of it first (only at
// shutdown does the time box count from the cancellation); the answer ends with the stopped note
// and Regenerate.
func TestButtonsStopDuringASlowInterimCallStillCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		r, fs, req := slowInterimReplies(buttonOptions(), 7*time.Second)
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(7*time.Second, func() { cancel(ErrStopped) })
		err := r.Reply(ctx, req)
		t.Logf("Reply = %v, %v after the Stop", err, time.Since(t0.Add(7*time.Second)))
		ms := fs.BotMessages(testTS)
		if len(ms) != 1 || !strings.Contains(ms[0].Text, "Stopped") || buttonKey(ms[0].Buttons) != route.ActionRegenerate {
			t.Errorf("message = %q with buttons %q, want the stopped note and Regenerate", lastBytes(ms[0].Text), buttonKey(ms[0].Buttons))
		}
	})
}

// An answer outgrows its first message just before a shutdown, while the edit budget is spent: the
// first message keeps the text it had (paragraph A and the start of B), and the final write does
// not post a second part that repeats the start of B; the interrupted note goes below instead.
func TestShutdownMultiPartShowsNoTextTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		opt := testOptions()
		opt.Budgets.Edits = pace.NewScheduler(6, 1) // spent: one edit every ~10 s
		steps := []llmtest.Step{
			{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: a + "\n\n" + b[:1000]}},
			{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: b[1000:]}},
			{Wait: time.Minute, Chunk: llm.Chunk{Content: " The end."}},
			{Chunk: llm.Chunk{FinishReason: "stop"}},
		}
		rt := newReplyTest(t, steps, opt)
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(ErrShutdown) })
		err := rt.r.Reply(ctx, rt.req)
		t.Logf("Reply = %v", err)
		got := rt.texts()
		for i, m := range got {
			t.Logf("message %d (%d chars): %q ... %q", i, len(m), m[:min(60, len(m))], m[max(0, len(m)-80):])
		}
		all := strings.Join(got, "\n")
		if n := strings.Count(all, "Bravo sentence 0 of"); n != 1 {
			t.Errorf("the second paragraph's first sentence shows %d times in the thread, want once", n)
		}
	})
}

// The model has finished and the reply's final edit waits for a chat.update slot (the shared budget
// is spent, as under load) when the bot shuts down: the wait gets half the closing time and the
// shutdown rule the rest (the placeholder withdrawn and the asker told, or the note posted below),
// so the thread is not left "Thinking…".
func TestShutdownDuringTheFinalWriteClosesTheReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := testOptions()
		opt.Budgets.Edits = pace.NewScheduler(6, 1) // one edit every ~10 s
		other := opt.Budgets.Edits.Lane()           // another reply takes the slot there is
		mustNoErr(t, other.Wait(t.Context(), pace.Final, time.Time{}))
		defer other.Close()
		rt := newReplyTest(t, llmtest.Deltas([]string{"The ", "whole ", "answer."}, 100*time.Millisecond), opt)
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(ErrShutdown) }) // the answer ended at +0.3 s
		err := rt.r.Reply(ctx, rt.req)
		t.Logf("Reply = %v", err)
		ms := rt.slack.BotMessages(testTS)
		eph := rt.slack.CallsOf("ephemeral")
		t.Logf("messages %+v; ephemerals %d", ms, len(eph))
		switch {
		case len(ms) == 0 && len(eph) == 1:
			// withdrawn, asker told
		case len(ms) >= 1 && !strings.Contains(ms[0].Text, "Thinking"):
			// the answer (or a note) landed
		default:
			t.Errorf("thread shows %q and the asker got %d private notes: left as a bare placeholder", rt.texts(), len(eph))
		}
	})
}

// The answer is complete and the final chat.stopStream fails transiently (502) as the bot shuts down;
// Slack answers again within the closing time. The shutdown rule's try goes on with what the first
// try did not get written: the thread shows the answer's end, or the interrupted note, never a
// finished-looking answer without its end.
func TestStreamShutdownDuringFinalKeepsTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		steps := []llmtest.Step{
			{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "Line one of the answer.\n"}},
			{Wait: 100 * time.Millisecond, Chunk: llm.Chunk{Content: "Line two of the answer.\nThe END."}},
			{Chunk: llm.Chunk{FinishReason: "stop"}},
		}
		opt := streamOptions()
		opt.Budgets.Streams = pace.NewBucket(600, 20) // plenty: only Slack's 502s hold the stop back
		rt := newReplyTest(t, steps, opt)
		t0 := time.Now()
		rt.slack.StopErr = func(int, gatewaytest.Call) error {
			if time.Since(t0) < 2100*time.Millisecond {
				return slack.StatusCodeError{Code: 502, Status: "502 Bad Gateway"}
			}
			return nil
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(ErrShutdown) })
		err := rt.r.Reply(ctx, rt.req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, rt.slack, t0)
		ms := rt.slack.BotMessages(testTS)
		var all strings.Builder
		for i, m := range ms {
			t.Logf("message %d: streaming %v mark %+v text %q", i, m.Streaming, m.Mark, m.Text)
			all.WriteString(m.Text + "\n")
		}
		if !strings.Contains(all.String(), "The END.") && !strings.Contains(all.String(), textInterruptedAbove) {
			t.Errorf("the thread shows %q: the answer's end is lost and no note says so", all.String())
		}
	})
}

// chat.stopStream is refused, so the final write rescues the answer with posts, which wait out a 429
// while the bot starts shutting down. The rescue lands in time: no "interrupted" note goes under the
// complete answer.
func TestShutdownAfterRescueNoFalseInterruptedNote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := lines(3)
		rt := newReplyTest(t, llmtest.Deltas(ws, 100*time.Millisecond), streamOptions())
		t0 := time.Now()
		rt.slack.StopErr = func(int, gatewaytest.Call) error {
			return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
		}
		rt.slack.PostErr = func(n int, c gatewaytest.Call) error {
			if time.Since(t0) < 1200*time.Millisecond {
				return &slack.RateLimitedError{RetryAfter: time.Second}
			}
			return nil
		}
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(ErrShutdown) })
		err := rt.r.Reply(ctx, rt.req)
		t.Logf("Reply = %v", err)
		logCalls(t, rt.slack, t0)
		var all strings.Builder
		for _, m := range rt.slack.BotMessages(testTS) {
			all.WriteString(m.Text + "\n")
		}
		for _, w := range ws {
			if !strings.Contains(all.String(), strings.TrimSpace(w)) {
				t.Fatalf("the thread lacks %q: not the case under test", strings.TrimSpace(w))
			}
		}
		if strings.Contains(all.String(), textInterruptedAbove) {
			t.Errorf("the thread shows the whole answer and then %q", textInterruptedAbove)
		}
	})
}
