package handlers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/followup"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
)

// Compile-time check: the fake implements the handlers' interface.
var _ Chat = (*llmtest.Chat)(nil)

func joined(ws []string) string { return strings.Join(ws, "") }

// helpers shared by the tests

func mention(text string) slack.Message {
	var m slack.Message
	m.User, m.Text, m.Timestamp = "U1", text, "1700000000.000001"
	return m
}

func testOptions() ReplyOptions {
	return ReplyOptions{BotUserID: "UBOT", BotID: "BBOT", BotName: "llmbot", TeamID: "T1", FollowUps: testFollowUps(nil), Rand: sameBytes(0x5a)}
}

// testFollowUps decides the follow-ups of testOptions' bot, with the other replicas' marks (nil: none).
func testFollowUps(marks followup.Marks) *followup.Tracker {
	return followup.New(followup.Options{On: true, BotUserID: "UBOT", BotID: "BBOT", Marks: marks})
}

func mustNoErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// timedOut is the error of a Slack call (method, as "chat.postMessage") that got no answer in time, as
// net/http's client gives it: it wraps context.DeadlineExceeded.
func timedOut(method string) error {
	return fmt.Errorf("Post \"https://slack.com/api/%s\": %w", method, context.DeadlineExceeded)
}

// nthTimesOut is a hook under which the nth call of its method (from 1) times out, as timedOut says
// of method, and every other goes through.
func nthTimesOut(nth int, method string) gatewaytest.Hook {
	return func(n int, _ gatewaytest.Call) error {
		if n == nth {
			return timedOut(method)
		}
		return nil
	}
}

func errTruncated() error { return &llm.Error{Kind: llm.KindTruncated, Message: "stream ended early"} }

// helpers shared by the tests of how an answer's last writes land: the final write, re-posts, lost
// posts, stream rescue and shutdown

// longTwoPartAnswer returns an answer of two paragraphs, A and B, where A alone fits a message
// and A+B does not: B is the part that continues in a second message.
func longTwoPartAnswer() (a, b string) {
	var sa, sb strings.Builder
	for i := 0; sa.Len() < 2000; i++ {
		fmt.Fprintf(&sa, "Alpha sentence %d of the first paragraph. ", i)
	}
	for i := 0; sb.Len() < 2500; i++ {
		fmt.Fprintf(&sb, "Bravo sentence %d of the second paragraph. ", i)
	}
	return strings.TrimSpace(sa.String()), strings.TrimSpace(sb.String())
}

// askAgain asks a second question in the test thread (all Slack hooks cleared) and returns the
// messages the model is sent for it.
func askAgain(t *testing.T, rt *replyTest) []llm.Message {
	t.Helper()
	fs := rt.slack
	fs.Mu.Lock()
	fs.UpdateErr, fs.PostErr, fs.StartErr, fs.AppendErr, fs.StopErr = nil, nil, nil, nil, nil
	var q2 slack.Message
	q2.User, q2.Text, q2.Timestamp, q2.ThreadTimestamp = "U1", "<@UBOT> and then?", "1700000000.900000", testTS
	key := testCh + "/" + testTS
	fs.Threads[key] = append(fs.Threads[key], q2)
	fs.Mu.Unlock()
	rt.chat.SetSteps(llmtest.Deltas([]string{"ok"}, time.Millisecond))
	req2 := rt.req
	req2.TS, req2.Text = q2.Timestamp, q2.Text
	if err := rt.r.Reply(t.Context(), req2); err != nil {
		t.Logf("second reply: %v", err)
	}
	reqs := rt.chat.Calls()
	return reqs[len(reqs)-1].Messages
}

func assistantMessages(msgs []llm.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Role == llm.RoleAssistant {
			out = append(out, m.Content)
		}
	}
	return out
}

// logCalls logs every Slack call since t0, its text cut short.
func logCalls(t *testing.T, fs *gatewaytest.Slack, t0 time.Time) {
	t.Helper()
	fs.Mu.Lock()
	defer fs.Mu.Unlock()
	for _, c := range fs.Calls {
		t.Logf("+%v %s ts=%s text=%.50q err=%v", c.At.Sub(t0), c.Method, c.TS, c.Text, c.Err)
	}
}

// slowStreaming is Replies on fs (messages written through msgs) whose chat.appendStream is slow for
// a minute from 2 s on: appends land but answer after 12 s (slowStreamer).
func slowStreaming(fs *gatewaytest.Slack, msgs gateway.Messenger, chat *llmtest.Chat, opt ReplyOptions) *Replies {
	now := time.Now()
	return NewReplies(fs, msgs, slowStreamer{fs, now.Add(2 * time.Second), now.Add(62 * time.Second)}, fs, chat, nil, opt)
}

// slowStreamer is a Slack whose chat.appendStream, between from and to, carries out the append but
// answers only after 12 s: a caller that gives up sooner (gateway.WriteCallTimeout, 10 s) gets its context's
// error although the text was appended.
type slowStreamer struct {
	*gatewaytest.Slack
	from, to time.Time
}

func (s slowStreamer) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	if err := s.Slack.AppendStream(ctx, channel, ts, markdown); err != nil {
		return err
	}
	if now := time.Now(); !now.Before(s.from) && now.Before(s.to) {
		t := time.NewTimer(12 * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("Post \"https://slack.com/api/chat.appendStream\": %w", ctx.Err())
		}
	}
	return nil
}

// landedTimeoutPoster is a Slack whose n-th chat.postMessage posts the message but answers with
// net/http's timeout, as a slow Slack does.
type landedTimeoutPoster struct {
	*gatewaytest.Slack
	n     int
	posts *int
}

func (s landedTimeoutPoster) Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (string, error) {
	ts, err := s.Slack.Post(ctx, channel, threadTS, m)
	if *s.posts++; *s.posts == s.n && err == nil {
		return "", timedOut("chat.postMessage")
	}
	return ts, err
}

// sameBytes is a source of "randomness" that always gives the same byte: every request's fence
// boundary in the tests is testBoundary, so two requests can be compared.
type sameBytes byte

func (b sameBytes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// testBoundary is the boundary testOptions' fences draw.
const testBoundary = "5a5a5a5a5a5a5a5a"

// fenced is text as a request fences data from source in the tests.
func fenced(source, text string) string {
	return "<<<" + testBoundary + " data from " + source + ">>>\n" + text + "\n<<<" + testBoundary + " end>>>"
}
