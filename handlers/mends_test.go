package handlers

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
)

// dmAnswer builds a DM question and a three-part top-level answer to it (ts given for each part).
func dmAnswer(q string, parts ...[2]string) (slack.Message, []slack.Message) {
	var qm slack.Message
	qm.User, qm.Text, qm.Timestamp = "U1", q, "1700000000.000010"
	var out []slack.Message
	for i, p := range parts {
		var a slack.Message
		a.User, a.BotID, a.Timestamp, a.Text = "UBOT", "BBOT", p[0], p[1]
		mark := convo.Mark{Kind: convo.MarkAnswer, Question: qm.Timestamp}
		if i > 0 {
			mark.First = parts[0][0]
		}
		a.Metadata = mark.Metadata()
		out = append(out, a)
	}
	return qm, out
}

// TestDMThreadUnderALongAnswersMiddlePartKeepsTheRest: withAnswerContext takes the answer's later
// parts only when they name the thread's parent as their first (Mark.First == thread_ts). A thread
// opened under a middle part (its parent names the real first part) gets the parts before it from
// the history, but the parts after it are lost.
func TestDMThreadUnderALongAnswersMiddlePartKeepsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		q, as := dmAnswer("compare Postgres index types for JSONB",
			[2]string{"1700000000.000011", "GIN: the default for containment."},
			[2]string{"1700000000.000012", "GiST: for ranges and geometry."},
			[2]string{"1700000000.000013", "BRIN: tiny, for append-only tables."})
		mid := as[1]
		mid.ThreadTimestamp = mid.Timestamp
		var r slack.Message
		r.User, r.Text, r.Timestamp, r.ThreadTimestamp = "U1", "why is GiST slower than the others?", "1700000000.000900", mid.Timestamp
		rt.slack.history["D1"] = []slack.Message{q, as[0], mid, as[2]}
		rt.slack.threads["D1/"+mid.Timestamp] = []slack.Message{mid, r}
		req := ReplyRequest{Channel: "D1", ChannelType: "im", User: "U1", Team: "T1", TS: r.Timestamp,
			ThreadTS: mid.Timestamp, Text: r.Text}
		mustNoErr(t, rt.r.Reply(t.Context(), req))
		reqs := rt.chat.calls()
		if len(reqs) != 1 {
			t.Fatalf("%d model requests, want 1", len(reqs))
		}
		if got := contextOf(reqs[0]); !strings.Contains(got, "BRIN") {
			t.Errorf("the answer's part after the thread's parent is missing from the context:\n%s", got)
		}
	})
}

// TestDMThreadUnderASlowAnswersFirstPartKeepsTheRest: the first part's ts is the placeholder's,
// posted before the model is even asked; a reasoning model that thinks for minutes before writing
// posts the later parts more than dmAnswerSpan (3 minutes) after it. The history read ends 3 minutes
// after the first part, so those parts never reach the context.
func TestDMThreadUnderASlowAnswersFirstPartKeepsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		q, as := dmAnswer("compare Postgres index types for JSONB",
			[2]string{"1700000000.000011", "GIN: the default for containment."},
			[2]string{"1700000240.000012", "BRIN: tiny, for append-only tables."}) // 4 minutes later
		first := as[0]
		first.ThreadTimestamp = first.Timestamp
		var r slack.Message
		r.User, r.Text, r.Timestamp, r.ThreadTimestamp = "U1", "why is the last one so small?", "1700000900.000900", first.Timestamp
		rt.slack.history["D1"] = []slack.Message{q, first, as[1]}
		rt.slack.threads["D1/"+first.Timestamp] = []slack.Message{first, r}
		req := ReplyRequest{Channel: "D1", ChannelType: "im", User: "U1", Team: "T1", TS: r.Timestamp,
			ThreadTS: first.Timestamp, Text: r.Text}
		mustNoErr(t, rt.r.Reply(t.Context(), req))
		reqs := rt.chat.calls()
		if len(reqs) != 1 {
			t.Fatalf("%d model requests, want 1", len(reqs))
		}
		if got := contextOf(reqs[0]); !strings.Contains(got, "BRIN") {
			t.Errorf("the answer's second part (4 minutes after the first) is missing from the context:\n%s", got)
		}
	})
}

// TestDMThreadUnderAnErrorKeepsItsQuestion: before the change every DM thread under one of the
// bot's messages got the DM's history before it; now only a thread under an answer does. A person
// replying "try again, shorter" in a thread under the bot's error message ("The model did not
// answer: ...", Mark kind error, which names the question) now sends the model that line alone:
// the question it failed on is gone.
func TestDMThreadUnderAnErrorKeepsItsQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		var q, e, r slack.Message
		q.User, q.Text, q.Timestamp = "U1", "which Postgres index type fits a JSONB containment query?", "1700000000.000010"
		e.User, e.BotID, e.Text, e.Timestamp = "UBOT", "BBOT", "_The model did not answer in time._", "1700000000.000011"
		e.Metadata = convo.Mark{Kind: convo.MarkError, Question: q.Timestamp}.Metadata()
		e.ThreadTimestamp = e.Timestamp
		r.User, r.Text, r.Timestamp, r.ThreadTimestamp = "U1", "try again, but keep it short", "1700000000.000900", e.Timestamp
		rt.slack.history["D1"] = []slack.Message{q, e}
		rt.slack.threads["D1/"+e.Timestamp] = []slack.Message{e, r}
		req := ReplyRequest{Channel: "D1", ChannelType: "im", User: "U1", Team: "T1", TS: r.Timestamp,
			ThreadTS: e.Timestamp, Text: r.Text}
		mustNoErr(t, rt.r.Reply(t.Context(), req))
		reqs := rt.chat.calls()
		if len(reqs) != 1 {
			t.Fatalf("%d model requests, want 1", len(reqs))
		}
		if got := contextOf(reqs[0]); !strings.Contains(got, "JSONB containment") {
			t.Errorf("the question the error was for is missing from the context:\n%s", got)
		}
	})
}

// TestFollowUpForwardedMessageAnswered: a follow-up that is only a forwarded message (Slack's
// "share", no text of its own; convo reads it as "[shared a message from Bob: ...]") has no words,
// so acknowledgement("") reports it as thanks and the follow-up is dropped without a trace.
func TestFollowUpForwardedMessageAnswered(t *testing.T) {
	if acknowledgement("") {
		t.Error(`acknowledgement("") = true: a follow-up with no text (a forwarded message) counts as thanks`)
	}
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, shortAnswer, testOptions())
		req := rt.req
		req.FollowUp, req.ThreadTS, req.Text = true, "1700000000.000000", ""
		req.Attachments = []slack.Attachment{{IsShare: true, AuthorName: "Bob",
			Text: "deploy failed: ImagePullBackOff on api-7f9c"}}
		rt.r.botThreads.put(testCh+"/"+req.ThreadTS, true)
		if err := rt.r.Reply(t.Context(), req); errors.Is(err, ErrIgnored) {
			t.Errorf("forwarded message as a follow-up: Reply = %v, want an answer", err)
		}
		if !rt.r.KnownFollowUp(req) {
			t.Error("KnownFollowUp of a forwarded message = false, want true")
		}
	})
}

// TestFollowUpQuestionMarkEmojiAnswered: "A question mark ... makes it a message to answer", but only
// the ASCII '?' is looked for: a reply that is just ❓ or :question: (Slack's emoji for "I don't
// follow"), or a fullwidth ？ from a CJK keyboard, has no words and is taken for thanks.
func TestFollowUpQuestionMarkEmojiAnswered(t *testing.T) {
	for _, text := range []string{"❓", ":question:", ":grey_question:", "？", "thanks？"} {
		if acknowledgement(text) {
			t.Errorf("%q: acknowledgement = true, want it answered (it asks)", text)
		}
	}
}
