package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
)

// checkPart2OnceWithoutStop fails the test unless the second paragraph of longTwoPartAnswer shows once
// in the test thread and no message of the finished answer still shows a Stop button.
func checkPart2OnceWithoutStop(t *testing.T, fs *fakeSlack) {
	t.Helper()
	var all strings.Builder
	stops := 0
	for i, m := range fs.botMessages(testTS) {
		t.Logf("message %d: buttons %v mark %+v text %.60q", i, buttonKey(m.buttons), m.mark, m.text)
		all.WriteString(m.text + "\n")
		if strings.Contains(buttonKey(m.buttons), ActionStop) {
			stops++
		}
	}
	if n := strings.Count(all.String(), "Bravo sentence 0 of"); n != 1 {
		t.Errorf("part 2's first sentence shows %d times in the thread, want once", n)
	}
	if stops > 0 {
		t.Errorf("%d messages of the finished answer still show a Stop button", stops)
	}
}

// slowDeleter is a Slack whose chat.delete deletes the message but answers after net/http's timeout
// (an error wrapping context.DeadlineExceeded), as a slow Slack does.
type slowDeleter struct{ *fakeSlack }

func (s slowDeleter) Delete(ctx context.Context, channel, ts string) error {
	if err := s.fakeSlack.Delete(ctx, channel, ts); err != nil {
		return err
	}
	return timedOut("chat.delete")
}

// A two-part answer whose second message refuses its final edit (cant_update_message): its part is
// posted anew and the message deleted; Slack deletes it but the answer times out. The part stands in
// the thread, with Regenerate.
func TestTimedOutDeleteKeepsTheLastPart(t *testing.T) {
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
		opt := testOptions()
		opt.Buttons = true
		r := NewReplies(fs, slowDeleter{fs}, fs, fs, chat, nil, opt)
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		var all strings.Builder
		regen := false
		for i, m := range fs.botMessages(testTS) {
			t.Logf("message %d: buttons %q mark %+v text %.60q", i, buttonKey(m.buttons), m.mark, m.text)
			all.WriteString(m.text + "\n")
			regen = regen || buttonKey(m.buttons) == ActionRegenerate
		}
		last := b[strings.LastIndex(b, "Bravo sentence"):]
		if !strings.Contains(all.String(), last) {
			t.Errorf("the thread lacks the answer's end %q (its message was deleted, its part never posted anew)", last)
		}
		if !regen {
			t.Errorf("no message of the finished answer carries Regenerate")
		}
	})
}

// lagPoster is a Slack whose chat.postMessage, between from and to, posts the message but answers
// only after 12 s: a caller that gives up sooner (writeCallTimeout, 10 s) gets its context's error
// although the message was posted.
type lagPoster struct {
	*fakeSlack
	from, to time.Time
}

func (s lagPoster) Post(ctx context.Context, channel, threadTS string, m Msg) (string, error) {
	ts, err := s.fakeSlack.Post(ctx, channel, threadTS, m)
	if err != nil {
		return ts, err
	}
	if now := time.Now(); !now.Before(s.from) && now.Before(s.to) {
		t := time.NewTimer(12 * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", fmt.Errorf("Post \"https://slack.com/api/chat.postMessage\": %w", ctx.Err())
		}
	}
	return ts, nil
}

// Slack is slow for a while (posts land but answer after 12 s) as a long answer outgrows its first
// message: the interim post of part 2 times out, though Slack posted it. A timed-out post may have
// landed, so it must not be repeated: part 2 shows once, and no stray copy keeps a Stop button.
func TestTimedOutInterimPostIsNotRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		steps := slowSecondPart(a, b)
		fs := newQuestionSlack()
		chat := &fakeChat{steps: steps}
		t0 := time.Now()
		opt := testOptions()
		opt.Buttons = true
		r := NewReplies(fs, lagPoster{fs, t0.Add(time.Second), t0.Add(50 * time.Second)}, fs, fs, chat, nil, opt)
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		checkPart2OnceWithoutStop(t, fs)
		as := assistantMessages(askAgain(t, &replyTest{slack: fs, chat: chat, r: r, req: req}))
		if len(as) != 1 || strings.Count(as[0], "Bravo sentence 0 of") != 1 {
			n := 0
			for _, a := range as {
				n += strings.Count(a, "Bravo sentence 0 of")
			}
			t.Errorf("the next question sees the answer as %d assistant messages with part 2 %d times, want once", len(as), n)
		}
	})
}

// chat.update is down (503) for over finalOutage as an answer ends: the last message's part is posted
// anew (and the message deleted); that post meets one more 503 and Slack answers the next try: the
// part stands, whether the message was a later part or the only one (the placeholder).
func TestRepostAfterOutageSurvivesOneMore503(t *testing.T) {
	a, b := longTwoPartAnswer()
	for _, tc := range []struct {
		name  string
		steps []step
		end   string // the answer's end, which must stand
	}{
		{"later part", twoPartSteps(a, b), b[strings.LastIndex(b, "Bravo sentence"):]},
		{"only message", deltas([]string{"The whole ", "answer."}, 2500*time.Millisecond), "The whole answer."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, tc.steps, testOptions())
				t0 := time.Now()
				rt.slack.updateErr = func(n int, c call) error {
					if since := time.Since(t0); since >= 4*time.Second && since < 10*time.Minute {
						return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
					}
					return nil
				}
				failed := false
				rt.slack.postErr = func(n int, c call) error {
					if time.Since(t0) > 2*time.Minute && !failed { // the re-post's first try
						failed = true
						return slack.StatusCodeError{Code: 503, Status: "503 Service Unavailable"}
					}
					return nil
				}
				err := rt.r.Reply(t.Context(), rt.req)
				t.Logf("Reply = %v after %v", err, time.Since(t0))
				logCalls(t, rt.slack, t0)
				if all := strings.Join(rt.texts(), "\n"); !strings.Contains(all, tc.end) {
					t.Errorf("the thread (%d messages) lacks the answer's end %q after one 503 on the re-post", len(rt.texts()), tc.end)
				}
				if !failed {
					t.Error("no re-post met the 503: the case under test did not happen")
				}
			})
		})
	}
}

// Slack is slow for a minute while an answer streams (appends land but answer after 12 s): an append
// times out, the stream is marked broken and the final write rescues the answer with posts, whose
// first times out too (and did not land). The streamed message is then stopped as it stands, with a
// note that the rest is missing, not left streaming.
func TestFailedRescueStopsTheStreamWithANote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		ws := lines(20)
		chat := &fakeChat{steps: deltas(ws, time.Second)}
		t0 := time.Now()
		fs.postErr = nthTimesOut(1, "chat.postMessage") // the rescue's post times out (and did not land); Slack takes later posts
		r := slowStreaming(fs, fs, chat, streamOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		logCalls(t, fs, t0)
		var all strings.Builder
		for i, m := range fs.botMessages(testTS) {
			t.Logf("message %d: streaming %v mark %+v text %q", i, m.streaming, m.mark, m.text)
			all.WriteString(m.text + "\n")
			if m.streaming {
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
