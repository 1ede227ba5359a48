package access_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/llm"
)

// README: "a refused person's thread messages without a mention (follow-ups) are left alone
// silently". When every slot is taken, the bot's busy check runs before the Guard, so a denied
// person's follow-up in a thread the bot takes part in gets "I'm answering too many questions
// right now — try again in a minute" instead of silence (and a denied person's mention is told
// to try again instead of being refused).
func TestWiredDeniedFollowUpSilentWhenBusy(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{})
	defer fs.Close()
	fl := fakellm.New()
	defer fl.Close()
	fl.SetAPIKey("sk-wired-test")
	slow := make(chan struct{})
	fl.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		select {
		case <-slow:
			return fakellm.Reply{Tokens: []string{"Later."}, HeaderDelay: 20 * time.Second}
		default:
			return fakellm.Text("Sure thing.")
		}
	})
	log := zaptest.NewLogger(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*wiredWait)
	defer cancel()

	sc := slack.New("xoxb-test", slack.OptionAPIURL(fs.URL()), slack.OptionAppLevelToken("xapp-test"),
		slack.OptionHTTPClient(&http.Client{Timeout: wiredWait}))
	api := bot.NewSlackAPI(sc)
	id, err := api.Identify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	model, err := llm.New(llm.Config{BaseURL: fl.URL(), APIKey: "sk-wired-test", ChatModel: "gpt-test", ImageModel: "image-test"})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := access.NewPolicy(access.Rules{DenyUsers: access.ParseIDs("U0MALLORY")})
	if err != nil {
		t.Fatal(err)
	}
	guard := access.NewGuard(access.GuardOptions{Policy: policy, Notify: api})
	replies := handlers.NewReplies(api, api, api, api, model, log, handlers.ReplyOptions{
		BotUserID: id.UserID, BotID: id.BotID, BotName: id.Name, TeamID: id.TeamID, FollowUps: true,
	})
	b := bot.New(sc, id, guard.Replier(replies), nil, api, log, bot.Options{ // as cmd/llmbot wires it
		MaxConcurrent: 1, FollowUps: true, KnownFollowUp: replies.KnownFollowUp, Allowed: policy.Allows,
	})
	runDone := make(chan error, 1)
	go func() { runDone <- b.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-runDone:
		case <-time.After(wiredWait):
			t.Error("the bot did not stop")
		}
	}()

	// Alice's thread: answered, so the bot takes part in it.
	thread := fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> hello?")
	waitFor(t, fs, "the answer", func() bool { return len(fs.BotReplies("C1", thread)) == 1 })

	// Alice asks elsewhere; the answer takes the only slot.
	close(slow)
	fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> a long one")
	wctx, wcancel := context.WithTimeout(ctx, wiredWait)
	defer wcancel()
	if err := fl.WaitFor(wctx, func() bool { return fl.Counts().Active == 1 }); err != nil {
		t.Fatalf("second answer not started: %v (%+v)", err, fl.Counts())
	}

	// Mallory, denied, chats in Alice's thread without a mention.
	fs.PostUserMessage("C1", "U0MALLORY", thread, "what about me")
	time.Sleep(time.Second) // the follow-up is routed (and the busy notice, if any, sent) well within this
	for _, e := range ephemeralsTo(fs, "U0MALLORY", "C1") {
		t.Errorf("denied person's follow-up drew a private notice %q; README: follow-ups of refused people are left alone silently", e.Text)
	}
}

// llmbot_access_denied_total ("requests refused by access control") counts every thread
// message of a person not on ALLOW_USERS in any channel the bot is in with FOLLOW_UPS on, even in
// threads the bot never took part in: people talking to each other are counted as refused
// follow-ups, so the metric (and any alert on it) is mostly noise. Only messages the bot would
// have answered (Replies.KnownFollowUp) should count.
func TestWiredDeniedMetricIgnoresOtherPeoplesThreads(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{})
	defer fs.Close()
	fl := fakellm.New()
	defer fl.Close()
	fl.SetAPIKey("sk-wired-test")
	fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Sure thing.") })
	log := zaptest.NewLogger(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*wiredWait)
	defer cancel()

	sc := slack.New("xoxb-test", slack.OptionAPIURL(fs.URL()), slack.OptionAppLevelToken("xapp-test"),
		slack.OptionHTTPClient(&http.Client{Timeout: wiredWait}))
	api := bot.NewSlackAPI(sc)
	id, err := api.Identify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	model, err := llm.New(llm.Config{BaseURL: fl.URL(), APIKey: "sk-wired-test", ChatModel: "gpt-test", ImageModel: "image-test"})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := access.NewPolicy(access.Rules{AllowUsers: access.ParseIDs("U0ALICE")})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var denials [][2]string
	var replies *handlers.Replies
	guard := access.NewGuard(access.GuardOptions{Policy: policy, Notify: api, KnownFollowUp: func(req handlers.ReplyRequest) bool {
		return replies.KnownFollowUp(req) // as cmd/llmbot wires it
	}, Denied: func(feature, reason string) {
		mu.Lock()
		defer mu.Unlock()
		denials = append(denials, [2]string{feature, reason})
	}})
	replies = handlers.NewReplies(api, api, api, api, model, log, handlers.ReplyOptions{
		BotUserID: id.UserID, BotID: id.BotID, BotName: id.Name, TeamID: id.TeamID, FollowUps: true,
	})
	b := bot.New(sc, id, guard.Replier(replies), nil, api, log, bot.Options{FollowUps: true, KnownFollowUp: replies.KnownFollowUp})
	runDone := make(chan error, 1)
	go func() { runDone <- b.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-runDone:
		case <-time.After(wiredWait):
			t.Error("the bot did not stop")
		}
	}()

	// Bob and Carol talk in a thread of their own; the bot is in the channel but not in it.
	top := fs.PostUserMessage("C1", "U0BOB", "", "lunch?")
	fs.PostUserMessage("C1", "U0CAROL", top, "sure")
	fs.PostUserMessage("C1", "U0BOB", top, "12:30 then")
	// Then Alice (allowed) asks the bot: once her answer is there, the thread messages were routed.
	q := fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> hello?")
	waitFor(t, fs, "the answer", func() bool { return len(fs.BotReplies("C1", q)) == 1 })

	mu.Lock()
	defer mu.Unlock()
	if len(denials) != 0 {
		t.Errorf("access denials counted for a conversation that never addressed the bot: %v", denials)
	}
}
