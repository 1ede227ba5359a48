package fakeslack_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

const waitLimit = 10 * time.Second

func newServer(t *testing.T, cfg fakeslack.Config) *fakeslack.Server {
	t.Helper()
	srv := fakeslack.New(cfg)
	t.Cleanup(srv.Close)
	return srv
}

func newAPI(srv *fakeslack.Server) *slack.Client {
	return slack.New("xoxb-test", slack.OptionAPIURL(srv.URL()), slack.OptionAppLevelToken("xapp-test"))
}

// runSocketMode runs a real slack-go Socket Mode client against srv until the test ends.
func runSocketMode(t *testing.T, srv *fakeslack.Server) *socketmode.Client {
	t.Helper()
	return startSM(t, srv)
}

func startSM(t testing.TB, srv *fakeslack.Server) *socketmode.Client {
	t.Helper()
	sm := socketmode.New(newAPI(srv))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sm.RunContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Error("socketmode client did not stop")
		}
	})
	return sm
}

// nextEvent returns the next event of type typ, skipping others.
func nextEvent(t *testing.T, sm *socketmode.Client, typ socketmode.EventType) socketmode.Event {
	t.Helper()
	timeout := time.After(waitLimit)
	for {
		select {
		case evt := <-sm.Events:
			if evt.Type == typ {
				return evt
			}
		case <-timeout:
			t.Fatalf("no %s event within %v", typ, waitLimit)
		}
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func TestSocketModeDeliversEventsAndRecordsAcks(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	sm := runSocketMode(t, srv)
	hello := nextEvent(t, sm, socketmode.EventTypeHello)
	if got, want := hello.Request.ConnectionInfo.AppID, "A1"; got != want {
		t.Errorf("hello app_id = %q, want %q", got, want)
	}

	ts := srv.PostUserMessage("C1", "U1", "", "<@UBOT> hello there")

	var gotTypes []string
	for range 2 {
		evt := nextEvent(t, sm, socketmode.EventTypeEventsAPI)
		api := evt.Data.(slackevents.EventsAPIEvent)
		cb := api.Data.(*slackevents.EventsAPICallbackEvent)
		if cb.EventID == "" || cb.TeamID != "T1" || cb.APIAppID != "A1" {
			t.Errorf("callback = %+v, want event_id, team T1, app A1", cb)
		}
		switch ev := api.InnerEvent.Data.(type) {
		case *slackevents.AppMentionEvent:
			if ev.TimeStamp != ts || ev.Channel != "C1" || ev.User != "U1" || ev.Text != "<@UBOT> hello there" {
				t.Errorf("app_mention = %+v", ev)
			}
		case *slackevents.MessageEvent:
			if ev.TimeStamp != ts || ev.ChannelType != "channel" {
				t.Errorf("message = %+v", ev)
			}
		default:
			t.Fatalf("inner event %T", ev)
		}
		gotTypes = append(gotTypes, api.InnerEvent.Type)
		if err := sm.AckCtx(ctxFor(t), evt.Request.EnvelopeID, nil); err != nil {
			t.Fatal(err)
		}
	}
	if gotTypes[0] != "app_mention" || gotTypes[1] != "message" {
		t.Errorf("event types = %v, want [app_mention message]", gotTypes)
	}
	err := srv.WaitFor(ctxFor(t), func() bool { return len(srv.Acks()) == 2 })
	if err != nil {
		t.Fatalf("acks: %v (got %d)", err, len(srv.Acks()))
	}
	for _, a := range srv.Acks() {
		if !a.Known || a.Duplicate || a.Latency <= 0 || a.Type != "events_api" {
			t.Errorf("ack = %+v, want a known first ack with latency", a)
		}
	}
	for _, e := range srv.Envelopes() {
		if e.Sent.IsZero() || e.Acked.IsZero() {
			t.Errorf("envelope %+v not sent or not acked", e)
		}
	}
	if st := srv.Stats(); st.Envelopes != 2 || st.Acks != 2 || st.Pending != 0 || st.Unacked != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestDMGivesMessageIMOnly(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	sm := runSocketMode(t, srv)
	ts := srv.PostUserMessage("D1", "U1", "", "<@UBOT> hi in a DM")
	evt := nextEvent(t, sm, socketmode.EventTypeEventsAPI)
	ev, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || ev.ChannelType != "im" || ev.TimeStamp != ts {
		t.Fatalf("event = %#v, want message.im for %s", evt.Data, ts)
	}
	if n := len(srv.Envelopes()); n != 1 {
		t.Errorf("envelopes = %d, want 1 (no app_mention in DMs)", n)
	}
	// An extra app_mention for the same message can be sent by hand.
	srv.SendEvent(srv.EventOf("D1", ts, "app_mention"))
	evt = nextEvent(t, sm, socketmode.EventTypeEventsAPI)
	if _, ok := evt.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.AppMentionEvent); !ok {
		t.Errorf("SendEvent delivered %#v, want an app_mention", evt.Data)
	}
}

func TestQueuedUntilConnectedAndRedeliver(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	srv.PostUserMessage("C1", "U1", "", "<@UBOT> before connect")
	sm := runSocketMode(t, srv)
	first := nextEvent(t, sm, socketmode.EventTypeEventsAPI)
	firstCB := first.Data.(slackevents.EventsAPIEvent).Data.(*slackevents.EventsAPICallbackEvent)

	newID := srv.Redeliver(first.Request.EnvelopeID)
	if newID == "" || newID == first.Request.EnvelopeID {
		t.Fatalf("Redeliver = %q", newID)
	}
	var again socketmode.Event
	for {
		again = nextEvent(t, sm, socketmode.EventTypeEventsAPI)
		if again.Request.EnvelopeID == newID {
			break
		}
	}
	cb := again.Data.(slackevents.EventsAPIEvent).Data.(*slackevents.EventsAPICallbackEvent)
	if cb.EventID != firstCB.EventID {
		t.Errorf("redelivered event_id = %q, want %q", cb.EventID, firstCB.EventID)
	}
	if got, want := again.Request.RetryAttempt, 1; got != want {
		t.Errorf("retry_attempt = %d, want %d", got, want)
	}
}

func TestDisconnectReconnects(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	sm := runSocketMode(t, srv)
	nextEvent(t, sm, socketmode.EventTypeHello)
	srv.Disconnect("refresh_requested")
	nextEvent(t, sm, socketmode.EventTypeHello)
	if err := srv.WaitFor(ctxFor(t), func() bool { c := srv.Connections(); return c.Total == 2 && c.Current == 1 }); err != nil {
		t.Fatalf("connections = %+v: %v", srv.Connections(), err)
	}
	if n := len(srv.CallsTo("apps.connections.open")); n != 2 {
		t.Errorf("apps.connections.open calls = %d, want 2", n)
	}
	srv.PostUserMessage("C1", "U1", "", "<@UBOT> after refresh")
	nextEvent(t, sm, socketmode.EventTypeEventsAPI)

	srv.DropConnections()
	nextEvent(t, sm, socketmode.EventTypeHello)
	if got := srv.Connections().Total; got != 3 {
		t.Errorf("total connections = %d, want 3", got)
	}
}

// Gaps counts the times the last open connection closed; a second connection open meanwhile is no gap.
func TestConnectionGaps(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	dial := func() *websocket.Conn {
		t.Helper()
		_, url, err := newAPI(srv).StartSocketModeContext(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := websocket.DefaultDialer.DialContext(ctxFor(t), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	closed := func(want int) {
		t.Helper()
		if err := srv.WaitFor(ctxFor(t), func() bool { return srv.Connections().Current == want }); err != nil {
			t.Fatalf("connections = %+v, want %d open: %v", srv.Connections(), want, err)
		}
	}
	first := dial()
	second := dial()
	closed(2)
	first.Close()
	closed(1)
	if got := srv.Connections().Gaps; got != 0 {
		t.Errorf("gaps = %d after closing one of two connections, want 0", got)
	}
	second.Close()
	closed(0)
	if got := srv.Connections().Gaps; got != 1 {
		t.Errorf("gaps = %d after closing the last connection, want 1", got)
	}
}

// As in Slack, a slash command or a click sent while the app has no connection that takes
// envelopes fails for the person at once and is never delivered; one delivered but not acked
// within AckDeadline fails too. An event waits for the next connection. GapTime adds up the time
// without a connection.
func TestCommandsFailWithoutAConnection(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	envelope := func(id string) fakeslack.Envelope {
		t.Helper()
		for _, e := range srv.Envelopes() {
			if e.ID == id {
				return e
			}
		}
		t.Fatalf("no envelope %s", id)
		return fakeslack.Envelope{}
	}
	failed := func(id string) string { t.Helper(); return envelope(id).Failed }
	lastID := func() string { e := srv.Envelopes(); return e[len(e)-1].ID }
	dial := func() *websocket.Conn {
		t.Helper()
		_, url, err := newAPI(srv).StartSocketModeContext(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := websocket.DefaultDialer.DialContext(ctxFor(t), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		var hello map[string]any
		if err := c.ReadJSON(&hello); err != nil || hello["type"] != "hello" {
			t.Fatalf("hello = %v, %v", hello, err)
		}
		return c
	}
	read := func(c *websocket.Conn) map[string]any {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(waitLimit))
		var f map[string]any
		if err := c.ReadJSON(&f); err != nil {
			t.Fatal(err)
		}
		return f
	}

	srv.SlashCommand("C1", "U1", "/imagine", "before any connection")
	before := lastID()
	srv.PostUserMessage("D1", "U1", "", "an event before any connection")
	if got := failed(before); got != fakeslack.FailedDispatch {
		t.Errorf("command without a connection: Failed %q, want %q", got, fakeslack.FailedDispatch)
	}

	first := dial()
	if f := read(first); f["type"] != "events_api" {
		t.Errorf("first frame on the connection: %v, want the event that waited (not the failed command)", f)
	}
	srv.SlashCommand("C1", "U1", "/imagine", "never acked")
	unacked := lastID()
	if f := read(first); f["envelope_id"] != unacked {
		t.Fatalf("frame %v, want the command", f)
	}
	if got := failed(unacked); got != "" {
		t.Errorf("command just sent: Failed %q", got)
	}

	srv.Disconnect("refresh_requested") // RefreshGrace 0: the connection takes no more envelopes
	if f := read(first); f["type"] != "disconnect" {
		t.Fatalf("frame %v, want the disconnect", f)
	}
	srv.SlashCommand("C1", "U1", "/imagine", "during the refresh")
	if got := failed(lastID()); got != fakeslack.FailedDispatch {
		t.Errorf("command while the only connection is being refreshed: Failed %q, want %q", got, fakeslack.FailedDispatch)
	}

	first.Close()
	if err := srv.WaitFor(ctxFor(t), func() bool { return srv.Connections().Current == 0 }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	dial()
	if c := srv.Connections(); c.Gaps != 1 || c.GapTime < 100*time.Millisecond || c.GapTime > waitLimit {
		t.Errorf("connections %+v, want one gap of at least 100 ms", c)
	}

	time.Sleep(time.Until(envelope(unacked).Queued.Add(fakeslack.AckDeadline + 50*time.Millisecond)))
	if got := failed(unacked); got != fakeslack.FailedTimeout {
		t.Errorf("command not acked within %v: Failed %q, want %q", fakeslack.AckDeadline, got, fakeslack.FailedTimeout)
	}
}

// A connection asked to refresh still gets envelopes for RefreshGrace, until the app opens
// another one: from then on they go to that one.
func TestRefreshedConnectionGetsEnvelopesUntilTheNextOne(t *testing.T) {
	srv := newServer(t, fakeslack.Config{RefreshGrace: time.Minute, Subscriptions: []string{"message.im"}})
	dial := func() *websocket.Conn {
		t.Helper()
		_, url, err := newAPI(srv).StartSocketModeContext(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := websocket.DefaultDialer.DialContext(ctxFor(t), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	types := func(c *websocket.Conn, n int) []any {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(waitLimit))
		var got []any
		for range n {
			var f map[string]any
			if err := c.ReadJSON(&f); err != nil {
				t.Fatal(err)
			}
			got = append(got, f["type"])
		}
		return got
	}
	old := dial()
	if got := types(old, 1); got[0] != "hello" {
		t.Fatalf("first frame: %v", got)
	}
	srv.Disconnect("refresh_requested")
	srv.PostUserMessage("D1", "U1", "", "sent while the refresh is under way")
	if got := types(old, 2); got[0] != "disconnect" || got[1] != "events_api" {
		t.Fatalf("frames on the refreshed connection: %v, want the disconnect, then the event", got)
	}
	next := dial()
	if got := types(next, 1); got[0] != "hello" {
		t.Fatalf("frames on the next connection: %v", got)
	}
	srv.PostUserMessage("D1", "U1", "", "sent once the next one is up")
	if got := types(next, 1); got[0] != "events_api" {
		t.Errorf("frame on the next connection: %v, want the event", got)
	}
	if e := srv.Envelopes(); e[len(e)-1].Conn != 2 {
		t.Errorf("the last event went to connection %d, want 2", e[len(e)-1].Conn)
	}
}

func TestRedeliverAfterTimeoutGoesToNextConnection(t *testing.T) {
	srv := newServer(t, fakeslack.Config{RedeliverAfter: 50 * time.Millisecond})
	sm := runSocketMode(t, srv)
	srv.PostUserMessage("D1", "U1", "", "no ack for this one")
	first := nextEvent(t, sm, socketmode.EventTypeEventsAPI) // not acked
	second := nextEvent(t, sm, socketmode.EventTypeEventsAPI)
	if first.Request.EnvelopeID == second.Request.EnvelopeID || second.Request.RetryAttempt != 1 || second.Request.RetryReason != "timeout" {
		t.Errorf("retry = %+v after %+v", second.Request, first.Request)
	}
	if err := sm.AckCtx(ctxFor(t), second.Request.EnvelopeID, nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitFor(ctxFor(t), func() bool { return len(srv.Acks()) == 1 }); err != nil {
		t.Fatal(err)
	}
}

func TestSlashCommandAckPayloadAndResponseURL(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	sm := runSocketMode(t, srv)
	nextEvent(t, sm, socketmode.EventTypeHello) // connected: a command sent before would fail
	respURL := srv.SlashCommand("C1", "U1", "/imagine", "a fox")
	evt := nextEvent(t, sm, socketmode.EventTypeSlashCommand)
	cmd := evt.Data.(slack.SlashCommand)
	if cmd.Command != "/imagine" || cmd.Text != "a fox" || cmd.ResponseURL != respURL || cmd.UserID != "U1" || cmd.ChannelID != "C1" {
		t.Errorf("command = %+v", cmd)
	}
	if !evt.Request.AcceptsResponsePayload {
		t.Error("accepts_response_payload = false")
	}
	if err := sm.AckCtx(ctxFor(t), evt.Request.EnvelopeID, map[string]any{"response_type": "ephemeral", "text": "Generating…"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitFor(ctxFor(t), func() bool { return len(srv.Acks()) == 1 }); err != nil {
		t.Fatal(err)
	}
	if got := string(srv.Acks()[0].Payload); got != `{"response_type":"ephemeral","text":"Generating…"}` {
		t.Errorf("ack payload = %s", got)
	}

	api := newAPI(srv)
	if _, _, err := api.PostMessageContext(ctxFor(t), "", slack.MsgOptionResponseURL(respURL, slack.ResponseTypeEphemeral), slack.MsgOptionText("no pictures today", false)); err != nil {
		t.Fatal(err)
	}
	posts := srv.ResponseURLPosts()
	if len(posts) != 1 || posts[0].Text != "no pictures today" || posts[0].ResponseType != "ephemeral" || posts[0].User != "U1" || posts[0].Channel != "C1" {
		t.Errorf("response_url posts = %+v", posts)
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	ctx := ctxFor(t)
	parent := srv.PostUserMessage("C1", "U1", "", "<@UBOT> question")

	meta := slack.SlackMetadata{EventType: "llmbot_message", EventPayload: map[string]any{"kind": "placeholder"}}
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionTS(parent), slack.MsgOptionText("…", false), slack.MsgOptionMetadata(meta))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("the answer", false)); err != nil {
		t.Fatal(err)
	}
	long := string(bytes.Repeat([]byte("x"), 4001))
	_, _, _, err = api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText(long, false))
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "msg_too_long" {
		t.Errorf("update with 4001 chars: %v, want msg_too_long", err)
	}
	_, _, _, err = api.UpdateMessageContext(ctx, "C1", "1.000001", slack.MsgOptionText("x", false))
	if !errors.As(err, &se) || se.Err != "message_not_found" {
		t.Errorf("update of a missing message: %v, want message_not_found", err)
	}
	srv.PostUserMessage("C1", "U2", parent, "follow-up")

	msgs, hasMore, cursor, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
		ChannelID: "C1", Timestamp: parent, Limit: 2, IncludeAllMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || !hasMore || cursor == "" {
		t.Fatalf("first page: %d messages, has_more %v, cursor %q", len(msgs), hasMore, cursor)
	}
	if msgs[0].Timestamp != parent || msgs[1].Text != "the answer" || msgs[1].BotID != "BBOT" || msgs[1].User != "UBOT" || msgs[1].Edited == nil {
		t.Errorf("first page = %+v", msgs)
	}
	if msgs[1].Metadata.EventType != "llmbot_message" || msgs[1].Metadata.EventPayload["kind"] != "placeholder" {
		t.Errorf("metadata = %+v", msgs[1].Metadata)
	}
	more, hasMore, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
		ChannelID: "C1", Timestamp: parent, Limit: 2, Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(more) != 1 || hasMore || more[0].Text != "follow-up" || more[0].User != "U2" {
		t.Errorf("second page = %+v, has_more %v", more, hasMore)
	}
	noMeta, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: parent})
	if err != nil {
		t.Fatal(err)
	}
	if noMeta[1].Metadata.EventType != "" {
		t.Errorf("metadata without include_all_metadata: %+v", noMeta[1].Metadata)
	}

	writes := srv.Writes()
	if len(writes) != 2 || writes[0].Kind != fakeslack.WritePost || writes[1].Kind != fakeslack.WriteUpdate || writes[1].Text != "the answer" {
		t.Errorf("writes = %+v", writes)
	}
}

func TestRateLimits(t *testing.T) {
	srv := newServer(t, fakeslack.Config{Limits: fakeslack.Limits{
		Methods:               map[string]fakeslack.Limit{"chat.update": {PerMinute: 30, Burst: 1}},
		PostMessagePerChannel: fakeslack.Limit{PerMinute: 60, Burst: 2},
	}})
	api := newAPI(srv)
	ctx := ctxFor(t)
	srv.PostUserMessage("C1", "U1", "", "hi")
	var ts string
	for i := range 3 {
		_, got, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("p", false))
		var rl *slack.RateLimitedError
		switch {
		case i < 2 && err != nil:
			t.Fatalf("post %d: %v", i, err)
		case i == 2 && (!errors.As(err, &rl) || rl.RetryAfter != time.Second):
			t.Errorf("third post: %v, want RateLimitedError of 1s", err)
		}
		if i == 0 {
			ts = got
		}
	}
	if _, _, err := api.PostMessageContext(ctx, "C2", slack.MsgOptionText("p", false)); err != nil {
		t.Errorf("post to another channel: %v", err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("a", false)); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("b", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Errorf("second update: %v, want RateLimitedError of 2s", err)
	}
	if got := srv.Count429("chat.update"); got != 1 {
		t.Errorf("429s for chat.update = %d, want 1", got)
	}
	if got := srv.Count429("chat.postMessage"); got != 1 {
		t.Errorf("429s for chat.postMessage = %d, want 1", got)
	}
	if m, _ := srv.Message("C1", ts); m.Text != "a" {
		t.Errorf("text after a refused update = %q, want %q", m.Text, "a")
	}

	srv.RateLimitNext("users.info", 1500*time.Millisecond)
	_, err = api.GetUserInfoContext(ctx, "U1")
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Errorf("users.info after RateLimitNext: %v, want 2s", err)
	}
	srv.FailNext("users.info", "fatal_error")
	_, err = api.GetUserInfoContext(ctx, "U1")
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "fatal_error" {
		t.Errorf("users.info after FailNext: %v", err)
	}
	u, err := api.GetUserInfoContext(ctx, "U1")
	if err != nil || u.ID != "U1" || u.Name == "" {
		t.Errorf("users.info = %+v, %v", u, err)
	}
}

// TestSpendBudgets: after SpendBudgets the first call of a limited method, workspace-wide or in
// a channel, gets a 429 whose Retry-After is the refill time; SetLimits fills them again.
func TestSpendBudgets(t *testing.T) {
	limits := fakeslack.Limits{
		Methods:               map[string]fakeslack.Limit{"chat.update": {PerMinute: 30, Burst: 5}},
		PostMessagePerChannel: fakeslack.Limit{PerMinute: 60, Burst: 5},
	}
	srv := newServer(t, fakeslack.Config{Limits: limits})
	api := newAPI(srv)
	ctx := ctxFor(t)
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("p", false))
	if err != nil {
		t.Fatal(err)
	}

	srv.SpendBudgets()
	var rl *slack.RateLimitedError
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("a", false)); !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Errorf("update after SpendBudgets: %v, want a RateLimitedError of 2s", err)
	}
	// C2's bucket did not exist yet: it starts as empty as C1's.
	if _, _, err := api.PostMessageContext(ctx, "C2", slack.MsgOptionText("p", false)); !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Errorf("post in a new channel after SpendBudgets: %v, want a RateLimitedError of 1s", err)
	}
	if _, err := api.GetUserInfoContext(ctx, "U1"); err != nil { // not limited: not spent either
		t.Errorf("users.info: %v", err)
	}

	srv.SetLimits(limits)
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("b", false)); err != nil {
		t.Errorf("update after SetLimits: %v", err)
	}
	if got := srv.Count429("chat.update") + srv.Count429("chat.postMessage"); got != 2 {
		t.Errorf("429s = %d, want 2", got)
	}
}

func TestAuth(t *testing.T) {
	srv := newServer(t, fakeslack.Config{Scopes: []string{"chat:write", "commands"}})
	ctx := ctxFor(t)
	resp, err := newAPI(srv).AuthTestContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if resp.UserID != "UBOT" || resp.BotID != "BBOT" || resp.TeamID != "T1" {
		t.Errorf("auth.test = %+v", resp)
	}
	if got := resp.Header.Get("X-OAuth-Scopes"); got != "chat:write,commands" {
		t.Errorf("x-oauth-scopes = %q", got)
	}
	bad := slack.New("xoxb-wrong", slack.OptionAPIURL(srv.URL()), slack.OptionAppLevelToken("xapp-wrong"))
	_, err = bad.AuthTestContext(ctx)
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "invalid_auth" {
		t.Errorf("auth.test with a wrong token: %v", err)
	}
	_, _, err = bad.StartSocketModeContext(ctx)
	if !errors.As(err, &se) || se.Err != "invalid_auth" {
		t.Errorf("apps.connections.open with a wrong app token: %v", err)
	}
	for _, c := range srv.Calls() {
		if c.Method == "auth.test" && c.OK && c.Token != "xoxb-test" {
			t.Errorf("recorded token = %q", c.Token)
		}
	}
}

func TestUploadRoundTrip(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	ctx := ctxFor(t)
	png := []byte("\x89PNG\r\n\x1a\nnot really a picture")
	parent := srv.PostUserMessage("C1", "U1", "", "hi")
	sum, err := api.UploadFileContext(ctx, slack.UploadFileParameters{
		Filename: "fox.png", FileSize: len(png), Reader: bytes.NewReader(png), Title: "a fox",
		Channel: "C1", ThreadTimestamp: parent, InitialComment: "<@U1> asked for a fox", AltTxt: "a fox in the snow",
	})
	if err != nil {
		t.Fatal(err)
	}
	files := srv.Files()
	if len(files) != 1 {
		t.Fatalf("files = %d", len(files))
	}
	f := files[0]
	if f.ID != sum.ID || !bytes.Equal(f.Bytes, png) || f.Name != "fox.png" || f.Title != "a fox" || f.AltText != "a fox in the snow" ||
		f.Channel != "C1" || f.ThreadTS != parent || f.InitialComment != "<@U1> asked for a fox" || !f.Shared {
		t.Errorf("file = %+v", f)
	}
	replies := srv.BotReplies("C1", parent)
	if len(replies) != 1 || len(replies[0].Files) != 1 || replies[0].Text != "<@U1> asked for a fox" {
		t.Errorf("thread after upload = %+v", replies)
	}

	srv.SetMember("C2", false)
	_, err = api.UploadFileContext(ctx, slack.UploadFileParameters{Filename: "x.png", FileSize: 3, Content: "abc", Channel: "C2"})
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "not_in_channel" {
		t.Errorf("upload to a channel without the bot: %v", err)
	}
}

func TestNativeStreaming(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	ctx := ctxFor(t)
	parent := srv.PostUserMessage("C1", "U1", "", "<@UBOT> stream please")

	_, _, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS(parent), slack.MsgOptionMarkdownText("Hel"))
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "missing_recipient_user_id" {
		t.Errorf("startStream without recipients: %v", err)
	}
	_, ts, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS(parent), slack.MsgOptionMarkdownText("Hel"),
		slack.MsgOptionRecipientUserID("U1"), slack.MsgOptionRecipientTeamID("T1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.AppendStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText("lo")); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("x", false))
	if !errors.As(err, &se) || se.Err != "streaming_state_conflict" {
		t.Errorf("update while streaming: %v", err)
	}
	if _, _, err := api.StopStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText(" world")); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message("C1", ts); m.Text != "Hello world" || m.Streaming || !m.Markdown {
		t.Errorf("streamed message = %+v", m)
	}
	var kinds []fakeslack.WriteKind
	for _, w := range srv.Writes() {
		kinds = append(kinds, w.Kind)
	}
	if len(kinds) != 3 || kinds[0] != fakeslack.WriteStart || kinds[1] != fakeslack.WriteAppend || kinds[2] != fakeslack.WriteStop {
		t.Errorf("write kinds = %v", kinds)
	}

	_, ts2, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS(parent), slack.MsgOptionRecipientUserID("U1"), slack.MsgOptionRecipientTeamID("T1"))
	if err != nil {
		t.Fatal(err)
	}
	srv.PressStop("C1", ts2)
	_, _, err = api.AppendStreamContext(ctx, "C1", ts2, slack.MsgOptionMarkdownText("more"))
	if !errors.As(err, &se) || se.Err != "stopped_by_user" {
		t.Errorf("append after stop pressed: %v", err)
	}

	srv.SetStreaming("not_allowed")
	_, _, err = api.StartStreamContext(ctx, "D1", slack.MsgOptionTS(srv.PostUserMessage("D1", "U1", "", "hi")))
	if !errors.As(err, &se) || se.Err != "not_allowed" {
		t.Errorf("startStream when refused: %v", err)
	}
}

func TestEphemeralStatusReactionsHistory(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	ctx := ctxFor(t)
	parent := srv.PostUserMessage("C1", "U1", "", "first")
	srv.PostUserMessage("C1", "U1", "", "second")
	srv.PostUserMessage("C1", "U2", parent, "a reply")

	if _, err := api.PostEphemeralContext(ctx, "C1", "U1", slack.MsgOptionText("only you", false)); err != nil {
		t.Fatal(err)
	}
	if e := srv.Ephemerals(); len(e) != 1 || e[0].User != "U1" || e[0].Text != "only you" {
		t.Errorf("ephemerals = %+v", e)
	}
	if err := api.AddReactionContext(ctx, "eyes", slack.ItemRef{Channel: "C1", Timestamp: parent}); err != nil {
		t.Fatal(err)
	}
	if m, _ := srv.Message("C1", parent); len(m.Reactions) != 1 || m.Reactions[0] != "eyes" {
		t.Errorf("reactions = %v", m.Reactions)
	}
	err := api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{ChannelID: "C1", ThreadTS: parent, Status: "is thinking…"})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Status("C1", parent); got != "is thinking…" {
		t.Errorf("status = %q", got)
	}
	hist, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C1", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist.Messages) != 2 || hist.Messages[0].Text != "second" || hist.Messages[1].Text != "first" || hist.Messages[1].ReplyCount != 1 {
		t.Errorf("history = %+v", hist.Messages)
	}
}

func TestSlackLimitsTiers(t *testing.T) {
	srv := newServer(t, fakeslack.Config{Limits: fakeslack.SlackLimits(1)})
	api := newAPI(srv)
	ctx := ctxFor(t)
	parent := srv.PostUserMessage("C1", "U1", "", "hi")
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionTS(parent), slack.MsgOptionText("a", false))
	if err != nil {
		t.Fatal(err)
	}
	update := func() error {
		_, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("b", false))
		return err
	}
	start := func() error {
		_, _, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS(parent), slack.MsgOptionRecipientUserID("U1"), slack.MsgOptionRecipientTeamID("T1"))
		return err
	}
	tests := []struct {
		name string
		call func() error
		want time.Duration // Retry-After of the second call: 60 s / rate, rounded up
	}{
		{"chat.update (50/min)", update, 2 * time.Second},
		{"chat.startStream (20/min)", start, 3 * time.Second},
	}
	for _, tt := range tests {
		if err := tt.call(); err != nil {
			t.Fatalf("%s: first call: %v", tt.name, err)
		}
		var rl *slack.RateLimitedError
		if err := tt.call(); !errors.As(err, &rl) || rl.RetryAfter != tt.want {
			t.Errorf("%s: second call: %v, want Retry-After %v", tt.name, err, tt.want)
		}
	}
}

// TestStreamWrites: every call of a native stream is recorded as a Write with its time, its thread, the
// Markdown it added (Delta) and the message's whole text after it (Text), as the load benchmark rebuilds
// streamed answers from them; a later chat.update is recorded after them. In a DM thread no recipient is
// needed.
func TestStreamWrites(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	ctx := ctxFor(t)
	parent := srv.Post(fakeslack.UserMessage{Channel: "D7", User: "U7", Text: "earlier", Time: time.Now().Add(-time.Minute)})
	srv.PostUserMessage("D7", "U7", parent, "a question")
	before := time.Now()
	_, ts, err := api.StartStreamContext(ctx, "D7", slack.MsgOptionTS(parent), slack.MsgOptionMarkdownText("Hel"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.AppendStreamContext(ctx, "D7", ts, slack.MsgOptionMarkdownText("lo **wo")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.StopStreamContext(ctx, "D7", ts, slack.MsgOptionMarkdownText("rld**")); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "D7", ts, slack.MsgOptionText("Hello *world*", false)); err != nil {
		t.Fatal(err)
	}
	want := []fakeslack.Write{
		{Kind: fakeslack.WriteStart, Text: "Hel", Delta: "Hel"},
		{Kind: fakeslack.WriteAppend, Text: "Hello **wo", Delta: "lo **wo"},
		{Kind: fakeslack.WriteStop, Text: "Hello **world**", Delta: "rld**"},
		{Kind: fakeslack.WriteUpdate, Text: "Hello *world*"},
	}
	ws := srv.Writes()
	if len(ws) != len(want) {
		t.Fatalf("writes = %+v, want %d", ws, len(want))
	}
	last := before
	for i, w := range ws {
		if w.Kind != want[i].Kind || w.Text != want[i].Text || w.Delta != want[i].Delta {
			t.Errorf("write %d = %s %q (delta %q), want %s %q (delta %q)", i, w.Kind, w.Text, w.Delta, want[i].Kind, want[i].Text, want[i].Delta)
		}
		if w.Channel != "D7" || w.TS != ts || w.ThreadTS != parent {
			t.Errorf("write %d is of %s/%s in thread %q, want D7/%s in %q", i, w.Channel, w.TS, w.ThreadTS, ts, parent)
		}
		if w.Time.Before(last) {
			t.Errorf("write %d at %v, before %v", i, w.Time, last)
		}
		last = w.Time
	}
}
