package handlers

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/route"
)

// contextOf is the model request's messages as "role: content" lines.
func contextOf(req llm.ChatRequest) string {
	var lines []string
	for _, m := range req.Messages {
		lines = append(lines, string(m.Role)+": "+m.Content)
	}
	return strings.Join(lines, "\n")
}

// TestNewThreadMentionWithForwardedMessage: a person forwards (shares) a message into a channel
// with the comment "@bot" ("<@UBOT> what went wrong here?" or just "<@UBOT>"). The forwarded
// message is an attachment (is_share) of the mention, which Slack has; the request built from the
// app_mention carries only its text, and a new thread is not read, so the model never sees the
// forwarded message — and a bare mention gets the "ask me anything" hint instead of an answer.
func TestNewThreadMentionWithForwardedMessage(t *testing.T) {
	for _, text := range []string{"<@UBOT> what went wrong here?", "<@UBOT>"} {
		t.Run(text, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, shortAnswer, testOptions())
				m := mention(text)
				m.Attachments = []slack.Attachment{{IsShare: true, IsMsgUnfurl: true, AuthorName: "Bob",
					Text: "deploy of api-7 failed: exit code 137", Fallback: "deploy of api-7 failed: exit code 137"}}
				rt.slack.Threads[testCh+"/"+testTS] = []slack.Message{m}
				rt.req.Text, rt.req.Attachments = text, m.Attachments // from the app_mention: a new thread is not read
				mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
				reqs := rt.chat.Calls()
				if len(reqs) != 1 {
					t.Fatalf("%d model requests, want 1 (bot messages: %q)", len(reqs), rt.texts())
				}
				if got := contextOf(reqs[0]); !strings.Contains(got, "exit code 137") {
					t.Errorf("the forwarded message is not in the context:\n%s", got)
				}
			})
		})
	}
}

// TestSecondQuestionSeesTheFirstAnswer: two questions arrive in one thread before the bot has
// posted anything (two people asking at once, or the same person adding a second question). The
// bot answers them in turn (bot/turns.go: "the second seeing the first's answer"), but the first
// answer was posted after the second question, and Build leaves out everything after the
// trigger: the model answers Q2 with Q1 apparently unanswered, and may answer Q1 again.
func TestSecondQuestionSeesTheFirstAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chat := &llmtest.Chat{Steps: llmtest.Deltas([]string{"Token buckets refill at a fixed rate."}, time.Millisecond)}
		rt := newReplyTest(t, nil, testOptions())
		rt.chat = chat
		rt.r.chat = chat
		var q2 slack.Message
		q2.User, q2.Text, q2.Timestamp, q2.ThreadTimestamp = "U2", "<@UBOT> and leaky buckets?", "1700000000.000050", testTS
		key := testCh + "/" + testTS
		rt.slack.Threads[key] = append(rt.slack.Threads[key], q2)

		// Q1 (a new thread) is answered first; its answer's ts is after Q2's.
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		if ms := rt.slack.BotMessages(testTS); len(ms) != 1 || ms[0].TS <= q2.Timestamp {
			t.Fatalf("bot messages %+v: want one answer posted after Q2 (%s)", ms, q2.Timestamp)
		}
		chat.SetSteps(llmtest.Deltas([]string{"Leaky buckets drain at a fixed rate."}, time.Millisecond))
		req2 := rt.req
		req2.User, req2.TS, req2.Text = q2.User, q2.Timestamp, q2.Text
		mustNoErr(t, rt.r.Reply(t.Context(), req2))
		reqs := chat.Calls()
		if len(reqs) != 2 {
			t.Fatalf("%d model requests, want 2", len(reqs))
		}
		got := contextOf(reqs[1])
		if !strings.Contains(got, "assistant: Token buckets refill at a fixed rate.") {
			t.Errorf("the answer to Q1 is missing from Q2's context:\n%s", got)
		}
	})
}

// TestAnswersAfterRegenerateAreNotMergedIntoOne: Alice asks, the bot answers, someone presses
// Regenerate and the bot posts a second answer right under the first (buttons.go: "a new message at
// the end of the thread"). Build merges consecutive bot answers as if they were the parts of one
// split answer, so on the next question the model gets the old and the new answer glued into one
// assistant message ("A\nB"), as though it had said both at once.
func TestAnswersAfterRegenerateAreNotMergedIntoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chat := &llmtest.Chat{}
		rt := newReplyTest(t, nil, testOptions())
		rt.chat, rt.r.chat = chat, chat
		answer := func(s string) {
			chat.SetSteps(llmtest.Deltas([]string{s}, time.Millisecond))
		}
		answer("First answer: a bucket of tokens.")
		mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
		answer("Second answer: tokens refill over time.")
		regen := rt.req
		regen.User, regen.Text, regen.Regenerate = "U2", "", true
		mustNoErr(t, rt.r.Reply(t.Context(), regen))

		var q2 slack.Message
		q2.User, q2.Text, q2.Timestamp, q2.ThreadTimestamp = "U1", "<@UBOT> thanks, and leaky buckets?", "1700000000.000900", testTS
		key := testCh + "/" + testTS
		rt.slack.Threads[key] = append(rt.slack.Threads[key], q2)
		answer("Leaky buckets drain.")
		req2 := rt.req
		req2.TS, req2.Text = q2.Timestamp, q2.Text
		mustNoErr(t, rt.r.Reply(t.Context(), req2))

		reqs := chat.Calls()
		if len(reqs) != 3 {
			t.Fatalf("%d model requests, want 3", len(reqs))
		}
		for _, m := range reqs[2].Messages {
			if m.Role == llm.RoleAssistant && strings.Contains(m.Content, "First answer") && strings.Contains(m.Content, "Second answer") {
				t.Errorf("two separate answers replayed as one assistant message %q; context:\n%s", m.Content, contextOf(reqs[2]))
			}
		}
	})
}

// TestEditAnswerWhoseFirstPartStayedAPlaceholderIsReplayedAsOne: a long answer in edit mode whose
// placeholder could not be edited (its chat.update keeps failing, the later parts are posted) leaves
// later parts that name the placeholder as their first (Mark.First). The placeholder is no answer,
// yet the parts are still one answer: the next question's context has it as one assistant message.
func TestEditAnswerWhoseFirstPartStayedAPlaceholderIsReplayedAsOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chat := &llmtest.Chat{}
		rt := newReplyTest(t, nil, testOptions())
		rt.chat, rt.r.chat = chat, chat
		var ws []string
		for i := range 200 {
			ws = append(ws, fmt.Sprintf("Line %d of a long answer, %s\n", i, strings.Repeat("x", 50)))
		}
		chat.SetSteps(llmtest.Deltas(ws, time.Millisecond))
		var placeholder string
		rt.slack.UpdateErr = func(n int, c gatewaytest.Call) error {
			if placeholder == "" {
				placeholder = c.TS // the first update is the placeholder's
			}
			if c.TS == placeholder {
				return slack.SlackErrorResponse{Err: "cant_update_message"}
			}
			return nil
		}
		_ = rt.r.Reply(t.Context(), rt.req) // the final write reports part 1's failure
		if n := len(rt.slack.BotMessages(testTS)); n < 3 {
			t.Fatalf("%d bot messages, want the placeholder and at least two later parts", n)
		}

		rt.slack.UpdateErr = nil
		var q2 slack.Message
		q2.User, q2.Text, q2.Timestamp, q2.ThreadTimestamp = "U1", "<@UBOT> and then?", "1700000000.900000", testTS
		key := testCh + "/" + testTS
		rt.slack.Threads[key] = append(rt.slack.Threads[key], q2)
		chat.SetSteps(llmtest.Deltas([]string{"ok"}, time.Millisecond))
		req2 := rt.req
		req2.TS, req2.Text = q2.Timestamp, q2.Text
		mustNoErr(t, rt.r.Reply(t.Context(), req2))
		reqs := chat.Calls()
		var assistant int
		for _, m := range reqs[len(reqs)-1].Messages {
			if m.Role == llm.RoleAssistant {
				assistant++
			}
		}
		if assistant != 1 {
			t.Errorf("the answer is replayed as %d assistant messages, want 1", assistant)
		}
	})
}

// TestSkipsFiles: an answer reads no files of the bot's own messages, nor of other bots' unless its
// context takes other bots' messages in (OtherBots).
func TestSkipsFiles(t *testing.T) {
	msg := func(user, botID string) slack.Message {
		var m slack.Message
		m.User, m.BotID = user, botID
		return m
	}
	for _, tc := range []struct {
		name      string
		m         slack.Message
		otherBots bool
		want      bool
	}{
		{"a person's", msg("U1", ""), false, false},
		{"the bot's, by user", msg("UBOT", ""), true, true},
		{"the bot's, by bot id", msg("", "BBOT"), true, true},
		{"another bot's", msg("U9", "B9"), false, true},
		{"another bot's, other bots read", msg("U9", "B9"), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := testOptions()
			opt.OtherBots = tc.otherBots
			r := NewReplies(gatewaytest.NewSlack(), nil, nil, nil, nil, nil, opt)
			a := newAnswer(r, route.ReplyRequest{Channel: testCh}, "", r.log, 0).read
			if got := a.skipsFiles(tc.m); got != tc.want {
				t.Errorf("skipsFiles = %v, want %v", got, tc.want)
			}
		})
	}
}
