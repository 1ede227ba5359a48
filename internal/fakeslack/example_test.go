package fakeslack_test

import (
	"context"
	"fmt"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// A bot built on slack-go talks to the fake as to Slack: point the Web API at URL() and
// Socket Mode follows apps.connections.open to the fake's WebSocket.
func Example() {
	srv := fakeslack.New(fakeslack.Config{
		Subscriptions: []string{"app_mention"},
		Limits:        fakeslack.Limits{Methods: map[string]fakeslack.Limit{"chat.update": {PerMinute: 50, Burst: 3}}},
	})
	defer srv.Close()

	api := slack.New("xoxb-test", slack.OptionAPIURL(srv.URL()), slack.OptionAppLevelToken("xapp-test"))
	sm := socketmode.New(api)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = sm.RunContext(ctx) }()
	defer func() { cancel(); <-done }()

	// A person mentions the bot in a channel.
	ts := srv.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")

	// The bot reads the event, acks it, and answers in the thread.
	for answered := false; !answered; {
		var evt socketmode.Event
		select {
		case evt = <-sm.Events:
		case <-ctx.Done():
			return
		}
		if evt.Type != socketmode.EventTypeEventsAPI {
			continue
		}
		_ = sm.AckCtx(ctx, evt.Request.EnvelopeID, nil)
		mention, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppMentionEvent)
		if !ok {
			continue
		}
		_, _, _ = api.PostMessageContext(ctx, mention.Channel, slack.MsgOptionTS(mention.TimeStamp), slack.MsgOptionText("4", false))
		answered = true
	}

	// The test observes what users saw, waiting without polling.
	_ = srv.WaitFor(ctx, func() bool { return len(srv.BotReplies("C1", ts)) == 1 && srv.Stats().Unacked == 0 })
	fmt.Println(srv.BotReplies("C1", ts)[0].Text)
	fmt.Println(srv.Stats().Acks >= 1, srv.Writes()[0].Kind)
	// Output:
	// 4
	// true post
}
