package handlers

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/pace"
	"github.com/slack-go/slack"
)

// As TestPartlyFailedRescueShowsNoTextTwice (the rescue's second post times out and did NOT land),
// but the optional look in the thread cannot be made: Slack's Tier 3 read budget is spent (429), or
// no read token is free. The posted part is still taken back (docs/design.md: "a rescue that fails
// takes back the parts it posted"): each line shows once.
func TestFailedRescueTakesBackPostedPartsWhenItCannotLook(t *testing.T) {
	for _, c := range []string{"read429", "noReadToken"} {
		t.Run(c, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := newQuestionSlack()
				ws := lines(200)
				chat := &fakeChat{steps: deltas(ws, 100*time.Millisecond)}
				t0 := time.Now()
				fs.postErr = nthTimesOut(2, "chat.postMessage") // the rescue's second post times out (and did not land)
				opt := streamOptions()
				switch c {
				case "read429":
					fs.repliesErr = func(n int, c call) error {
						if n == 1 { // the look: Slack's read budget is spent for now
							return &slack.RateLimitedError{RetryAfter: 30 * time.Second}
						}
						return nil
					}
				case "noReadToken":
					opt.Reads = pace.NewBucket(0.001, 1)
					opt.Reads.TryTake() // other replies spent the workspace's read budget
				}
				r := slowStreaming(fs, fs, chat, opt)
				req := testRequest()
				err := r.Reply(t.Context(), req)
				t.Logf("Reply = %v after %v", err, time.Since(t0))
				logCalls(t, fs, t0)
				var all strings.Builder
				for i, m := range fs.botMessages(testTS) {
					t.Logf("message %d: streaming %v mark %+v %d bytes, starts %.30q", i, m.streaming, m.mark, len(m.text), m.text)
					all.WriteString(m.text + "\n")
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
