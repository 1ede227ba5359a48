package bot

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
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

// TestEditAddingTheMentionAnswered: a person who forgot to mention the bot edits the message to add
// it. Slack's app_mention for the edit does not say whether the mention is new, so the message
// event's edit (message_changed, with the previous text) decides: answered as a mention once, when
// the mention is new; any other edit is not.
func TestEditAddingTheMentionAnswered(t *testing.T) {
	edit := func(prev, text, thread string, user string) slackevents.MessageEvent {
		return slackevents.MessageEvent{Channel: "C1", ChannelType: "channel", SubType: "message_changed", TimeStamp: "9.0",
			Message:         &slack.Msg{User: user, Text: text, Timestamp: "5.0", ThreadTimestamp: thread},
			PreviousMessage: &slack.Msg{User: user, Text: prev, Timestamp: "5.0", ThreadTimestamp: thread}}
	}
	for _, tc := range []struct {
		name     string
		ev       slackevents.MessageEvent
		answered bool
		threadTS string // of the request when answered
	}{
		{"mention added, top level", edit("how do I rotate keys?", "<@UBOT> how do I rotate keys?", "", "U1"), true, "5.0"},
		{"mention added, in a thread", edit("and for TLS?", "<@UBOT> and for TLS?", "1.0", "U1"), true, "1.0"},
		{"mention already there (a typo fixed)", edit("<@UBOT> how do I rotat keys?", "<@UBOT> how do I rotate keys?", "", "U1"), false, ""},
		{"no mention", edit("how do I rotat keys?", "how do I rotate keys?", "1.0", "U1"), false, ""},
		{"the bot's own edit", edit("_Thinking…_", "Ask <@UBOT> again", "1.0", "UBOT"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			r, why := routingBot(Options{FollowUps: true}).fromMessage(&ev, "T1")
			if answered := why == ""; answered != tc.answered {
				t.Errorf("request %+v (ignored: %q), want answered: %t", r, why, tc.answered)
			}
			if why == "" && (r.TS != "5.0" || r.ThreadTS != tc.threadTS || r.FollowUp || r.User != "U1") {
				t.Errorf("request %+v, want the edited message answered as a mention in thread %s", r, tc.threadTS)
			}
		})
	}
}

// TestEditAddingTheMentionDecoded: Slack's message_changed event, as slackevents decodes it, carries
// the new and the previous text where fromEditedMention reads them.
func TestEditAddingTheMentionDecoded(t *testing.T) {
	raw := `{"type":"event_callback","team_id":"T1","event_id":"Ev1","event_time":1,"event":{"type":"message",
		"subtype":"message_changed","hidden":true,"channel":"C1","channel_type":"channel","ts":"9.000001","event_ts":"9.000001",
		"message":{"type":"message","user":"U1","text":"<@UBOT> how do I rotate keys?","ts":"5.000001","edited":{"user":"U1","ts":"9.000001"}},
		"previous_message":{"type":"message","user":"U1","text":"how do I rotate keys?","ts":"5.000001"}}}`
	e, err := slackevents.ParseEvent(json.RawMessage(raw), slackevents.OptionNoVerifyToken())
	if err != nil {
		t.Fatal(err)
	}
	ev, ok := e.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok {
		t.Fatalf("inner event %T, want *slackevents.MessageEvent", e.InnerEvent.Data)
	}
	r, why := routingBot(Options{}).fromMessage(ev, e.TeamID)
	if why != "" || r.TS != "5.000001" || r.ThreadTS != "5.000001" || r.Text != "<@UBOT> how do I rotate keys?" {
		t.Errorf("request %+v (ignored: %q), want the edited message as a mention", r, why)
	}
}

// TestEditAddingTheMentionToAThreadReplyAnswered: the case the edit is for. A person replies in a
// thread the bot is not part of and forgets to mention it, then edits the reply to add the
// mention. With follow-ups on, the reply itself went to the replier as a follow-up (which the
// handler declines: the bot is not in the thread), and that must not stop the edit from being
// answered as the mention it now is.
func TestEditAddingTheMentionToAThreadReplyAnswered(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	done := make(chan route.ReplyRequest, 10) // more than the replies expected
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error { done <- req; return nil }}
	h := startBot(t, fs, r, nil, Options{FollowUps: true})

	parent := fs.PostUserMessage("C1", "U1", "", "deploy to staging failed again")
	reply := fs.PostUserMessage("C1", "U2", parent, "any idea why the migration step times out?")
	if req := waitChan(t, "the reply, as a follow-up", done); !req.FollowUp || req.TS != reply {
		t.Fatalf("request %+v, want the thread reply as a follow-up", req)
	}
	fs.EditUserMessage("C1", reply, "<@UBOT> any idea why the migration step times out?")
	edits := func() []route.ReplyRequest {
		var edit []route.ReplyRequest
		for _, req := range r.requests() {
			if req.TS == reply && !req.FollowUp {
				edit = append(edit, req)
			}
		}
		return edit
	}
	h.waitFor(t, "the edit answered", func() bool { return len(edits()) >= 1 })
	// A marker in another place, answered after everything before it: a second answer to the edit
	// would have come by then. (Answers in different places may start in any order.)
	fs.PostUserMessage("D1", "U1", "", "marker")
	for req := waitChan(t, "a reply", done); req.Text != "marker"; req = waitChan(t, "a reply", done) {
	}
	if edit := edits(); len(edit) != 1 || edit[0].ThreadTS != parent {
		t.Errorf("requests %+v: want the edited reply once, as a mention in thread %s", r.requests(), parent)
	}
}

// TestEditAddingTheMentionInADMIgnored: in a DM every message is answered when it is posted, so an
// edit that adds the bot's mention to one asks nothing new: answering it gives the message a second
// answer (once the message's dedupe entry is gone: an edit of yesterday's message).
func TestEditAddingTheMentionInADMIgnored(t *testing.T) {
	for _, ev := range []slackevents.MessageEvent{
		{Channel: "D1", ChannelType: "im", SubType: "message_changed", TimeStamp: "9.0",
			Message:         &slack.Msg{User: "U1", Text: "<@UBOT> how do I rotate keys?", Timestamp: "5.0"},
			PreviousMessage: &slack.Msg{User: "U1", Text: "how do I rotate keys?", Timestamp: "5.0"}},
		{Channel: "D1", SubType: "message_changed", TimeStamp: "9.0", // no channel_type: from the id
			Message:         &slack.Msg{User: "U1", Text: "thanks <@UBOT>", Timestamp: "5.0", ThreadTimestamp: "4.0"},
			PreviousMessage: &slack.Msg{User: "U1", Text: "thanks", Timestamp: "5.0", ThreadTimestamp: "4.0"}},
	} {
		if r, why := routingBot(Options{FollowUps: true}).fromMessage(&ev, "T1"); why == "" {
			t.Errorf("answered %+v: the DM message was answered when it was posted", r)
		}
	}
}
