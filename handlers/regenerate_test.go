package handlers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

// Regenerate writes the new answer where the old one stands: the thread ends with one answer to
// the question. When the old answer's message refuses the edit, the new answer comes below it and
// says that it replaces it; when the old answer is gone, it simply comes below.
func TestRegenerateInPlace(t *testing.T) {
	short := []string{"A short ", "answer."}
	long := llmtest.Words(strings.Repeat("Token buckets refill at a steady rate.\n\n", 110), 40) // two parts with buttons
	for _, tc := range []struct {
		name     string
		old, new []string
		refuse   string // the error of the old answer's edit ("": none)
		gone     bool   // the old answer was deleted before Regenerate was pressed
		keptOld  int    // old messages left in the thread
		inPlace  bool   // the new answer's first message is the old one's
		note     string // the new answer's status note
	}{
		{name: "one part over one", old: short, new: long[:3], inPlace: true},
		{name: "two parts over one, the second deleted", old: long, new: short, inPlace: true},
		{name: "one part over two, the second posted", old: short, new: long, inPlace: true},
		{name: "an old message that refuses the edit", old: short, new: long[:3], refuse: "cant_update_message",
			keptOld: 1, note: textReplacesAbove},
		{name: "an old answer someone deleted", old: short, new: long[:3], gone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, llmtest.Deltas(tc.old, 100*time.Millisecond), buttonOptions())
				mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
				oldMsgs := rt.slack.BotMessages(testTS)
				oldParts := slackmd.Split(joined(tc.old), slackmd.FormatMrkdwn, buttonPartLimit)
				rt.slack.Mu.Lock()
				rt.slack.Msgs = slices.DeleteFunc(rt.slack.Msgs, func(*gatewaytest.Message) bool { return tc.gone })
				rt.slack.UpdateErr = func(_ int, c gatewaytest.Call) error {
					return refusal(tc.refuse, c.TS == oldMsgs[0].TS)
				}
				rt.chat.SetSteps(llmtest.Deltas(tc.new, 100*time.Millisecond))
				rt.slack.Mu.Unlock()

				// Someone else (allowed by the access policy, checked by the caller) presses Regenerate on
				// the old answer's last message.
				regen := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U2", Team: "T1", TS: testTS,
					ThreadTS: testTS, Regenerate: true, Replace: oldMsgs[len(oldMsgs)-1].TS}
				mustNoErr(t, rt.r.Reply(t.Context(), regen))

				want := slackmd.Split(joined(tc.new), slackmd.FormatMrkdwn, buttonPartLimit)
				want[len(want)-1] += convo.NoteSuffix(tc.note, slackmd.FormatMrkdwn)
				want = append(oldParts[:tc.keptOld:tc.keptOld], want...)
				if got := rt.texts(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("thread = %q\nwant %q", got, want)
				}
				ms := rt.slack.BotMessages(testTS)
				if got := ms[tc.keptOld].TS == oldMsgs[0].TS; got != tc.inPlace {
					t.Errorf("new answer starts in the old answer's message: %t, want %t", got, tc.inPlace)
				}
				if b := ms[len(ms)-1].Buttons; buttonKey(b) != route.ActionRegenerate {
					t.Errorf("last message shows %+v, want Regenerate", b)
				}
				if m := ms[len(ms)-1].Mark; m.Kind != convo.MarkAnswer || m.Question != testTS || m.Note != tc.note {
					t.Errorf("last message's mark = %+v, want an answer to %s with note %q", m, testTS, tc.note)
				}
				reqs := rt.chat.Calls()
				if len(reqs) != 2 {
					t.Fatalf("model calls = %d, want 2", len(reqs))
				}
				if fmt.Sprint(reqs[1].Messages) != fmt.Sprint(reqs[0].Messages) {
					t.Errorf("regenerate request = %+v\nwant the same as the first (old answer not replayed) %+v", reqs[1].Messages, reqs[0].Messages)
				}
			})
		})
	}
}

// refusal is Slack's error code as an error when on, else nil.
func refusal(code string, on bool) error {
	if code == "" || !on {
		return nil
	}
	return slack.SlackErrorResponse{Err: code}
}

// The next question after a Regenerate in place sees the new answer once, where the old one was.
func TestRegenerateInPlaceReplaysTheNewAnswerOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, llmtest.Deltas([]string{"First answer: a bucket of tokens."}, time.Millisecond), buttonOptions())
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		old := rt.slack.BotMessages(testTS)
		rt.chat.SetSteps(llmtest.Deltas([]string{"Second answer: tokens refill over time."}, time.Millisecond))
		regen := rt.req
		regen.User, regen.Text, regen.Regenerate, regen.Replace = "U2", "", true, old[0].TS
		mustNoErr(t, rt.r.Reply(t.Context(), regen))

		var q2 slack.Message
		q2.User, q2.Text, q2.Timestamp, q2.ThreadTimestamp = "U1", "<@UBOT> and leaky buckets?", "1700000000.000900", testTS
		key := testCh + "/" + testTS
		rt.slack.Threads[key] = append(rt.slack.Threads[key], q2)
		rt.chat.SetSteps(llmtest.Deltas([]string{"Leaky buckets drain."}, time.Millisecond))
		req2 := rt.req
		req2.TS, req2.Text = q2.Timestamp, q2.Text
		mustNoErr(t, rt.r.Reply(t.Context(), req2))

		reqs := rt.chat.Calls()
		if len(reqs) != 3 {
			t.Fatalf("%d model requests, want 3", len(reqs))
		}
		var roles []string
		for _, m := range reqs[2].Messages[1:] {
			roles = append(roles, string(m.Role)+": "+m.Content)
		}
		want := []string{"user: explain token buckets", "assistant: Second answer: tokens refill over time.", "user: and leaky buckets?"}
		if fmt.Sprint(roles) != fmt.Sprint(want) {
			t.Errorf("context = %q\nwant %q", roles, want)
		}
		if m := reqs[2].Messages[0]; m.Role != llm.RoleSystem {
			t.Errorf("first message %+v, want the system prompt", m)
		}
	})
}
