package schedule

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

// Poster posts a message in a channel (the gateway's Messenger.Post).
type Poster interface {
	Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (ts string, err error)
}

// Submitter hands a request to the bot's loop, which dispatches it as if Slack had sent it
// (bot.Bot.Submit).
type Submitter interface {
	Submit(ctx context.Context, req *route.Request) error
}

// SlackAsker runs an occurrence in Slack: it posts a new message in the schedule's channel that says
// whose scheduled prompt this is, and asks the prompt there as a mention of the bot by its creator would,
// in that message's thread: the answer's path (the creator's access and budgets, streaming, tools whose
// approvals go to the creator) is a mention's.
type SlackAsker struct {
	post   Poster
	submit Submitter
}

// NewAsker returns a SlackAsker posting through post and asking through submit.
func NewAsker(post Poster, submit Submitter) *SlackAsker {
	return &SlackAsker{post: post, submit: submit}
}

// Ask posts sc's occurrence at and asks its prompt. A summary's prompt ("summarize 7d") is handed
// to the route EventSummary instead, as its creator's request, which posts the summary.
func (a *SlackAsker) Ask(ctx context.Context, sc Schedule, at time.Time) error {
	if _, ok, _ := SummaryPeriod(sc.Prompt); ok {
		req := &route.Request{Kind: route.Event, Name: EventSummary, Channel: sc.Channel, User: sc.Creator, Team: sc.Team, Text: sc.ID}
		if err := a.submit.Submit(ctx, req); err != nil {
			return fmt.Errorf("ask %s: %w", sc.ID, err)
		}
		return nil
	}
	ts, err := a.post.Post(ctx, sc.Channel, "", gateway.Msg{Text: Header(sc), Mark: convo.Mark{Kind: convo.MarkNotice}})
	if err != nil {
		return fmt.Errorf("post %s: %w", sc.Channel, err)
	}
	req := &route.Request{Kind: route.Message, Name: route.MessageRoute, Channel: sc.Channel, User: sc.Creator, Team: sc.Team,
		Reply: &route.ReplyRequest{Channel: sc.Channel, ChannelType: route.ChannelType(sc.Channel), User: sc.Creator,
			Team: sc.Team, TS: ts, ThreadTS: ts, Text: sc.Prompt}}
	req.Feature = req.Reply.Feature() // a mention, for the access rules and the metrics
	if err := a.submit.Submit(ctx, req); err != nil {
		return fmt.Errorf("ask %s: %w", sc.ID, err)
	}
	return nil
}

// Header is the message an occurrence of sc starts with: whose prompt, which schedule, and the prompt.
func Header(sc Schedule) string {
	lines := strings.Split(slackmd.EscapeMrkdwn(slackmd.Neutralise(sc.Prompt)), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return fmt.Sprintf("Scheduled prompt `%s` of <@%s> (%s):\n%s", sc.ID, sc.Creator, sc.When, strings.Join(lines, "\n"))
}
