package handlers

import (
	"sync"

	"context"
	"fmt"
	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/pace"
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
		fs := newFakeSlack()
		fs.threads[testCh+"/"+testTS] = []slack.Message{mention("<@UBOT> explain token buckets")}
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
		req := ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", Team: "T1", TS: testTS,
			ThreadTS: testTS, Text: "<@UBOT> explain token buckets"}
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v; %d chat.delete tries", err, time.Since(t0), tries)
		logCallsShort(t, fs, t0)
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
		steps := []step{{wait: 100 * time.Millisecond, chunk: llm.Chunk{Content: a + "\n\n"}}}
		for _, w := range words(b, 60) {
			steps = append(steps, step{wait: time.Second, chunk: llm.Chunk{Content: w}})
		}
		steps = append(steps, step{chunk: llm.Chunk{FinishReason: "stop"}})
		fs := newFakeSlack()
		fs.threads[testCh+"/"+testTS] = []slack.Message{mention("<@UBOT> explain token buckets")}
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
		req := ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", Team: "T1", TS: testTS,
			ThreadTS: testTS, Text: "<@UBOT> explain token buckets"}
		other := ReplyRequest{Channel: "C2", ChannelType: "channel", User: "U1", Team: "T1",
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
		logCallsShort(t, fs, t0)
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

// As TestFailedRescueWithoutOpenStreamStillSaysSo, with a channel post budget of one a second (burst
// 1; ReplyOptions.Posts covers chat.postMessage and chat.startStream) and a Slack that holds to it:
// a post or a stream start in the channel less than a second after the last one gets a 429. The new
// streamed message that carries the note that the rest is missing is a chat.startStream like any
// other: it waits for the channel's post slot, and the note shows.
func TestFailedRescueNoteStreamWaitsForThePostSlot(t *testing.T) {
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
		opt.Posts = pace.NewKeyed(60, 1)
		rt := newReplyTest(t, steps, opt)
		rt.r = NewReplies(rt.slack, rt.slack, rt.slack, rt.slack, rt.chat, nil, opt)
		t0 := time.Now()
		timeout := func(m string) error {
			return fmt.Errorf("Post \"https://slack.com/api/%s\": %w", m, context.DeadlineExceeded)
		}
		var last time.Time // the channel's last post or stream start, as Slack saw it
		perChannel := func() error {
			now := time.Now()
			if !last.IsZero() && now.Sub(last) < time.Second {
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
				return timeout("chat.startStream")
			}
			return nil
		}
		rt.slack.postErr = func(n int, c call) error {
			if err := perChannel(); err != nil {
				return err
			}
			if n == 1 { // the rescue's first post
				return timeout("chat.postMessage")
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
		return "", fmt.Errorf("Post \"https://slack.com/api/chat.postMessage\": %w", context.DeadlineExceeded)
	}
	return ts, err
}

// As TestPartlyFailedRescueShowsNoTextTwice, but the rescue's second post, which times out, did land
// (a timed-out post may have: edit.go). The rescue takes back the part that landed too (found in the
// thread by its mark), not only the first: no part is left naming a deleted first part, and the next
// question in the thread sees the answer from its start, not the second part alone in its place.
func TestPartlyFailedRescueLandedPartKeepsReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newFakeSlack()
		fs.threads[testCh+"/"+testTS] = []slack.Message{mention("<@UBOT> explain token buckets")}
		ws := lines(200)
		chat := &fakeChat{steps: deltas(ws, 100*time.Millisecond)}
		t0 := time.Now()
		posts := 0
		msgs := landedTimeoutPoster{fs, 2, &posts}
		r := NewReplies(fs, msgs, slowStreamer{fs, t0.Add(2 * time.Second), t0.Add(62 * time.Second)}, fs, chat, nil, streamOptions())
		req := ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", Team: "T1", TS: testTS,
			ThreadTS: testTS, Text: "<@UBOT> explain token buckets"}
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCallsShort(t, fs, t0)
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
