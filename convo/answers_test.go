package convo

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

// TestBuildLaterPartsWithoutTheirFirstStayOneAnswer: a long answer's later parts name their first
// part (Mark.First), and Build "joins exactly those". When the first part is not among the answers
// (its final edit failed and it is still the "Thinking…" placeholder, or it was deleted), every later
// part finds no entry to join and becomes an answer of its own: one answer is replayed as several
// assistant messages in a row (which chat templates that need alternating roles refuse), and a
// Regenerate replaces only the first of them.
func TestBuildLaterPartsWithoutTheirFirstStayOneAnswer(t *testing.T) {
	q := func(ts, text string) slack.Message { return personSaid("U01ALICE", ts, "<@U0BOT> "+text) }
	a := botAnswered
	placeholder := slack.Message{Msg: slack.Msg{User: "U0BOT", BotID: "B0BOT", Timestamp: "1.000002", Text: "_Thinking…_",
		Metadata: Mark{Kind: MarkPlaceholder}.Metadata()}}
	for _, tc := range []struct {
		name   string
		thread []slack.Message
		want   string
	}{
		{"first part left a placeholder", []slack.Message{
			q("1.000001", "Q1"), placeholder,
			a("1.000003", "part 2", Mark{Question: "1.000001", First: "1.000002"}),
			a("1.000004", "part 3", Mark{Question: "1.000001", First: "1.000002"}),
			q("1.000005", "Q2"),
		}, "user: Q1|assistant: part 2\npart 3|user: Q2"},
		{"a part posted again in place of one that refused its final edit", []slack.Message{
			q("1.000001", "Q1"),
			a("1.000002", "part 1", Mark{Question: "1.000001"}),
			a("1.000003", "part 2 as streamed", Mark{Question: "1.000001", First: "1.000002"}),
			a("1.000004", "part 2", Mark{Question: "1.000001", First: "1.000002", Replaces: "1.000003"}),
			q("1.000005", "Q2"),
		}, "user: Q1|assistant: part 1\npart 2|user: Q2"},
		{"first part deleted, then regenerated", []slack.Message{
			q("1.000001", "Q1"),
			a("1.000003", "old part 2", Mark{Question: "1.000001", First: "1.000002"}),
			a("1.000004", "old part 3", Mark{Question: "1.000001", First: "1.000002"}),
			a("1.000005", "new answer", Mark{Question: "1.000001"}),
			q("1.000006", "Q2"),
		}, "user: Q1|assistant: new answer|user: Q2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s := rolesOf(Build(tc.thread, tc.thread[len(tc.thread)-1], testNames, testOptions())); s != tc.want {
				t.Errorf("got  %q\nwant %q", s, tc.want)
			}
		})
	}
}

// TestBlocksTextKeepsDatesAndBroadcasts: a block-only message is read "in Slack's mrkdwn so that
// plain reads it like a message's text", and plain reads <!date^…|fallback> as its fallback and
// <!here> as @here. blocksText drops rich text's date and broadcast elements (slack-go decodes
// them as RichTextSectionDateElement and RichTextSectionBroadcastElement), and ordered lists come
// out as bullets: an alert "@here deploy failed at Nov 14, 2023; 1. roll back 2. page" reaches the
// model as " deploy failed at ; • roll back • page".
func TestBlocksTextKeepsDatesAndBroadcasts(t *testing.T) {
	js := `{"type":"message","subtype":"bot_message","bot_id":"B0CI","username":"CI","ts":"1.000001","text":"","blocks":[
	 {"type":"rich_text","elements":[
	  {"type":"rich_text_section","elements":[{"type":"broadcast","range":"here"},{"type":"text","text":" deploy failed at "},
	   {"type":"date","timestamp":1700000000,"format":"{date_short}","fallback":"Nov 14, 2023"}]},
	  {"type":"rich_text_list","style":"ordered","elements":[
	   {"type":"rich_text_section","elements":[{"type":"text","text":"roll back"}]},
	   {"type":"rich_text_section","elements":[{"type":"text","text":"page on-call"}]}]}
	 ]}]}`
	var m slack.Message
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	b := builder{opt: testOptions(), names: testNames}
	got := b.plain(m)
	for _, want := range []string{"@here deploy failed at Nov 14, 2023", "1. roll back", "2. page on-call"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q missing from the block-only message as read:\n%s", want, got)
		}
	}
}

// TestBuildRegenerateReplacesAnAnswerWrittenBeforeMarkQuestion: every thread open at the upgrade
// holds answers whose marks have no question. Regenerate on one of them posts a new answer that
// names its question, finds no answer with that question to replace, and is appended: the next
// question gets the old and the regenerated answer as two assistant turns in a row (before the
// change they were at least one turn), though "a regenerated answer replaces the old one".
func TestBuildRegenerateReplacesAnAnswerWrittenBeforeMarkQuestion(t *testing.T) {
	q := func(ts, text string) slack.Message { return personSaid("U01ALICE", ts, "<@U0BOT> "+text) }
	a := botAnswered
	thread := []slack.Message{
		q("1.000001", "Q1"), a("1.000002", "old answer", Mark{}),
		a("1.000003", "regenerated answer", Mark{Question: "1.000001"}), q("1.000004", "Q2"),
	}
	if s, want := rolesOf(Build(thread, thread[3], testNames, testOptions())), "user: Q1|assistant: regenerated answer|user: Q2"; s != want {
		t.Errorf("got  %q\nwant %q", s, want)
	}
}

// TestBuildLegacyFollowUpAnswersKept: a thread from before Mark.Question where the bot answered
// follow-ups without a mention. Each answer is taken to answer its own follow-up, not the first
// question that mentioned the bot, so none replaces another: the model sees every answer.
func TestBuildLegacyFollowUpAnswersKept(t *testing.T) {
	thread := []slack.Message{
		personSaid("U01ALICE", "1.000001", "<@U0BOT> what port does Redis use?"),
		botAnswered("1.000002", "Redis listens on 6379.", Mark{}),
		personSaid("U01ALICE", "1.000003", "and Memcached?"),
		botAnswered("1.000004", "Memcached listens on 11211.", Mark{}),
		personSaid("U01ALICE", "1.000005", "and Postgres?"),
		botAnswered("1.000006", "Postgres listens on 5432.", Mark{}),
		personSaid("U01ALICE", "1.000007", "which of them use TLS by default?"),
	}
	got := rolesOf(Build(thread, thread[6], testNames, testOptions()))
	for _, want := range []string{"6379", "11211", "5432"} {
		if !strings.Contains(got, want) {
			t.Errorf("the answer with %s is gone from the context:\n%s", want, strings.ReplaceAll(got, "|", "\n"))
		}
	}
}

// TestBuildRegenerateOfLegacyAnswerAfterASideRemark: an answer whose marks predate Mark.Question
// is taken to answer "the person's message before it". In a thread where someone else wrote
// between the question and the (legacy) answer, that is the side remark, not the question: the
// Regenerate (Mark.Question = the question, from the button's value) replaces nothing, and the
// next question's context has the old and the regenerated answer as two assistant turns in a row,
// which the commit says it fixes.
func TestBuildRegenerateOfLegacyAnswerAfterASideRemark(t *testing.T) {
	thread := []slack.Message{
		personSaid("U01ALICE", "1.000001", "<@U0BOT> how do I rotate the TLS cert?"),
		personSaid("U01BOB", "1.000002", "<@U01CAROL> this bit us last week too"), // not for the bot
		botAnswered("1.000003", "old answer", Mark{}),
		botAnswered("1.000004", "regenerated answer", Mark{Question: "1.000001"}),
		personSaid("U01ALICE", "1.000005", "<@U0BOT> and for the ingress?"),
	}
	got := rolesOf(Build(thread, thread[4], testNames, testOptions()))
	if strings.Contains(got, "old answer") || strings.Contains(got, "assistant|assistant") {
		t.Errorf("the regenerated answer did not replace the old one:\n%s", got)
	}
}

// TestBuildRegenerateKeepsTheOtherLegacyAnswer: two questions asked before the first (legacy)
// answer came; the two legacy answers sit next to each other and are merged into one entry, which
// is taken to answer the second question. A Regenerate of the second answer then replaces the
// merged entry, and the first question's answer disappears from the context (before the commit
// both stayed).
func TestBuildRegenerateKeepsTheOtherLegacyAnswer(t *testing.T) {
	thread := []slack.Message{
		personSaid("U01ALICE", "1.000001", "<@U0BOT> what port does Redis use?"),
		personSaid("U01BOB", "1.000002", "<@U0BOT> and Memcached?"),
		botAnswered("1.000003", "Redis listens on 6379.", Mark{}),
		botAnswered("1.000004", "Memcached listens on 11211.", Mark{}),
		botAnswered("1.000005", "Memcached: 11211 by default.", Mark{Question: "1.000002"}),
		personSaid("U01ALICE", "1.000006", "<@U0BOT> thanks, and which one is TLS by default?"),
	}
	got := rolesOf(Build(thread, thread[5], testNames, testOptions()))
	if !strings.Contains(got, "6379") {
		t.Errorf("the answer to the first question is gone from the context:\n%s", got)
	}
}

// personSaid is a person's message in a thread.
func personSaid(user, ts, text string) slack.Message {
	return slack.Message{Msg: slack.Msg{User: user, Timestamp: ts, Text: text}}
}

// botAnswered is the bot's answer message, marked (Kind set to MarkAnswer).
func botAnswered(ts, text string, mark Mark) slack.Message {
	mark.Kind = MarkAnswer
	return slack.Message{Msg: slack.Msg{User: "U0BOT", BotID: "B0BOT", Timestamp: ts, Text: text, Metadata: mark.Metadata()}}
}

// rolesOf is the built messages after the system prompt, "role: content" joined by "|".
func rolesOf(r Result) string {
	var got []string
	for _, m := range r.Messages[1:] {
		got = append(got, string(m.Role)+": "+m.Content)
	}
	return strings.Join(got, "|")
}
