package bot

import (
	"encoding/json"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// Every sample warmDecoders uses decodes into the type a real envelope of its kind does, so the
// warm-up builds the decoders the first real envelopes need (a sample that failed to parse would
// warm nothing, silently).
func TestWarmSamplesDecode(t *testing.T) {
	mention, err := decodeSample(sampleMention)
	if err != nil {
		t.Fatalf("mention: %v", err)
	}
	if e, ok := mention.(slackevents.EventsAPIEvent); !ok {
		t.Errorf("mention decoded as %T", mention)
	} else if m, ok := e.InnerEvent.Data.(*slackevents.AppMentionEvent); !ok || m.Text != "<@U0> hi" || len(m.Blocks.BlockSet) != 1 {
		t.Errorf("mention inner event %T %+v", e.InnerEvent.Data, e.InnerEvent.Data)
	}
	message, err := decodeSample(sampleMessage)
	if err != nil {
		t.Fatalf("message: %v", err)
	}
	if e, ok := message.(slackevents.EventsAPIEvent); !ok {
		t.Errorf("message decoded as %T", message)
	} else if m, ok := e.InnerEvent.Data.(*slackevents.MessageEvent); !ok || m.ChannelType != "im" || m.Text != "hi" {
		t.Errorf("message inner event %T %+v", e.InnerEvent.Data, e.InnerEvent.Data)
	}
	cmd, err := decodeSample(sampleCommand)
	if c, ok := cmd.(slack.SlashCommand); err != nil || !ok || c.Command != "/imagine" || c.Text != "a cat" {
		t.Errorf("command: %v %+v", err, cmd)
	}
	click, err := decodeSample(sampleClick)
	if c, ok := click.(slack.InteractionCallback); err != nil || !ok || len(c.ActionCallback.BlockActions) != 1 || c.ActionCallback.BlockActions[0].ActionID != "stop" {
		t.Errorf("click: %v %+v", err, click)
	}
	if _, err := decodeSample(`{"envelope_id":"x","type":"hello"}`); err == nil {
		t.Error("an envelope of no known kind decoded without error")
	}
	var msg slack.Message
	if err := json.Unmarshal([]byte(sampleReply), &msg); err != nil || msg.Metadata.EventType != "llmbot_message" || len(msg.Blocks.BlockSet) != 2 {
		t.Errorf("reply: %v %+v", err, msg)
	}
	var user slack.User
	if err := json.Unmarshal([]byte(sampleUser), &user); err != nil || user.Profile.DisplayName != "A" {
		t.Errorf("user: %v %+v", err, user)
	}
	if warmDecoders() <= 0 {
		t.Error("warmDecoders reported no time")
	}
}
