package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/pace"
)

// chat.update is down (503) beyond finalOutage as a two-part answer ends while Slack shows only the
// start of part 1 (the placeholder): part 1 is posted anew (the re-post's own 10 s window) and the
// placeholder deleted; the post of part 2 then meets one 503, as the re-post in
// TestRepostAfterOutageSurvivesOneMore503 does. Slack is back for posts (the re-post just went
// through): part 2 is tried again and stands, with the answer's end.
func TestPostAfterRepostSurvivesOne503(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := []step{
			{wait: 100 * time.Millisecond, chunk: llm.Chunk{Content: "Intro. "}},
			{wait: 5 * time.Second, chunk: llm.Chunk{Content: a + "\n\n" + b}},
			{chunk: llm.Chunk{FinishReason: "stop"}},
		}
		rt := newReplyTest(t, steps, testOptions())
		t0 := time.Now()
		rt.slack.updateErr = func(n int, c call) error {
			if since := time.Since(t0); since >= 4*time.Second && since < 10*time.Minute {
				return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
			}
			return nil
		}
		rt.slack.postErr = func(n int, c call) error {
			if n == 3 { // 1: placeholder, 2: part 1 anew, 3: part 2's first try
				return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, rt.slack, t0)
		all := strings.Join(rt.texts(), "\n")
		last := b[strings.LastIndex(b, "Bravo sentence"):]
		if !strings.Contains(all, last) {
			t.Errorf("the thread lacks the answer's end %q: part 2's post was not tried again after one 503 (%d posts); thread: %d messages", last, len(rt.slack.callsOf("post")), len(rt.texts()))
		}
	})
}

// Slack is slow for a while (posts land but answer after 12 s) as a long answer outgrows its first
// message: the interim post of part 2 times out (it landed, with a Stop button). The bot then shuts
// down, or the asker presses Stop; the read that looks for the lost part meets Tier 3's 429
// (Retry-After 30 s). The read is optional, the closing writes are not: the answer is still closed
// with its note (in it or under it).
func TestLostPostReadDoesNotEatClosingTime(t *testing.T) {
	t.Run("shutdown", func(t *testing.T) {
		testLostPostClosing(t, ErrShutdown, []string{textInterrupted, textInterruptedAbove})
	})
	t.Run("stop", func(t *testing.T) {
		testLostPostClosing(t, ErrStopped, []string{"Stopped"})
	})
}

func testLostPostClosing(t *testing.T, cause error, notes []string) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := slowSecondPart(a, b)
		fs := newQuestionSlack()
		chat := &fakeChat{steps: steps}
		t0 := time.Now()
		fs.repliesErr = func(n int, c call) error {
			return &slack.RateLimitedError{RetryAfter: 30 * time.Second}
		}
		opt := testOptions()
		opt.Buttons = true
		r := NewReplies(fs, lagPoster{fs, t0.Add(time.Second), t0.Add(25 * time.Second)}, fs, fs, chat, nil, opt)
		req := testRequest()
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(30*time.Second, func() { cancel(cause) })
		err := r.Reply(ctx, req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		if len(fs.callsOf("replies")) == 0 {
			t.Fatalf("no thread read: not the case under test")
		}
		var all strings.Builder
		for i, m := range fs.botMessages(testTS) {
			t.Logf("message %d: buttons %v mark %+v text %.60q", i, buttonKey(m.buttons), m.mark, m.text)
			all.WriteString(m.text + "\n")
		}
		found := false
		for _, n := range notes {
			found = found || strings.Contains(all.String(), n)
		}
		if !found {
			t.Errorf("the thread shows none of the notes %q: the closing time went on the read", notes)
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
		chat := &fakeChat{steps: deltas(ws, time.Second)}
		t0 := time.Now()
		fs.postErr = nthTimesOut(1, "chat.postMessage") // the rescue's post times out (and did not land)
		opt := streamOptions()
		opt.Buttons = true
		r := slowStreaming(fs, fs, chat, opt)
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		regen, noted := false, false
		for i, m := range fs.botMessages(testTS) {
			t.Logf("message %d: streaming %v buttons %q mark %+v text %.80q", i, m.streaming, buttonKey(m.buttons), m.mark, m.text)
			regen = regen || buttonKey(m.buttons) == ActionRegenerate
			noted = noted || strings.Contains(m.text, textUnfinished)
		}
		if !noted {
			t.Fatalf("no message shows %q: not the case under test", textUnfinished)
		}
		if !regen {
			t.Errorf("the answer ends with %q, and no message carries Regenerate", textUnfinished)
		}
	})
}

// A long streamed answer is rescued (an append timed out), and the rescue's second post times out
// (and did not land) after its first went through. The rescue's first part (which repeats the start
// of the answer) is taken back, and the stream is stopped as it stands with the note that the rest
// is missing: the start of the answer shows once, and the last message carries the note.
func TestPartlyFailedRescueShowsNoTextTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(200)
		chat := &fakeChat{steps: deltas(ws, 100*time.Millisecond)}
		t0 := time.Now()
		fs.postErr = nthTimesOut(2, "chat.postMessage") // the rescue's second post times out (and did not land)
		r := slowStreaming(fs, fs, chat, streamOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		ms := fs.botMessages(testTS)
		var all strings.Builder
		for i, m := range ms {
			t.Logf("message %d: streaming %v mark %+v %d bytes, starts %.30q ends %q", i, m.streaming, m.mark, len(m.text), m.text, m.text[max(0, len(m.text)-70):])
			all.WriteString(m.text + "\n")
		}
		if !strings.Contains(all.String(), textUnfinished) {
			t.Fatalf("no message shows %q: not the case under test", textUnfinished)
		}
		if n := strings.Count(all.String(), "Line 0 of the answer."); n != 1 {
			t.Errorf("the answer's first line shows %d times in the thread, want once", n)
		}
		if last := ms[len(ms)-1]; !strings.Contains(last.text, textUnfinished) {
			t.Errorf("the answer's last message ends %q, without the note %q (it is above, on the streamed message)", last.text[max(0, len(last.text)-50):], textUnfinished)
		}
	})
}

// hangingDeleter is a Slack whose chat.delete hangs until net/http's header timeout (30 s) and
// fails with it, without deleting: a Slack in trouble.
type hangingDeleter struct {
	*fakeSlack
	tries *int
}

func (s hangingDeleter) Delete(ctx context.Context, channel, ts string) error {
	*s.tries++
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return fmt.Errorf("Post \"https://slack.com/api/chat.delete\": net/http: timeout awaiting response headers: %w", context.DeadlineExceeded)
}

// chat.update is down (503) beyond finalOutage as a two-part answer ends, and chat.delete hangs and
// times out: the last message's part is posted anew (it stands), and the old message cannot be
// deleted. The replacement's short outage window exists so that "a Slack that is down must not hold
// the thread's turn twice as long" (edit.go): the reply, which holds the thread's turn (the next
// question there waits for it), ends within twice finalOutage of the answer's end.
func TestRepostDeleteDoesNotHoldTheThread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := twoPartSteps(a, b)
		fs := newQuestionSlack()
		chat := &fakeChat{steps: steps}
		t0 := time.Now()
		fs.updateErr = func(n int, c call) error {
			if since := time.Since(t0); since >= 4*time.Second && since < 20*time.Minute {
				return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
			}
			return nil
		}
		tries := 0
		r := NewReplies(fs, hangingDeleter{fs, &tries}, fs, fs, chat, nil, testOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		took := time.Since(t0)
		t.Logf("Reply = %v after %v; %d chat.delete tries", err, took, tries)
		all := strings.Join(func() []string {
			var out []string
			for _, m := range fs.botMessages(testTS) {
				out = append(out, m.text)
			}
			return out
		}(), "\n")
		if last := b[strings.LastIndex(b, "Bravo sentence"):]; !strings.Contains(all, last) {
			t.Fatalf("the thread lacks the answer's end %q: not the case under test", last)
		}
		if end := 5100 * time.Millisecond; took-end > 2*finalOutage {
			t.Errorf("the reply held the thread %v after the answer ended (%d chat.delete tries of 30 s), want at most twice finalOutage (%v)", took-end, tries, 2*finalOutage)
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
	for _, slot := range []bool{false, true} {
		t.Run(map[bool]string{false: "any budget", true: "post slot"}[slot], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var steps []step
				total := 0
				for i := 0; total < convo.MarkdownLimit+2000; i++ {
					l := fmt.Sprintf("Line %d: %s\n", i, strings.Repeat("abc ", 20))
					total += len(l)
					steps = append(steps, step{wait: 20 * time.Millisecond, chunk: llm.Chunk{Content: l}})
				}
				steps = append(steps, step{wait: time.Second, chunk: llm.Chunk{Content: "The END.\n"}},
					step{chunk: llm.Chunk{FinishReason: "stop"}})
				opt := streamOptions()
				if slot {
					opt.Posts = pace.NewKeyed(60, 1)
				}
				rt := newReplyTest(t, steps, opt)
				t0 := time.Now()
				var last time.Time // the channel's last post or stream start, as Slack saw it
				perChannel := func() error {
					now := time.Now()
					if slot && !last.IsZero() && now.Sub(last) < time.Second {
						return &slack.RateLimitedError{RetryAfter: time.Second}
					}
					last = now
					return nil
				}
				rt.slack.startErr = func(n int, c call) error {
					if err := perChannel(); err != nil {
						return err
					}
					if n == 2 { // the answer's second streamed message
						return timedOut("chat.startStream")
					}
					return nil
				}
				rt.slack.postErr = func(n int, c call) error {
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
				rt.slack.mu.Lock()
				for _, c := range rt.slack.calls {
					if c.method != "appendStream" {
						t.Logf("+%v %s ts=%s %d bytes err=%v", c.at.Sub(t0), c.method, c.ts, len(c.text), c.err)
					}
				}
				rt.slack.mu.Unlock()
				var all strings.Builder
				for i, m := range rt.slack.botMessages(testTS) {
					t.Logf("message %d: streaming %v mark %+v %d bytes, ends %q", i, m.streaming, m.mark, len(m.text), m.text[max(0, len(m.text)-60):])
					all.WriteString(m.text + "\n")
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

// As TestTimedOutInterimPostIsNotRepeated, but the asker presses Stop (or the bot shuts down) while
// the slow interim post of part 2 is under way: that post is given up (half the closing time after
// the cancellation), though Slack posted it. It may have landed as much as one that timed out
// before the cancellation: part 2 shows once, and no stray copy keeps a Stop button.
func TestInterimPostCutByCancelIsNotRepeated(t *testing.T) {
	for _, cause := range []error{ErrStopped, ErrShutdown} {
		t.Run(cause.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := longTwoPartAnswer()
				steps := slowSecondPart(a, b)
				fs := newQuestionSlack()
				chat := &fakeChat{steps: steps}
				t0 := time.Now()
				opt := testOptions()
				opt.Buttons = true
				opt.ShutdownTimeout = 10 * time.Second
				r := NewReplies(fs, lagPoster{fs, t0.Add(time.Second), t0.Add(14 * time.Second)}, fs, fs, chat, nil, opt)
				req := testRequest()
				ctx, cancel := context.WithCancelCause(t.Context())
				time.AfterFunc(12*time.Second, func() { cancel(cause) }) // the post of part 2 went at +10.1 s
				err := r.Reply(ctx, req)
				t.Logf("Reply = %v after %v", err, time.Since(t0))
				logCalls(t, fs, t0)
				checkPart2OnceWithoutStop(t, fs)
			})
		})
	}
}

// A two-part answer whose second message refuses its final edit (cant_update_message): its part is
// posted anew, and the old message cannot be deleted (chat.delete answers 503 through its tries). The
// thread shows the part twice (never lost), and the next question sees the answer once, whole: the
// new part names the one it replaces (Mark.Replaces), which Build skips.
func TestUndeletedRefusedPartReplayedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := twoPartSteps(a, b)
		rt := newReplyTest(t, steps, testOptions())
		t0 := time.Now()
		rt.slack.updateErr = func(n int, c call) error {
			if c.ts == "1700000000.000102" && time.Since(t0) >= 4*time.Second {
				return slack.SlackErrorResponse{Err: "cant_update_message"}
			}
			return nil
		}
		rt.slack.deleteErr = func(n int, c call) error { // chat.delete down meanwhile
			return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v", err)
		logCalls(t, rt.slack, t0)
		all := strings.Join(rt.texts(), "\n")
		if last := b[strings.LastIndex(b, "Bravo sentence"):]; !strings.Contains(all, last) {
			t.Fatalf("the thread lacks the answer's end %q: not the case under test", last)
		}
		rt.slack.mu.Lock()
		rt.slack.deleteErr = nil
		rt.slack.mu.Unlock()
		as := assistantMessages(askAgain(t, rt))
		if len(as) != 1 {
			t.Fatalf("the answer is replayed as %d assistant messages, want 1", len(as))
		}
		if n := strings.Count(as[0], "Bravo sentence 0 of"); n != 1 {
			t.Errorf("the next question sees the second part's first sentence %d times, want once", n)
		}
	})
}
