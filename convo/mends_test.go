package convo

import (
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

// TestBuildRegenerateOfLegacyAnswerAfterASideRemark: an answer whose marks predate Mark.Question
// is taken to answer "the person's message before it". In a thread where someone else wrote
// between the question and the (legacy) answer, that is the side remark, not the question: the
// Regenerate (Mark.Question = the question, from the button's value) replaces nothing, and the
// next question's context has the old and the regenerated answer as two assistant turns in a row,
// which the commit says it fixes.
func TestBuildRegenerateOfLegacyAnswerAfterASideRemark(t *testing.T) {
	thread := []slack.Message{
		rvQ("U01ALICE", "1.000001", "<@U0BOT> how do I rotate the TLS cert?"),
		rvQ("U01BOB", "1.000002", "<@U01CAROL> this bit us last week too"), // not for the bot
		rvA("1.000003", "old answer", Mark{}),
		rvA("1.000004", "regenerated answer", Mark{Question: "1.000001"}),
		rvQ("U01ALICE", "1.000005", "<@U0BOT> and for the ingress?"),
	}
	got := rvRoles(Build(thread, thread[4], testNames, testOptions()))
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
		rvQ("U01ALICE", "1.000001", "<@U0BOT> what port does Redis use?"),
		rvQ("U01BOB", "1.000002", "<@U0BOT> and Memcached?"),
		rvA("1.000003", "Redis listens on 6379.", Mark{}),
		rvA("1.000004", "Memcached listens on 11211.", Mark{}),
		rvA("1.000005", "Memcached: 11211 by default.", Mark{Question: "1.000002"}),
		rvQ("U01ALICE", "1.000006", "<@U0BOT> thanks, and which one is TLS by default?"),
	}
	got := rvRoles(Build(thread, thread[5], testNames, testOptions()))
	if !strings.Contains(got, "6379") {
		t.Errorf("the answer to the first question is gone from the context:\n%s", got)
	}
}

func rvQ(user, ts, text string) slack.Message {
	return slack.Message{Msg: slack.Msg{User: user, Timestamp: ts, Text: text}}
}

func rvA(ts, text string, mark Mark) slack.Message {
	mark.Kind = MarkAnswer
	return slack.Message{Msg: slack.Msg{User: "U0BOT", BotID: "B0BOT", Timestamp: ts, Text: text, Metadata: mark.Metadata()}}
}

func rvRoles(r Result) string {
	var got []string
	for _, m := range r.Messages[1:] {
		got = append(got, string(m.Role)+": "+m.Content)
	}
	return strings.Join(got, "|")
}
