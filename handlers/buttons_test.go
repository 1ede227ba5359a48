package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

func buttonOptions() ReplyOptions {
	opt := testOptions()
	opt.Buttons = true
	return opt
}

// wantRef is the value of the test reply's buttons.
var wantRef = route.ReplyRef{ThreadTS: testTS, TS: testTS}.Value()

func TestButtonsStopWhileStreamingRegenerateWhenDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Long enough for two parts at the button part limit.
		ws := llmtest.Words(strings.Repeat("Token buckets refill at a steady rate.\n\n", 110), 40)
		rt := newReplyTest(t, llmtest.Deltas(ws, 100*time.Millisecond), buttonOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))

		posts := rt.slack.CallsOf("post")
		if len(posts) != 2 {
			t.Fatalf("posts = %d, want 2 (placeholder and second part)", len(posts))
		}
		if b := posts[0].Buttons; buttonKey(b) != route.ActionStop || b[0].Value != wantRef || b[0].Text != "Stop" {
			t.Errorf("placeholder buttons = %+v, want Stop with %s", b, wantRef)
		}
		first, second := posts[0].TS, posts[1].TS
		if buttonKey(posts[1].Buttons) != route.ActionStop {
			t.Errorf("second part posted with %+v, want Stop", posts[1].Buttons)
		}
		secondPosted := posts[1].At
		for _, u := range rt.slack.CallsOf("update") {
			last := u.TS == second || u.At.Before(secondPosted)
			final := u.Mark.Kind == convo.MarkAnswer && u.At.Equal(rt.slack.CallsOf("update")[len(rt.slack.CallsOf("update"))-1].At)
			switch {
			case u.Buttons == nil:
				t.Errorf("update of %s without buttons (blocks untouched)", u.TS)
			case u.TS == first && !u.At.Before(secondPosted) && len(u.Buttons) != 0:
				t.Errorf("sealed first part updated with %+v, want no buttons", u.Buttons)
			case last && !final && buttonKey(u.Buttons) != route.ActionStop:
				t.Errorf("interim update of the last part with %+v, want Stop", u.Buttons)
			}
			if len(u.Buttons) > 0 && utf8.RuneCountInString(u.Text) > 3000 {
				t.Errorf("a message with buttons has %d characters, over a section block's 3,000", utf8.RuneCountInString(u.Text))
			}
		}

		ms := rt.slack.BotMessages(testTS)
		want := slackmd.Split(joined(ws), slackmd.FormatMrkdwn, buttonPartLimit)
		if len(ms) != 2 || len(want) != 2 || ms[0].Text != want[0] || ms[1].Text != want[1] {
			t.Fatalf("final messages = %d, want the answer in 2 parts of at most %d bytes", len(ms), buttonPartLimit)
		}
		if len(ms[0].Buttons) != 0 {
			t.Errorf("first part shows %+v, want no buttons", ms[0].Buttons)
		}
		if b := ms[1].Buttons; buttonKey(b) != route.ActionRegenerate || b[0].Value != wantRef {
			t.Errorf("last part shows %+v, want Regenerate with %s", b, wantRef)
		}
		if ms[1].Mark.Kind != convo.MarkAnswer || ms[0].Mark.Kind != convo.MarkAnswer {
			t.Errorf("marks = %v %v, want answers", ms[0].Mark, ms[1].Mark)
		}
	})
}

func TestButtonsOffSendsNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas(numbered(10), 100*time.Millisecond), testOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		for _, c := range append(rt.slack.CallsOf("post"), rt.slack.CallsOf("update")...) {
			if c.Buttons != nil {
				t.Errorf("%s with buttons %+v, want none when off", c.Method, c.Buttons)
			}
		}
	})
}

func TestButtonsStopKeepsTextAndOffersRegenerate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas(numbered(20), 300*time.Millisecond), buttonOptions())
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(1100*time.Millisecond, func() { cancel(ErrStopped) }) // as bot.StopReply does
		err := rt.r.Reply(ctx, rt.req)
		if !errors.Is(err, ErrStopped) {
			t.Errorf("Reply = %v, want ErrStopped", err)
		}
		cause := rt.chat.Cause()
		if !errors.Is(cause, ErrStopped) {
			t.Errorf("model request ended with %v, want cancelled with ErrStopped", cause)
		}
		ms := rt.slack.BotMessages(testTS)
		want := "word0 word1 word2" + convo.NoteSuffix("Stopped by Alice.", slackmd.FormatMrkdwn)
		if len(ms) != 1 || ms[0].Text != want || ms[0].Mark.Note != "Stopped by Alice." {
			t.Fatalf("messages = %+v, want %q", ms, want)
		}
		if buttonKey(ms[0].Buttons) != route.ActionRegenerate {
			t.Errorf("stopped answer shows %+v, want Regenerate", ms[0].Buttons)
		}
	})
}

func TestButtonsRegenerateDeletedQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"never"}, time.Millisecond), buttonOptions())
		rt.slack.Threads[testCh+"/"+testTS] = []slack.Message{mention("<@UBOT> an older question")}
		rt.slack.Threads[testCh+"/"+testTS][0].Timestamp = "1699999999.000001"
		regen := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", TS: testTS, ThreadTS: testTS, Regenerate: true}
		mustNoErr(t, rt.r.Reply(t.Context(), regen))
		if n := len(rt.chat.Calls()); n != 0 {
			t.Errorf("model calls = %d, want none", n)
		}
		ms := rt.slack.BotMessages(testTS)
		if len(ms) != 1 || !strings.Contains(ms[0].Text, "can't find the question") || ms[0].Mark.Kind != convo.MarkNotice || len(ms[0].Buttons) != 0 {
			t.Errorf("messages = %+v, want a notice that the question is gone, without buttons", ms)
		}
	})
}

func TestReplyRefValue(t *testing.T) {
	tests := []struct {
		name string
		ref  route.ReplyRef
	}{
		{"thread", route.ReplyRef{ThreadTS: "1.000001", TS: "1.000002"}},
		{"top-level DM", route.ReplyRef{TS: "1.000002"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := route.ParseReplyRef(tt.ref.Value())
			if err != nil || got != tt.ref {
				t.Errorf("route.ParseReplyRef(%s) = %+v, %v, want %+v", tt.ref.Value(), got, err, tt.ref)
			}
		})
	}
	for _, bad := range []string{"", "1.0", `{"thread_ts":"1.0"}`, "{"} {
		if _, err := route.ParseReplyRef(bad); !errors.Is(err, route.ErrBadValue) {
			t.Errorf("route.ParseReplyRef(%q) = %v, want route.ErrBadValue", bad, err)
		}
	}
}

func TestButtonsStreamModeRegenerateWhenDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := streamOptions()
		opt.Buttons = true
		// Over one streamed message: the first is stopped without buttons, the last gets Regenerate.
		ws := llmtest.Words(strings.Repeat("A line of a long streamed answer.\n", 400), 200)
		rt := newReplyTest(t, llmtest.Deltas(ws, 50*time.Millisecond), opt)
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		stops := rt.slack.CallsOf("stopStream")
		if len(stops) < 2 {
			t.Fatalf("stopStream calls = %d, want the answer over at least 2 streamed messages", len(stops))
		}
		for i, c := range stops {
			want := ""
			if i == len(stops)-1 {
				want = route.ActionRegenerate
			}
			if got := buttonKey(c.Buttons); got != want || (want != "" && c.Buttons[0].Value != wantRef) {
				t.Errorf("stopStream %d with buttons %+v, want %q", i+1, c.Buttons, want)
			}
		}
		if n := len(rt.slack.CallsOf("post")) + len(rt.slack.CallsOf("update")); n != 0 {
			t.Errorf("%d posts/updates, want none (Slack's own stop serves while streaming)", n)
		}
	})
}

// slowPoster is Slack over a network: a post reaches Slack and is made, but the answer takes
// latency to come back; a caller whose context ends meanwhile gets the context's error (as
// net/http does), not the ts of the message Slack made.
type slowPoster struct {
	*gatewaytest.Slack
	latency time.Duration
}

func (s slowPoster) Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (string, error) {
	ts, err := s.Slack.Post(context.WithoutCancel(ctx), channel, threadTS, m)
	t := time.NewTimer(s.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return ts, err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Stop pressed while the post of an answer's second message is on its way to Slack: the post is
// not abandoned (Slack has made the message), so the thread ends with the answer's two parts once
// each, and neither keeps a Stop button (before, the final write posted the part again and the
// first copy stayed a stale preview with Stop).
func TestButtonsStopDuringContinuationPostPostsThePartOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b strings.Builder
		for i := 0; b.Len() < 6000; i++ {
			fmt.Fprintf(&b, "Paragraph %d of a long answer about token buckets and refill rates.\n\n", i)
		}
		fs := newQuestionSlack()
		chat := &llmtest.Chat{Steps: llmtest.Deltas(llmtest.Words(b.String(), 80), 100*time.Millisecond)}
		r := NewReplies(fs, slowPoster{fs, 300 * time.Millisecond}, fs, fs, chat, nil, buttonOptions())
		req := testRequest()
		ctx, cancel := context.WithCancelCause(t.Context())
		fs.PostErr = func(n int, c gatewaytest.Call) error {
			if n == 2 { // the second part reaches Slack; the asker presses Stop just then
				time.AfterFunc(100*time.Millisecond, func() { cancel(ErrStopped) })
			}
			return nil
		}
		err := r.Reply(ctx, req)
		t.Logf("Reply = %v", err)
		ms := fs.BotMessages(testTS)
		for i, m := range ms {
			t.Logf("message %d: %d bytes, buttons %q, ends %q", i+1, len(m.Text), buttonKey(m.Buttons), lastBytes(m.Text))
		}
		if len(ms) != 2 {
			t.Errorf("thread has %d bot messages, want 2 (the answer's two parts)", len(ms))
		}
		for i, m := range ms {
			if buttonKey(m.Buttons) == route.ActionStop {
				t.Errorf("message %d still shows a Stop button after the answer ended", i+1)
			}
		}
	})
}

func lastBytes(s string) string { return s[max(0, len(s)-120):] }

// Regenerate on the answer to a top-level mention whose question was since deleted: Slack keeps
// a deleted thread parent as a tombstone ("This message was deleted.", subtype tombstone, by
// USLACKBOT) at the same ts. The bot says it can't find the question instead of asking the model
// about the tombstone.
func TestButtonsRegenerateDeletedThreadParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"An answer to nothing."}, time.Millisecond), buttonOptions())
		var tomb slack.Message
		tomb.Type, tomb.SubType, tomb.User, tomb.Text = "message", "tombstone", "USLACKBOT", "This message was deleted."
		tomb.Timestamp, tomb.ThreadTimestamp = testTS, testTS
		rt.slack.Threads[testCh+"/"+testTS] = []slack.Message{tomb}
		regen := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U2", TS: testTS, ThreadTS: testTS, Regenerate: true}
		mustNoErr(t, rt.r.Reply(t.Context(), regen))
		if calls := rt.chat.Calls(); len(calls) != 0 {
			msgs := calls[0].Messages
			t.Errorf("model asked %q; want no model call", msgs[len(msgs)-1].Content)
		}
		if got := rt.texts(); len(got) != 1 || !strings.Contains(got[0], "can't find the question") {
			t.Errorf("thread shows %q, want the can't-find-the-question notice", got)
		}
	})
}
