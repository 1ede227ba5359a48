package convo

import (
	"encoding/json"
	"testing"

	"github.com/llmbot/llmbot/slackmd"
	"github.com/slack-go/slack"
)

func TestMarkRoundTrip(t *testing.T) {
	tests := []Mark{
		{Kind: MarkAnswer},
		{Kind: MarkAnswer, Note: "stopped"},
		{Kind: MarkPlaceholder},
		{Kind: MarkNotice},
		{Kind: MarkError, Note: "model unavailable"},
		{Kind: MarkAnswer, Question: "1700000000.000100"},
		{Kind: MarkAnswer, Note: "stopped", Question: "1700000000.000100", First: "1700000000.000200"},
		{Kind: MarkAnswer, Question: "1700000000.000100", First: "1700000000.000200", Replaces: "1700000000.000300"},
		{Kind: MarkAnswer, Question: "1700000000.000100", Done: true},
		{Kind: MarkError, Note: "model unavailable", Done: true},
	}
	for _, m := range tests {
		// Through JSON, as chat.postMessage sends it and conversations.replies returns it.
		data, err := json.Marshal(slack.Msg{Text: "x", Metadata: m.Metadata()})
		if err != nil {
			t.Fatal(err)
		}
		var msg slack.Message
		if err := json.Unmarshal(data, &msg); err != nil {
			t.Fatal(err)
		}
		got, ok := ReadMark(msg)
		if !ok || got != m {
			t.Errorf("ReadMark(Metadata(%+v)) = %+v, %t; JSON %s", m, got, ok, data)
		}
	}
}

func TestMarkMetadataShape(t *testing.T) {
	data, err := json.Marshal(Mark{Kind: MarkAnswer, Note: "cut off"}.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), `{"event_type":"llmbot_message","event_payload":{"kind":"answer","note":"cut off"}}`; got != want {
		t.Errorf("metadata JSON = %s, want %s", got, want)
	}
	data, _ = json.Marshal(Mark{Kind: MarkAnswer, Question: "1700000000.000100", Done: true}.Metadata())
	if got, want := string(data), `{"event_type":"llmbot_message","event_payload":{"done":true,"kind":"answer","q":"1700000000.000100"}}`; got != want {
		t.Errorf("metadata JSON = %s, want %s", got, want)
	}
	data, _ = json.Marshal(Mark{Kind: MarkPlaceholder}.Metadata())
	if got, want := string(data), `{"event_type":"llmbot_message","event_payload":{"kind":"placeholder"}}`; got != want {
		t.Errorf("metadata JSON = %s, want %s", got, want)
	}
}

func TestReadMarkRejects(t *testing.T) {
	tests := []struct {
		name string
		json string
	}{
		{"no metadata", `{"type":"message","text":"hi"}`},
		{"other app's event type", `{"metadata":{"event_type":"task_created","event_payload":{"kind":"answer"}}}`},
		{"no payload", `{"metadata":{"event_type":"llmbot_message"}}`},
		{"kind missing", `{"metadata":{"event_type":"llmbot_message","event_payload":{"note":"x"}}}`},
		{"kind not a string", `{"metadata":{"event_type":"llmbot_message","event_payload":{"kind":3}}}`},
	}
	for _, tt := range tests {
		var msg slack.Message
		if err := json.Unmarshal([]byte(tt.json), &msg); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if m, ok := ReadMark(msg); ok {
			t.Errorf("%s: ReadMark = %+v, true; want false", tt.name, m)
		}
	}
}

func TestNoteSuffixIsStrippedFromReplayedAnswers(t *testing.T) {
	tests := []struct {
		note string
		f    slackmd.Format
	}{
		{"stopped", slackmd.FormatMrkdwn},
		{"cut off: the answer was too long", slackmd.FormatMarkdown},
		{"interrupted <restart> & retry", slackmd.FormatMrkdwn},
		{"the service said: bad\x02 request\u0085", slackmd.FormatMrkdwn},
	}
	for _, tt := range tests {
		answer := slackmd.Render("The answer is **42**.", tt.f) + NoteSuffix(tt.note, tt.f)
		if stripped := slackmd.StripControls(answer); answer != stripped {
			t.Errorf("note %q: the message text keeps control characters: %q", tt.note, answer)
		}
		thread := []slack.Message{
			{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000001", Text: "<@U0BOT> question"}},
			{Msg: slack.Msg{User: "U0BOT", BotID: "B0BOT", Timestamp: "1.000002", Text: answer,
				Metadata: Mark{Kind: MarkAnswer, Note: tt.note}.Metadata()}},
			{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000003", Text: "<@U0BOT> why?"}},
		}
		r := Build(thread, thread[2], testNames, testOptions())
		got := r.Messages[2].Content
		if got != "The answer is *42*." && got != "The answer is **42**." {
			t.Errorf("note %q (format %d): replayed answer = %q, want the answer without the note", tt.note, tt.f, got)
		}
	}
}

// A note may carry a provider's error message: what Slack shows of it mentions no one, in either
// format, character references included.
func TestNoteSuffixNeutralisesMentions(t *testing.T) {
	const wj = "\u2060"
	for _, tt := range []struct {
		note string
		f    slackmd.Format
		want string
	}{
		{"the service said <!here>", slackmd.FormatMrkdwn, "\n\n_the service said &lt;" + wj + "!here&gt;_"},
		{"the service said <!here>", slackmd.FormatMarkdown, "\n\n_the service said <" + wj + "!here>_"},
		{"&#0060;!channel> failed", slackmd.FormatMarkdown, "\n\n_&#0060;" + wj + "!channel> failed_"},
		{"&#64;everyone, it failed", slackmd.FormatMrkdwn, "\n\n_&amp;#64;" + wj + "everyone, it failed_"},
		{"&#64;everyone, it failed", slackmd.FormatMarkdown, "\n\n_&#64;" + wj + "everyone, it failed_"},
		{"@here please retry", slackmd.FormatMarkdown, "\n\n_@" + wj + "here please retry_"},
	} {
		if got := NoteSuffix(tt.note, tt.f); got != tt.want {
			t.Errorf("NoteSuffix(%q, %d) = %q, want %q", tt.note, tt.f, got, tt.want)
		}
	}
}
