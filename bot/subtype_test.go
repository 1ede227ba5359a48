package bot

import (
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// TestMeMessagesAnswered: "/me wonders how to rotate the key" is a person's message (subtype
// me_message) and convo.Build replays it ("/me ..."), but as a DM or a follow-up it is dropped
// as a non-content subtype: the person gets no answer at all.
func TestMeMessagesAnswered(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   slackevents.MessageEvent
		opt  Options
	}{
		{"DM", slackevents.MessageEvent{User: "U1", Channel: "D1", ChannelType: "im", TimeStamp: "2.0", SubType: "me_message", Text: "wonders how to rotate the key"}, Options{}},
		{"follow-up", slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "2.0", ThreadTimeStamp: "1.0", SubType: "me_message", Text: "still gets a 403"}, Options{FollowUps: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			if _, why := routingBot(tc.opt).fromMessage(&ev, "T1"); why != "" {
				t.Errorf("ignored: %s", why)
			}
		})
	}
}

// TestForwardedMessageComesWithTheMention: a mention that shares (forwards) a message carries it as
// an attachment; a new thread is not read, so the request must carry it.
func TestForwardedMessageComesWithTheMention(t *testing.T) {
	shared := []slack.Attachment{{IsShare: true, IsMsgUnfurl: true, AuthorName: "Bob", Text: "deploy of api-7 failed"}}
	ev := slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "2.0", Text: "<@UBOT> why?", Attachments: shared}
	r, why := routingBot(Options{}).fromMention(&ev, "T1")
	if why != "" || len(r.Attachments) != 1 || r.Attachments[0].Text != "deploy of api-7 failed" {
		t.Errorf("request %+v (ignored: %q), want the shared message in it", r, why)
	}
}
