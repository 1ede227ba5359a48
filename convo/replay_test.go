package convo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/slackmd"
	"github.com/slack-go/slack"
)

// TestBuildStrippingANoteKeepsTheAnswersLastCharacters: an answer that was stopped (or cut off)
// carries its note in italics after a blank line; replaying it strips the note, and must leave
// the answer as it was. stripNote trims "_", "*" and "(" off the answer's own end too, so an answer
// ending in bold or italics is replayed with an unclosed marker.
func TestBuildStrippingANoteKeepsTheAnswersLastCharacters(t *testing.T) {
	tests := []struct {
		name, answer string
	}{
		{"bold at the end", "The setting you want is *burst size*"},
		{"italics at the end", "It is called _token bucket_"},
		{"identifier with underscores", "Set the variable `X` to __init__"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			note := "Stopped by Alice."
			thread := []slack.Message{
				{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000001", Text: "<@U0BOT> what is it called?"}},
				{Msg: slack.Msg{User: "U0BOT", BotID: "B0BOT", Timestamp: "1.000002",
					Text:     tt.answer + NoteSuffix(note, slackmd.FormatMrkdwn),
					Metadata: Mark{Kind: MarkAnswer, Note: note}.Metadata()}},
				{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000003", Text: "<@U0BOT> go on"}},
			}
			r := Build(thread, thread[2], testNames, testOptions())
			if got := r.Messages[2].Content; got != tt.answer {
				t.Errorf("replayed answer = %q, want %q", got, tt.answer)
			}
		})
	}
}

// TestBuildKeepsBlockOnlyBotMessages: monitoring and integration apps (Grafana, Datadog, the email
// integration) often post their content only in Block Kit blocks, with an empty text field. With
// other bots' messages included, such an alert is still dropped as empty, and "@bot why did this
// fire?" is answered without the alert.
func TestBuildKeepsBlockOnlyBotMessages(t *testing.T) {
	opt := testOptions()
	opt.IncludeOtherBots = true
	alert := slack.Message{Msg: slack.Msg{BotID: "B0GRAFANA", Username: "Grafana", Timestamp: "1.000001",
		SubType: slack.MsgSubTypeBotMessage,
		Blocks: slack.Blocks{BlockSet: []slack.Block{
			slack.NewHeaderBlock(slack.NewTextBlockObject(slack.PlainTextType, "[FIRING] HighCPU", false, false)),
			slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, "CPU at *97%* on web-3 for 10m", false, false), nil, nil),
		}}}}
	thread := []slack.Message{
		alert,
		{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000002", ThreadTimestamp: "1.000001", Text: "<@U0BOT> why did this fire?"}},
	}
	r := Build(thread, thread[1], testNames, opt)
	var all []string
	for _, m := range r.Messages {
		all = append(all, string(m.Role)+": "+m.Content)
	}
	if got := strings.Join(all, "\n"); !strings.Contains(got, "web-3") {
		t.Errorf("the block-only alert is missing from the context:\n%s", got)
	}
}

// TestBuildCutTriggerKeepsTheQuestionAfterAPaste: people often paste a long log or file first and
// ask their question at the end. When the trigger alone is over the budget it is cut, keeping only
// its beginning, so the question itself is dropped and the model gets a bare log.
func TestBuildCutTriggerKeepsTheQuestionAfterAPaste(t *testing.T) {
	var log strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&log, "2026-11-21T09:30:%02d worker-%d: retrying job %d after timeout\n", i%60, i%8, i)
	}
	question := "Why does the worker keep timing out, and what should I change?"
	trigger := slack.Message{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000001",
		Text: "<@U0BOT> ```\n" + log.String() + "```\n" + question}}
	r := Build(nil, trigger, testNames, testOptions())
	if !r.TriggerCut {
		t.Fatalf("a %d-byte trigger was not cut with the default budget", len(trigger.Text))
	}
	last := r.Messages[len(r.Messages)-1].Content
	if !strings.Contains(last, question) {
		t.Errorf("the question at the end of the cut trigger is gone; the trigger ends with %q", last[max(0, len(last)-200):])
	}
}

// TestBlocksText: a bot message with only blocks (as conversations.replies returns it) is read
// block by block: headers, sections and fields, context text, rich text with its mentions, links,
// lists, quotes and code; images, dividers and buttons are left out.
func TestBlocksText(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "blocks_only_alert.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m slack.Message
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	opt := testOptions()
	opt.IncludeOtherBots = true
	q := slack.Message{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1700000000.000002", Text: "<@U0BOT> why?"}}
	r := Build([]slack.Message{m, q}, q, testNames, opt)
	want := fenced(`a message by the app "Grafana"`, "[FIRING:1] HighCPU <web-3>\n"+
		"CPU at *97%* for 10m & rising\n"+
		"*Severity:* critical\n"+
		"Team: infra & ops\n"+
		"Runbook: CPU runbook (https://wiki.example/cpu)\n"+
		"On call: @Bob in #C0OPS:fire:\n"+
		"• check `load < 4`\n"+
		"• status page (https://status.example)\n"+
		"> last deploy: 10:02\n"+
		"```\ntop -b -n1\n```")
	if len(r.Messages) != 3 || r.Messages[1].Content != want {
		t.Errorf("got %q\nwant %q", r.Messages[1].Content, want)
	}
}

// TestBuildAnswerIDs: answers whose marks name their question (Mark.Question) and first part
// (Mark.First) are replayed as what they are, wherever they sit in the thread.
func TestBuildAnswerIDs(t *testing.T) {
	q := func(ts, text string) slack.Message { return personSaid("U01ALICE", ts, "<@U0BOT> "+text) }
	a := botAnswered
	for _, tc := range []struct {
		name    string
		thread  []slack.Message
		trigger int // index of the trigger in thread
		want    string
	}{
		{"the answer to an earlier question posted after the trigger", []slack.Message{
			q("1.000001", "Q1"), q("1.000002", "Q2"), a("1.000003", "A1", Mark{Question: "1.000001"}),
		}, 1, "user: Q1|assistant: A1|user: Q2"},
		{"an answer to a later question is left out", []slack.Message{
			q("1.000001", "Q1"), q("1.000002", "Q2"), a("1.000003", "A2", Mark{Question: "1.000002"}),
			a("1.000004", "A1", Mark{Question: "1.000001"}),
		}, 0, "user: Q1"},
		{"a regenerated answer replaces the old one where it was", []slack.Message{
			q("1.000001", "Q1"), a("1.000002", "A1 old", Mark{Question: "1.000001"}),
			q("1.000003", "Q2"), a("1.000004", "A2", Mark{Question: "1.000003"}),
			a("1.000005", "A1 new", Mark{Question: "1.000001"}), q("1.000006", "Q3"),
		}, 5, "user: Q1|assistant: A1 new|user: Q2|assistant: A2|user: Q3"},
		{"regenerating leaves out the answers to the question itself", []slack.Message{
			q("1.000001", "Q1"), a("1.000002", "A1 old", Mark{Question: "1.000001"}),
		}, 0, "user: Q1"},
		{"answers next to each other stay apart", []slack.Message{
			q("1.000001", "Q1"), q("1.000002", "Q2"), a("1.000003", "A1", Mark{Question: "1.000001"}),
			a("1.000004", "A2", Mark{Question: "1.000002"}), q("1.000005", "Q3"),
		}, 4, "user: Q1|user: Q2|assistant: A1|assistant: A2|user: Q3"},
		{"the parts of one answer join, across a question asked between them", []slack.Message{
			q("1.000001", "Q1"), a("1.000002", "A1 part 1", Mark{Question: "1.000001"}), q("1.000003", "Q2"),
			a("1.000004", "A1 part 2", Mark{Question: "1.000001", First: "1.000002"}),
		}, 2, "user: Q1|assistant: A1 part 1\nA1 part 2|user: Q2"},
		{"parts of answers without ids join as before", []slack.Message{
			q("1.000001", "Q1"), a("1.000002", "A1 part 1", Mark{}), a("1.000003", "A1 part 2", Mark{}), q("1.000004", "Q2"),
		}, 3, "user: Q1|assistant: A1 part 1\nA1 part 2|user: Q2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s := rolesOf(Build(tc.thread, tc.thread[tc.trigger], testNames, testOptions())); s != tc.want {
				t.Errorf("got  %q\nwant %q", s, tc.want)
			}
		})
	}
}
