package handlers

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/route"
)

// dmMsg is a top-level DM message at ts: a person's (mark nil) or the bot's, marked.
func dmMsg(ts, text string, mark *convo.Mark) slack.Message {
	var m slack.Message
	m.User, m.Timestamp, m.Text = "U1", ts, text
	if mark != nil {
		m.User, m.BotID, m.Metadata = "UBOT", "BBOT", mark.Metadata()
	}
	return m
}

// TestDMThreadUnderTheBotsMessage: in a DM the bot answers at the top level, so a person following
// up on one answer uses "Reply in thread" under it. The thread holds only the answer's message: the
// question it answered and the answer's other parts are top-level DM messages, which the context
// must have too. Under a notice it stays the thread alone.
func TestDMThreadUnderTheBotsMessage(t *testing.T) {
	const q = "1700000000.000010" // the question
	answer := func(first string) *convo.Mark { return &convo.Mark{Kind: convo.MarkAnswer, Question: q, First: first} }
	question := dmMsg(q, "which Postgres index type fits a JSONB containment query?", nil)
	for _, tc := range []struct {
		name         string
		history      []slack.Message // the DM's top-level messages, oldest first
		parent       int             // the thread's parent, in history
		historyLimit int             // 0: the default
		want, not    []string        // in the context, and not
	}{
		{"under an answer", []slack.Message{question,
			dmMsg("1700000000.000011", "Use a GIN index: it supports the @> operator.", answer(""))},
			1, 0, []string{"JSONB containment", "GIN index"}, nil},
		{"under an error", []slack.Message{question,
			dmMsg("1700000000.000011", "_The model did not answer in time._", &convo.Mark{Kind: convo.MarkError, Question: q})},
			1, 0, []string{"JSONB containment"}, nil},
		{"under an older answer: the DM went on", append([]slack.Message{question,
			dmMsg("1700000000.000011", "Use a GIN index: it supports the @> operator.", answer(""))}, laterTopics(12)...),
			1, 10, []string{"JSONB containment", "GIN index"}, []string{"later topic"}},
		{"under a long answer's first part", []slack.Message{question,
			dmMsg("1700000000.000011", "GIN: the default for containment.", answer("")),
			dmMsg("1700000000.000012", "BRIN: tiny, for append-only tables.", answer("1700000000.000011"))},
			1, 0, []string{"JSONB containment", "GIN", "BRIN"}, nil},
		{"under a long answer's middle part", []slack.Message{question,
			dmMsg("1700000000.000011", "GIN: the default for containment.", answer("")),
			dmMsg("1700000000.000012", "GiST: for ranges and geometry.", answer("1700000000.000011")),
			dmMsg("1700000000.000013", "BRIN: tiny, for append-only tables.", answer("1700000000.000011"))},
			2, 0, []string{"JSONB containment", "GIN", "GiST", "BRIN"}, nil},
		{"under a slow answer: the second part 4 minutes after the first", []slack.Message{question,
			dmMsg("1700000000.000011", "GIN: the default for containment.", answer("")),
			dmMsg("1700000240.000012", "BRIN: tiny, for append-only tables.", answer("1700000000.000011"))},
			1, 0, []string{"JSONB containment", "GIN", "BRIN"}, nil},
		{"under a long answer's last part: the DM went on", append([]slack.Message{question,
			dmMsg("1700000000.000011", "GIN: the default for containment.", answer("")),
			dmMsg("1700000000.000012", "GiST: for ranges and geometry.", answer("1700000000.000011")),
			dmMsg("1700000000.000013", "BRIN: tiny, for append-only tables.", answer("1700000000.000011"))}, laterTopics(8)...),
			3, 10, []string{"JSONB containment", "GIN", "GiST", "BRIN"}, []string{"later topic"}},
		{"under a long answer's last part: the DM went on past the read", append([]slack.Message{question,
			dmMsg("1700000000.000011", "GIN: the default for containment.", answer("")),
			dmMsg("1700000000.000012", "GiST: for ranges and geometry.", answer("1700000000.000011")),
			dmMsg("1700000000.000013", "BRIN: tiny, for append-only tables.", answer("1700000000.000011"))}, laterTopics(12)...),
			3, 10, []string{"JSONB containment", "GIN", "GiST", "BRIN"}, []string{"later topic"}},
		{"under a notice: the thread alone", []slack.Message{question,
			dmMsg("1700000000.000011", "You already have 2 images in progress.", &convo.Mark{Kind: convo.MarkNotice})},
			1, 0, nil, []string{"JSONB containment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opt := testOptions()
				opt.HistoryLimit = tc.historyLimit
				rt := newReplyTest(t, shortAnswer, opt)
				parent := tc.history[tc.parent]
				parent.ThreadTimestamp = parent.Timestamp
				tc.history[tc.parent] = parent
				reply := dmMsg("1700001000.000900", "and with jsonb_path_ops?", nil)
				reply.ThreadTimestamp = parent.Timestamp
				rt.slack.TopLevel["D1"] = tc.history
				rt.slack.Threads["D1/"+parent.Timestamp] = []slack.Message{parent, reply}
				req := route.ReplyRequest{Channel: "D1", ChannelType: "im", User: "U1", Team: "T1", TS: reply.Timestamp,
					ThreadTS: parent.Timestamp, Text: reply.Text}
				mustNoErr(t, rt.r.Reply(t.Context(), req))
				reqs := rt.chat.Calls()
				if len(reqs) != 1 {
					t.Fatalf("%d model requests, want 1", len(reqs))
				}
				got := contextOf(reqs[0])
				for _, w := range tc.want { // once: the two history reads overlap, and must not repeat a part
					if n := strings.Count(got, w); n != 1 {
						t.Errorf("%q is %d times in the context, want once:\n%s", w, n, got)
					}
				}
				for _, w := range tc.not {
					if strings.Contains(got, w) {
						t.Errorf("%q is in the context:\n%s", w, got)
					}
				}
			})
		})
	}
}

// laterTopics are n top-level DM messages after the answer.
func laterTopics(n int) []slack.Message {
	var ms []slack.Message
	for i := range n {
		ms = append(ms, dmMsg(fmt.Sprintf("1700000000.%06d", 100+i), fmt.Sprintf("later topic %d", i), nil))
	}
	return ms
}
