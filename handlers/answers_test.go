package handlers

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/llm"
)

// TestDMThreadUnderAnOlderAnswerKeepsItsQuestion: the question before a DM thread's parent is read
// with conversations.history's latest HistoryLimit messages and kept only when older than the parent.
// A person following up in a thread under an answer from earlier in the DM (the usual reason to use a
// thread there: the conversation has moved on) gets none of it once HistoryLimit messages were written
// after that answer, so the model again sees its answer out of the blue. (The read should end at the
// parent: conversations.history's latest=thread_ts.)
func TestDMThreadUnderAnOlderAnswerKeepsItsQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := testOptions()
		opt.HistoryLimit = 10
		rt := newReplyTest(t, shortAnswer, opt)
		var q, a, r slack.Message
		q.User, q.Text, q.Timestamp = "U1", "which Postgres index type fits a JSONB containment query?", "1700000000.000010"
		a.User, a.BotID, a.Text, a.Timestamp = "UBOT", "BBOT", "Use a GIN index: it supports the @> operator.", "1700000000.000011"
		a.Metadata = convo.Mark{Kind: convo.MarkAnswer, Question: q.Timestamp}.Metadata()
		a.ThreadTimestamp = a.Timestamp
		hist := []slack.Message{q, a}
		for i := range 12 { // the DM went on at the top level
			var m slack.Message
			m.User, m.Text, m.Timestamp = "U1", fmt.Sprintf("later topic %d", i), fmt.Sprintf("1700000000.%06d", 100+i)
			hist = append(hist, m)
		}
		r.User, r.Text, r.Timestamp, r.ThreadTimestamp = "U1", "and with jsonb_path_ops?", "1700000000.000900", a.Timestamp
		rt.slack.history["D1"] = hist
		rt.slack.threads["D1/"+a.Timestamp] = []slack.Message{a, r}
		req := ReplyRequest{Channel: "D1", ChannelType: "im", User: "U1", Team: "T1", TS: r.Timestamp,
			ThreadTS: a.Timestamp, Text: r.Text}
		mustNoErr(t, rt.r.Reply(t.Context(), req))
		reqs := rt.chat.calls()
		if len(reqs) != 1 {
			t.Fatalf("%d model requests, want 1", len(reqs))
		}
		if got := contextOf(reqs[0]); !strings.Contains(got, "JSONB containment") {
			t.Errorf("the question the answer was for is missing from the context:\n%s", got)
		}
	})
}

// TestDMThreadUnderALongAnswersFirstPartKeepsTheRest: in a DM a long answer goes on in further
// top-level messages (Mark.First names the first). Someone replying in a thread under the answer
// naturally opens it on its first message; the history prepended to the thread stops before that
// message, and the thread holds only it, so the answer's later parts are not in the context: the
// model is asked about an answer it sees only the beginning of.
func TestDMThreadUnderALongAnswersFirstPartKeepsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		var q, a1, a2, r slack.Message
		q.User, q.Text, q.Timestamp = "U1", "compare Postgres index types for JSONB", "1700000000.000010"
		a1.User, a1.BotID, a1.Text, a1.Timestamp = "UBOT", "BBOT", "GIN: the default for containment.", "1700000000.000011"
		a1.Metadata = convo.Mark{Kind: convo.MarkAnswer, Question: q.Timestamp}.Metadata()
		a1.ThreadTimestamp = a1.Timestamp
		a2.User, a2.BotID, a2.Text, a2.Timestamp = "UBOT", "BBOT", "BRIN: tiny, for append-only tables.", "1700000000.000012"
		a2.Metadata = convo.Mark{Kind: convo.MarkAnswer, Question: q.Timestamp, First: a1.Timestamp}.Metadata()
		r.User, r.Text, r.Timestamp, r.ThreadTimestamp = "U1", "why is the last one so small?", "1700000000.000900", a1.Timestamp
		rt.slack.history["D1"] = []slack.Message{q, a1, a2}
		rt.slack.threads["D1/"+a1.Timestamp] = []slack.Message{a1, r}
		req := ReplyRequest{Channel: "D1", ChannelType: "im", User: "U1", Team: "T1", TS: r.Timestamp,
			ThreadTS: a1.Timestamp, Text: r.Text}
		mustNoErr(t, rt.r.Reply(t.Context(), req))
		reqs := rt.chat.calls()
		if len(reqs) != 1 {
			t.Fatalf("%d model requests, want 1", len(reqs))
		}
		if got := contextOf(reqs[0]); !strings.Contains(got, "BRIN") {
			t.Errorf("the answer's second part is missing from the context:\n%s", got)
		}
	})
}

// TestEditAnswerWhoseFirstPartStayedAPlaceholderIsReplayedAsOne: a long answer in edit mode whose
// placeholder could not be edited (its chat.update keeps failing, the later parts are posted) leaves
// later parts that name the placeholder as their first (Mark.First). The placeholder is no answer, so
// convo.Build finds no first part to join them to and replays each part as a separate assistant
// turn: the next question's context has the answer as four assistant messages in a row.
func TestEditAnswerWhoseFirstPartStayedAPlaceholderIsReplayedAsOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chat := &fakeChat{}
		rt := newReplyTest(t, nil, testOptions())
		rt.chat, rt.r.chat = chat, chat
		var ws []string
		for i := range 200 {
			ws = append(ws, fmt.Sprintf("Line %d of a long answer, %s\n", i, strings.Repeat("x", 50)))
		}
		chat.steps = deltas(ws, time.Millisecond)
		var placeholder string
		rt.slack.updateErr = func(n int, c call) error {
			if placeholder == "" {
				placeholder = c.ts // the first update is the placeholder's
			}
			if c.ts == placeholder {
				return slack.SlackErrorResponse{Err: "cant_update_message"}
			}
			return nil
		}
		_ = rt.r.Reply(t.Context(), rt.req) // the final write reports part 1's failure
		if n := len(rt.slack.botMessages(testTS)); n < 3 {
			t.Fatalf("%d bot messages, want the placeholder and at least two later parts", n)
		}

		rt.slack.updateErr = nil
		var q2 slack.Message
		q2.User, q2.Text, q2.Timestamp, q2.ThreadTimestamp = "U1", "<@UBOT> and then?", "1700000000.900000", testTS
		key := testCh + "/" + testTS
		rt.slack.threads[key] = append(rt.slack.threads[key], q2)
		chat.mu.Lock()
		chat.steps = deltas([]string{"ok"}, time.Millisecond)
		chat.mu.Unlock()
		req2 := rt.req
		req2.TS, req2.Text = q2.Timestamp, q2.Text
		mustNoErr(t, rt.r.Reply(t.Context(), req2))
		reqs := chat.calls()
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
