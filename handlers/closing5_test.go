package handlers

import (
	"github.com/llmbot/llmbot/route"
	"sync"

	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
)

// onceHangingDeleter is a Slack in trouble for one call: the first chat.delete hangs until net/http's
// header timeout (30 s) and fails with it without deleting; later ones work.
type onceHangingDeleter struct {
	*fakeSlack
	tries *int
}

func (s onceHangingDeleter) Delete(ctx context.Context, channel, ts string) error {
	*s.tries++
	if *s.tries > 1 {
		return s.fakeSlack.Delete(ctx, channel, ts)
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("Post \"https://slack.com/api/chat.delete\": %w", ctx.Err())
	}
	return fmt.Errorf("Post \"https://slack.com/api/chat.delete\": net/http: timeout awaiting response headers: %w", context.DeadlineExceeded)
}

// A two-part answer whose second message refuses its final edit (cant_update_message): its part is
// posted anew, and the old message is deleted. The first chat.delete hangs and times out (Slack
// did not delete it); "a delete that timed out is repeated within another 10 s" (docs/design.md),
// and the next try works: part 2 shows once.
func TestTimedOutDeleteIsRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := twoPartSteps(a, b)
		fs := newQuestionSlack()
		chat := &fakeChat{steps: steps}
		t0 := time.Now()
		fs.updateErr = func(n int, c call) error {
			if c.ts == "1700000000.000102" && time.Since(t0) >= 4*time.Second { // the answer's second message
				return slack.SlackErrorResponse{Err: "cant_update_message"}
			}
			return nil
		}
		tries := 0
		r := NewReplies(fs, onceHangingDeleter{fs, &tries}, fs, fs, chat, nil, testOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v; %d chat.delete tries", err, time.Since(t0), tries)
		logCalls(t, fs, t0)
		var all strings.Builder
		for i, m := range fs.botMessages(testTS) {
			t.Logf("message %d: mark %+v text %.60q", i, m.mark, m.text)
			all.WriteString(m.text + "\n")
		}
		first := "Bravo sentence 0 of the second paragraph."
		if n := strings.Count(all.String(), first); n != 1 {
			t.Errorf("part 2's first sentence shows %d times, want once: the delete that timed out was not repeated (%d chat.delete tries)", n, tries)
		}
	})
}

// As TestTimedOutInterimPostIsNotRepeated: the interim post of part 2 times out, and the final
// write looks in the thread for it; Slack's read budget (Tier 3) is spent, and that read gets a
// 429 with Retry-After 30 s. Another reply, in another channel, starts a second later and reads its
// thread: a 429 pauses every reader for its Retry-After (Replies.read), so it waits for the pause
// instead of drawing a 429 of its own.
func TestLostPostLookA429PausesOtherReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := slowSecondPart(a, b)
		fs := newQuestionSlack()
		fs.threads["C2/"+testTS] = []slack.Message{mention("<@UBOT> go")}
		t0 := time.Now()
		var spent time.Time // Slack's read budget is spent from the first read on, for 30 s
		first := make(chan struct{})
		fs.repliesErr = func(n int, c call) error {
			if spent.IsZero() {
				spent = time.Now()
				close(first)
			}
			if time.Since(spent) < 30*time.Second {
				return &slack.RateLimitedError{RetryAfter: 30*time.Second - time.Since(spent)}
			}
			return nil
		}
		chat := &fakeChat{steps: steps}
		opt := testOptions()
		opt.Buttons = true
		r := NewReplies(fs, lagPoster{fs, t0.Add(time.Second), t0.Add(30 * time.Second)}, fs, fs, chat, nil, opt)
		req := testRequest()
		other := route.ReplyRequest{Channel: "C2", ChannelType: "channel", User: "U1", Team: "T1",
			TS: "1700000000.000050", ThreadTS: testTS, Text: "<@UBOT> and then?"}
		var wg sync.WaitGroup
		wg.Go(func() {
			select {
			case <-first:
			case <-t.Context().Done():
				return
			}
			time.Sleep(time.Second)
			if err := r.Reply(t.Context(), other); err != nil {
				t.Errorf("the other reply: %v", err)
			}
		})
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		wg.Wait()
		logCalls(t, fs, t0)
		reads := fs.callsOf("replies")
		if len(reads) == 0 || !reads[0].at.After(t0.Add(20*time.Second)) {
			t.Fatalf("no look for the lost part: not the case under test")
		}
		limited := 0
		for _, c := range reads {
			if c.err != nil {
				limited++
			}
		}
		if limited != 1 {
			t.Errorf("%d reads got a 429, want only the first: its Retry-After did not pause the other reader", limited)
		}
	})
}

// landedTimeoutPoster is a Slack whose n-th chat.postMessage posts the message but answers with
// net/http's timeout, as a slow Slack does.
type landedTimeoutPoster struct {
	*fakeSlack
	n     int
	posts *int
}

func (s landedTimeoutPoster) Post(ctx context.Context, channel, threadTS string, m Msg) (string, error) {
	ts, err := s.fakeSlack.Post(ctx, channel, threadTS, m)
	if *s.posts++; *s.posts == s.n && err == nil {
		return "", timedOut("chat.postMessage")
	}
	return ts, err
}

// As TestPartlyFailedRescueShowsNoTextTwice, but the rescue's second post, which times out, did land
// (a timed-out post may have: edit.go). The rescue takes back the part that landed too (found in the
// thread by its mark), not only the first: no part is left naming a deleted first part, and the next
// question in the thread sees the answer from its start, not the second part alone in its place.
func TestPartlyFailedRescueLandedPartKeepsReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(200)
		chat := &fakeChat{steps: deltas(ws, 100*time.Millisecond)}
		t0 := time.Now()
		posts := 0
		msgs := landedTimeoutPoster{fs, 2, &posts}
		r := slowStreaming(fs, msgs, chat, streamOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		var all strings.Builder
		for i, m := range fs.botMessages(testTS) {
			t.Logf("message %d: ts %s streaming %v mark %+v %d bytes, starts %.30q ends %q", i, m.ts, m.streaming, m.mark, len(m.text), m.text, m.text[max(0, len(m.text)-70):])
			all.WriteString(m.text + "\n")
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
