package fakeslack_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

func TestPingsKeepTheConnection(t *testing.T) {
	srv := newServer(t, fakeslack.Config{PingInterval: 20 * time.Millisecond})
	sm := socketmode.New(newAPI(srv), socketmode.OptionPingInterval(400*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = sm.RunContext(ctx) }()
	defer func() { cancel(); <-done }()
	go func() { // drain
		for {
			select {
			case <-sm.Events:
			case <-done:
				return
			}
		}
	}()
	// Several watchdog periods pass: without pings slack-go would have reconnected.
	if err := srv.WaitFor(ctxFor(t), func() bool { return srv.Connections().Pongs >= 50 }); err != nil {
		t.Fatalf("pongs: %+v", srv.Connections())
	}
	if got := srv.Connections().Total; got != 1 {
		t.Errorf("connections = %d, want 1 (pings answered, no watchdog reconnect)", got)
	}
}

func TestBadMessageCanBeAckedByHand(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	sm := runSocketMode(t, srv)
	id := srv.SendRaw([]byte(`{"envelope_id":"bad-1","type":"events_api","accepts_response_payload":false,"payload":"not an object"}`))
	evt := nextEvent(t, sm, socketmode.EventTypeErrorBadMessage)
	bad := evt.Data.(*socketmode.ErrorBadMessage)
	var env struct {
		EnvelopeID string `json:"envelope_id"`
	}
	if err := json.Unmarshal(bad.Message, &env); err != nil || env.EnvelopeID != id {
		t.Fatalf("raw message %s: %v", bad.Message, err)
	}
	if err := sm.AckCtx(ctxFor(t), env.EnvelopeID, nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitFor(ctxFor(t), func() bool { a := srv.Acks(); return len(a) == 1 && a[0].Known }); err != nil {
		t.Fatalf("acks = %+v", srv.Acks())
	}
}

func TestEchoBotMessages(t *testing.T) {
	srv := newServer(t, fakeslack.Config{EchoBotMessages: true})
	sm := runSocketMode(t, srv)
	api := newAPI(srv)
	_, ts, err := api.PostMessageContext(ctxFor(t), "D1", slack.MsgOptionText("placeholder", false))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctxFor(t), "D1", ts, slack.MsgOptionText("answer", false)); err != nil {
		t.Fatal(err)
	}
	post := nextEvent(t, sm, socketmode.EventTypeEventsAPI).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if post.BotID != "BBOT" || post.User != "UBOT" || post.TimeStamp != ts || post.SubType != "" {
		t.Errorf("echo of post = %+v", post)
	}
	edit := nextEvent(t, sm, socketmode.EventTypeEventsAPI).Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if edit.SubType != "message_changed" || edit.Message == nil || edit.Message.Text != "answer" || edit.PreviousMessage == nil || edit.PreviousMessage.Text != "placeholder" {
		t.Errorf("echo of edit = %+v", edit)
	}
}

func TestResponseURLUsesAndInChannel(t *testing.T) {
	srv := newServer(t, fakeslack.Config{ResponseURLUses: 2})
	api := newAPI(srv)
	u := srv.SlashCommand("C9", "U1", "/imagine", "x")
	for i := range 3 {
		_, _, err := api.PostMessageContext(ctxFor(t), "", slack.MsgOptionResponseURL(u, slack.ResponseTypeInChannel), slack.MsgOptionText("shown", false))
		if (err == nil) != (i < 2) {
			t.Errorf("post %d: %v", i, err)
		}
	}
	if msgs := srv.Messages("C9"); len(msgs) != 2 || msgs[0].Text != "shown" || msgs[0].BotID != "BBOT" {
		t.Errorf("channel after in_channel responses = %+v", msgs)
	}
	if posts := srv.ResponseURLPosts(); len(posts) != 3 || posts[2].Status != 404 {
		t.Errorf("posts = %+v", posts)
	}
}

func TestCloseEndsConnectionsAndGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	srv := fakeslack.New(fakeslack.Config{RedeliverAfter: time.Second})
	api := newAPI(srv)
	_, url, err := api.StartSocketModeContext(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(ctxFor(t), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	var hello map[string]any
	if err := ws.ReadJSON(&hello); err != nil || hello["type"] != "hello" {
		t.Fatalf("hello = %v, %v", hello, err)
	}
	// A used ticket is refused.
	if _, resp, err := websocket.DefaultDialer.DialContext(ctxFor(t), url, nil); err == nil || resp.StatusCode != 401 {
		t.Errorf("second dial with the same URL: %v", err)
	}
	srv.Close()
	if _, _, err := ws.ReadMessage(); err == nil {
		t.Error("connection still open after Close")
	}
	ws.Close()
	deadline := time.Now().Add(waitLimit)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) { // +2: HTTP client keep-alive conns
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d before, %d after Close\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
