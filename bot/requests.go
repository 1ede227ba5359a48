package bot

import (
	"cmp"
	"strings"

	"github.com/slack-go/slack/slackevents"

	"github.com/llmbot/llmbot/route"
)

// reader turns Slack's message events into the requests the bot answers, or says why one is
// ignored: the bot's own messages, other bots' (unless it answers them), and, where follow-ups are
// off, thread messages that do not mention it.
type reader struct {
	id                               Identity
	agentView, followUps, answerBots bool // Options.AgentView, FollowUps and AnswerBots
}

// fromMention turns an app_mention into a request, or says why it is ignored.
func (rd reader) fromMention(ev *slackevents.AppMentionEvent, team string) (route.ReplyRequest, string) {
	if ev.Edited != nil {
		return route.ReplyRequest{}, "edited message"
	}
	if why := rd.skipAuthor(ev.User, ev.BotID); why != "" {
		return route.ReplyRequest{}, why
	}
	r := route.ReplyRequest{
		Channel:     ev.Channel,
		ChannelType: route.ChannelType(ev.Channel),
		User:        ev.User,
		Team:        cmp.Or(ev.UserTeam, team),
		UserTeam:    ev.UserTeam,
		TS:          ev.TimeStamp,
		ThreadTS:    ev.ThreadTimeStamp,
		Text:        ev.Text,
		ActionToken: actionToken(ev.ActionToken, ev.AssistantThread),
		Files:       ev.Files,
		Attachments: ev.Attachments,
	}
	if r.ThreadTS == "" && (r.ChannelType != "im" || rd.agentView) {
		r.ThreadTS = ev.TimeStamp // a mention in a channel starts a thread under it, as a message in the agent pane
	}
	return r, ""
}

// fromMessage turns a message event (message.im, or a thread message without a mention in a
// channel, group or group DM) into a request, or says why it is ignored.
func (rd reader) fromMessage(ev *slackevents.MessageEvent, team string) (route.ReplyRequest, string) {
	switch ev.SubType {
	case "", "file_share", "thread_broadcast", "me_message":
	case "message_changed":
		return rd.fromEditedMention(ev, team)
	default:
		return route.ReplyRequest{}, "message subtype " + ev.SubType // includes message_changed from our own edits
	}
	if why := rd.skipAuthor(ev.User, ev.BotID); why != "" {
		return route.ReplyRequest{}, why
	}
	r := route.ReplyRequest{
		Channel:     ev.Channel,
		ChannelType: cmp.Or(ev.ChannelType, route.ChannelType(ev.Channel)),
		User:        ev.User,
		Team:        cmp.Or(ev.UserTeam, team),
		UserTeam:    ev.UserTeam,
		TS:          ev.TimeStamp,
		ThreadTS:    ev.ThreadTimeStamp,
		Text:        ev.Text,
		ActionToken: actionToken(ev.ActionToken, ev.AssistantThread),
	}
	if ev.Message != nil {
		r.Files, r.Attachments = ev.Message.Files, ev.Message.Attachments
	}
	if r.ChannelType == "im" {
		if r.ThreadTS == "" && rd.agentView {
			r.ThreadTS = r.TS // in the agent pane each message is its own thread root
		}
		return r, ""
	}
	switch {
	case r.ThreadTS == "" || r.ThreadTS == r.TS:
		return route.ReplyRequest{}, "top-level message without a mention"
	case rd.id.UserID != "" && strings.Contains(r.Text, "<@"+rd.id.UserID+">"):
		return route.ReplyRequest{}, "mentions the bot (answered from app_mention)"
	case !rd.followUps:
		return route.ReplyRequest{}, "follow-ups are off"
	}
	r.FollowUp = true
	return r, ""
}

// fromEditedMention turns an edit that adds the bot's mention to a message (a person who forgot to
// mention it at first) into a request, as its app_mention would have been; any other edit is
// ignored. Slack also sends an app_mention for the edit, but that does not say whether the mention
// is new, so it is ignored (fromMention), and this needs the message events (message.channels,
// .groups, .mpim) the follow-ups need. A message the bot answered already is not answered again:
// handlers.Replies looks for an answer to it in its thread (ReplyRequest.Edited).
func (rd reader) fromEditedMention(ev *slackevents.MessageEvent, team string) (route.ReplyRequest, string) {
	nm, pm := ev.Message, ev.PreviousMessage
	mention := "<@" + rd.id.UserID + ">"
	switch {
	case nm == nil || rd.id.UserID == "":
		return route.ReplyRequest{}, "message subtype message_changed"
	case cmp.Or(ev.ChannelType, route.ChannelType(ev.Channel)) == "im":
		return route.ReplyRequest{}, "edited message" // in a DM every message was answered as it came
	case !strings.Contains(nm.Text, mention) || pm != nil && strings.Contains(pm.Text, mention):
		return route.ReplyRequest{}, "edited message" // includes our own edits
	}
	// Answered as its app_mention would have been, had the mention been there from the start.
	r, why := rd.fromMention(&slackevents.AppMentionEvent{Channel: ev.Channel, User: nm.User, BotID: nm.BotID,
		UserTeam: nm.Team, TimeStamp: nm.Timestamp, ThreadTimeStamp: nm.ThreadTimestamp, Text: nm.Text,
		Files: nm.Files, Attachments: nm.Attachments}, team)
	r.Edited = why == ""
	r.ActionToken = actionToken(ev.ActionToken, ev.AssistantThread) // if Slack sends one with the edit
	return r, why
}

// actionToken is an event's action_token (Slack's search as the asker: search.Tool): the top-level
// one, else the one Slack puts under assistant_thread in the agent pane. "" when the event has none.
func actionToken(top string, at *slackevents.AssistantThreadActionToken) string {
	if top == "" && at != nil {
		return at.ActionToken
	}
	return top
}

// skipAuthor says why a message by user/botID is not answered, or "".
func (rd reader) skipAuthor(user, botID string) string {
	switch {
	case user != "" && user == rd.id.UserID:
		return "own message"
	case botID != "" && botID == rd.id.BotID:
		return "own bot"
	case botID != "" && !rd.answerBots:
		return "another bot"
	case user == "" && botID == "":
		return "no author"
	}
	return ""
}
