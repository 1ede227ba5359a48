package ops_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/imagine"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/route"
)

const wiredWait = 15 * time.Second // bound of every wait below

// waitUntil polls cond (for values the fakes do not signal, such as metrics) until it holds.
func waitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(wiredWait)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The real bot, wired to Metrics and Readiness the way cmd/llmbot should be, against the fake
// Slack and the fake model service: a scripted conversation, then a dropped Socket Mode
// connection whose reconnect is rate limited.
func TestWiredBot(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{})
	defer fs.Close()
	fl := fakellm.New()
	defer fl.Close()
	fl.SetAPIKey("sk-wired-test")
	fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		r := fakellm.Text("Hello there, friend.")
		r.Usage = &fakellm.Usage{PromptTokens: 42, CompletionTokens: 5, TotalTokens: 47}
		return r
	})
	log := zaptest.NewLogger(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*wiredWait)
	defer cancel()

	m, ready := ops.NewMetrics(), ops.NewReadiness()
	transitions := make(chan bool, 16) // test only: hooks must not block, and the test reads every change in order
	hooks := bot.Hooks{
		Acked: m.Acked, Duplicate: m.Duplicate, Busy: m.Busy, Done: m.Done,
		Connection: func(up bool) {
			m.Connection(up)
			ready.Connection(up)
			transitions <- up
		},
	}
	hs := httptest.NewServer(ops.NewServer("", ready.Ready, m.Registry(), log).Handler())
	defer hs.Close()
	readyz := func() int {
		status, _ := get(t, hs.Client(), hs.URL+"/readyz")
		return status
	}

	sc := slack.New("xoxb-test",
		slack.OptionAPIURL(fs.URL()),
		slack.OptionAppLevelToken("xapp-test"),
		slack.OptionHTTPClient(&http.Client{Transport: m.SlackTransport(nil), Timeout: wiredWait}))
	api := bot.NewSlackAPI(sc, nil, 0)
	id, err := api.Identify(ctx)
	ready.Auth(err)
	if err != nil {
		t.Fatal(err)
	}
	model, err := llm.New(llm.Config{BaseURL: fl.URL(), APIKey: "sk-wired-test", ChatModel: "gpt-test",
		Hooks: llm.Hooks{Retry: m.Retry, TemperatureDropped: m.TemperatureDropped}})
	if err != nil {
		t.Fatal(err)
	}
	replies := handlers.NewReplies(api, api, api, api, m.Chat(model, "gpt-test"), log, handlers.ReplyOptions{
		BotUserID: id.UserID, BotID: id.BotID, BotName: id.Name, TeamID: id.TeamID,
	})
	im := imagine.New(m.Imager(model), api, api, log, imagine.Options{BotName: id.Name})
	routes := route.NewTable(m.Middleware)
	b := bot.New(sc, id, routes, gateway.NewNotices(api, gateway.Budgets{}), log, bot.Options{Hooks: hooks})
	if err := routes.Add(
		route.Route{Kind: route.Message, Name: route.MessageRoute, Handler: replies.Handler()},
		route.Route{Kind: route.Command, Name: "/imagine", Handler: im.Handler()},
	); err != nil {
		t.Fatal(err)
	}

	if got := readyz(); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz before connecting = %d, want 503", got)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- b.Run(ctx) }()
	waitTransition(t, transitions, true)
	if got := readyz(); got != http.StatusOK {
		t.Errorf("/readyz once connected = %d, want 200", got)
	}

	// A conversation: one mention, answered.
	ts := fs.PostUserMessage("C1", "U1", "", "<@UBOT> hi")
	if err := fs.WaitFor(ctx, func() bool {
		r := fs.BotReplies("C1", ts)
		return len(r) == 1 && r[0].Text == "Hello there, friend."
	}); err != nil {
		t.Fatalf("no answer: %v (replies %+v)", err, fs.BotReplies("C1", ts))
	}
	reg := m.Registry()
	waitUntil(t, "the reply to be counted", func() bool {
		return metricValue(t, reg, "llmbot_replies_total", map[string]string{"outcome": "ok"}) == 1
	})
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"llmbot_envelopes_acked_total", map[string]string{"type": "events_api"}, 2}, // app_mention and message.channels
		{"llmbot_reply_duration_seconds", nil, 1},
		{"llmbot_time_to_first_token_seconds", nil, 1},
		{"llmbot_model_requests_total", map[string]string{"op": "chat", "outcome": "ok"}, 1},
		{"llmbot_tokens_total", map[string]string{"model": "gpt-test", "type": "prompt"}, 42},
		{"llmbot_tokens_total", map[string]string{"model": "gpt-test", "type": "completion"}, 5},
		{"llmbot_slack_api_calls_total", map[string]string{"method": "auth.test", "status": "2xx"}, 1},
		{"llmbot_slack_api_calls_total", map[string]string{"method": "apps.connections.open", "status": "2xx"}, 1},
		{"llmbot_slack_api_calls_total", map[string]string{"method": "chat.postMessage", "status": "2xx"}, 1},
		{"llmbot_in_flight", map[string]string{"kind": "reply"}, 0},
		{"llmbot_socket_connected", nil, 1},
	}
	for _, w := range want {
		if got := metricValue(t, reg, w.name, w.labels); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}

	// The connection drops and its reconnect is rate limited: /readyz says so, then recovers.
	fs.RateLimitNext("apps.connections.open", 2*time.Second)
	fs.DropConnections()
	waitTransition(t, transitions, false)
	status, body := get(t, hs.Client(), hs.URL+"/readyz")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "Socket Mode disconnected") {
		t.Errorf("/readyz while reconnecting = %d %q, want 503 and the reason", status, body)
	}
	waitTransition(t, transitions, true)
	if got := readyz(); got != http.StatusOK {
		t.Errorf("/readyz after reconnecting = %d, want 200", got)
	}
	if got := metricValue(t, reg, "llmbot_socket_reconnects_total", nil); got != 1 {
		t.Errorf("reconnects = %v, want 1", got)
	}
	if got := metricValue(t, reg, "llmbot_slack_rate_limited_total", map[string]string{"method": "apps.connections.open"}); got != 1 {
		t.Errorf("apps.connections.open 429s = %v, want 1", got)
	}
	assertNoSecrets(t, m)

	cancel()
	select {
	case err := <-runDone:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(wiredWait):
		t.Fatal("the bot did not stop")
	}
	if got := readyz(); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz after the bot stopped = %d, want 503", got)
	}
}

// waitTransition waits for the next connection change and checks it is want.
func waitTransition(tb testing.TB, transitions <-chan bool, want bool) {
	tb.Helper()
	select {
	case up := <-transitions:
		if up != want {
			tb.Fatalf("connection went up=%v, want up=%v", up, want)
		}
	case <-time.After(wiredWait):
		tb.Fatalf("no connection change to up=%v", want)
	}
}
