package bot

import (
	"testing"

	"github.com/slack-go/slack/slackevents"
	"go.uber.org/zap"
)

// routingBot is the request reader of a bot made with opt.
func routingBot(opt Options) reader {
	return New(nil, Identity{UserID: "UBOT", BotID: "BBOT"}, nil, nil, zap.NewNop(), opt).reader
}

func TestMessagesAnswered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ev       slackevents.MessageEvent
		opt      Options
		followUp bool
		threadTS string
	}{
		{"DM top level", slackevents.MessageEvent{User: "U1", Channel: "D1", ChannelType: "im", TimeStamp: "2.0"}, Options{}, false, ""},
		{"DM in a thread", slackevents.MessageEvent{User: "U1", Channel: "D1", ChannelType: "im", TimeStamp: "2.0", ThreadTimeStamp: "1.0"}, Options{}, false, "1.0"},
		{"DM file share", slackevents.MessageEvent{User: "U1", Channel: "D1", ChannelType: "im", TimeStamp: "2.0", SubType: "file_share"}, Options{}, false, ""},
		{"other bot, allowed", slackevents.MessageEvent{User: "U9", BotID: "B9", Channel: "D1", ChannelType: "im", TimeStamp: "2.0"}, Options{AnswerBots: true}, false, ""},
		{"follow-up", slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "2.0", ThreadTimeStamp: "1.0"}, Options{FollowUps: true}, true, "1.0"},
		{"follow-up, private channel", slackevents.MessageEvent{User: "U1", Channel: "G1", ChannelType: "group", TimeStamp: "2.0", ThreadTimeStamp: "1.0"}, Options{FollowUps: true}, true, "1.0"},
		{"follow-up, group DM", slackevents.MessageEvent{User: "U1", Channel: "G2", ChannelType: "mpim", TimeStamp: "2.0", ThreadTimeStamp: "1.0"}, Options{FollowUps: true}, true, "1.0"},
		{"follow-up, also sent to the channel", slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "2.0", ThreadTimeStamp: "1.0", SubType: "thread_broadcast"}, Options{FollowUps: true}, true, "1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			req, why := routingBot(tc.opt).fromMessage(&ev, "T1")
			if why != "" {
				t.Fatalf("ignored: %s", why)
			}
			if req.FollowUp != tc.followUp || req.ThreadTS != tc.threadTS || req.TS != ev.TimeStamp || req.Team != "T1" ||
				req.ChannelType != ev.ChannelType || req.User != ev.User || req.Channel != ev.Channel {
				t.Errorf("request %+v: want follow-up %v, thread %q", req, tc.followUp, tc.threadTS)
			}
		})
	}
}

// A request names the person's own team only where the payload does (user_team): the envelope's
// team is the workspace the event came from, which says nothing of who wrote it (the access rules
// let people in without a look-up only on the former).
func TestMessagesNameTheirPersonsTeam(t *testing.T) {
	for _, tc := range []struct {
		name               string
		userTeam           string // the event's user_team
		wantTeam, wantUser string
	}{
		{"user_team given", "T1", "T1", "T1"},
		{"another team's person", "T9", "T9", "T9"},
		{"user_team left out: the envelope's team, the person's unknown", "", "T1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := slackevents.MessageEvent{User: "U1", UserTeam: tc.userTeam, Channel: "D1", ChannelType: "im", TimeStamp: "2.0"}
			req, why := routingBot(Options{}).fromMessage(&ev, "T1")
			if why != "" || req.Team != tc.wantTeam || req.UserTeam != tc.wantUser {
				t.Errorf("request %+v (%s): want team %q, user team %q", req, why, tc.wantTeam, tc.wantUser)
			}
		})
	}
}

func TestMessagesIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   slackevents.MessageEvent
		opt  Options
	}{
		{"own edit echoed", slackevents.MessageEvent{Channel: "D1", ChannelType: "im", TimeStamp: "2.0", SubType: "message_changed"}, Options{}},
		{"own post echoed", slackevents.MessageEvent{User: "UBOT", BotID: "BBOT", Channel: "D1", ChannelType: "im", TimeStamp: "2.0"}, Options{}},
		{"own bot id, other bots allowed", slackevents.MessageEvent{BotID: "BBOT", Channel: "D1", ChannelType: "im", TimeStamp: "2.0"}, Options{AnswerBots: true}},
		{"other bot", slackevents.MessageEvent{User: "U9", BotID: "B9", Channel: "D1", ChannelType: "im", TimeStamp: "2.0"}, Options{}},
		{"bot_message subtype", slackevents.MessageEvent{BotID: "B9", Channel: "D1", ChannelType: "im", TimeStamp: "2.0", SubType: "bot_message"}, Options{AnswerBots: true}},
		{"deleted", slackevents.MessageEvent{Channel: "C1", ChannelType: "channel", TimeStamp: "2.0", SubType: "message_deleted"}, Options{FollowUps: true}},
		{"channel top level", slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "2.0"}, Options{FollowUps: true}},
		{"thread parent", slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "1.0", ThreadTimeStamp: "1.0"}, Options{FollowUps: true}},
		{"follow-ups off", slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "2.0", ThreadTimeStamp: "1.0"}, Options{}},
		{"mention in a thread (app_mention answers it)", slackevents.MessageEvent{User: "U1", Channel: "C1", ChannelType: "channel", TimeStamp: "2.0", ThreadTimeStamp: "1.0", Text: "hey <@UBOT>"}, Options{FollowUps: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			if req, why := routingBot(tc.opt).fromMessage(&ev, "T1"); why == "" {
				t.Errorf("answered: %+v", req)
			}
		})
	}
}

func TestMentionsAnswered(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ev          slackevents.AppMentionEvent
		threadTS    string
		channelType string
	}{
		{"top level in a channel starts a thread", slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "2.0"}, "2.0", "channel"},
		{"in a thread", slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "2.0", ThreadTimeStamp: "1.0"}, "1.0", "channel"},
		{"private channel", slackevents.AppMentionEvent{User: "U1", Channel: "G1", TimeStamp: "2.0"}, "2.0", "group"},
		{"in a DM stays top level", slackevents.AppMentionEvent{User: "U1", Channel: "D1", TimeStamp: "2.0"}, "", "im"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			req, why := routingBot(Options{}).fromMention(&ev, "T1")
			if why != "" {
				t.Fatalf("ignored: %s", why)
			}
			if req.ThreadTS != tc.threadTS || req.ChannelType != tc.channelType || req.FollowUp || req.User != "U1" || req.TS != "2.0" {
				t.Errorf("request %+v: want thread %q, channel type %q", req, tc.threadTS, tc.channelType)
			}
		})
	}
}

func TestMentionsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   slackevents.AppMentionEvent
	}{
		{"edited", slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "2.0", Edited: &slackevents.Edited{User: "U1", TimeStamp: "3.0"}}},
		{"from another bot", slackevents.AppMentionEvent{User: "U9", BotID: "B9", Channel: "C1", TimeStamp: "2.0"}},
		{"own", slackevents.AppMentionEvent{User: "UBOT", Channel: "C1", TimeStamp: "2.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := tc.ev
			if req, why := routingBot(Options{}).fromMention(&ev, "T1"); why == "" {
				t.Errorf("answered: %+v", req)
			}
		})
	}
}

// The event's action_token (Slack's search as the asker) goes into the request: the top-level one,
// else the agent pane's under assistant_thread; none: "".
func TestActionTokenInRequests(t *testing.T) {
	at := &slackevents.AssistantThreadActionToken{ActionToken: "1.2.pane"}
	for _, tc := range []struct {
		name      string
		top       string
		thread    *slackevents.AssistantThreadActionToken
		wantToken string
	}{
		{"top level", "1.2.top", nil, "1.2.top"},
		{"assistant thread", "", at, "1.2.pane"},
		{"both: the top level", "1.2.top", at, "1.2.top"},
		{"none", "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := slackevents.AppMentionEvent{User: "U1", Channel: "C1", TimeStamp: "2.0", ActionToken: tc.top, AssistantThread: tc.thread}
			req, why := routingBot(Options{}).fromMention(&m, "T1")
			if why != "" || req.ActionToken != tc.wantToken {
				t.Errorf("mention: token %q (%s), want %q", req.ActionToken, why, tc.wantToken)
			}
			d := slackevents.MessageEvent{User: "U1", Channel: "D1", ChannelType: "im", TimeStamp: "2.0", ActionToken: tc.top, AssistantThread: tc.thread}
			req, why = routingBot(Options{}).fromMessage(&d, "T1")
			if why != "" || req.ActionToken != tc.wantToken {
				t.Errorf("DM: token %q (%s), want %q", req.ActionToken, why, tc.wantToken)
			}
		})
	}
}
