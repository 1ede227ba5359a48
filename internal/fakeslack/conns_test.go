package fakeslack_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// dialConn opens one Socket Mode connection the way a client does (apps.connections.open, then
// the WebSocket), naming itself with userAgent, and reads its hello. It is closed when the test
// ends.
func dialConn(t *testing.T, srv *fakeslack.Server, userAgent string) *websocket.Conn {
	t.Helper()
	ws := dialRaw(t, srv, userAgent)
	if f := readFrame(t, ws); f["type"] != "hello" {
		t.Fatalf("first frame %v, want hello", f)
	}
	return ws
}

// dialRaw opens one Socket Mode connection and reads nothing.
func dialRaw(t *testing.T, srv *fakeslack.Server, userAgent string) *websocket.Conn {
	t.Helper()
	_, url, err := newAPI(srv).StartSocketModeContext(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.DefaultDialer.DialContext(ctxFor(t), url, http.Header{"User-Agent": {userAgent}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func readFrame(t *testing.T, ws *websocket.Conn) map[string]any {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(waitLimit))
	var f map[string]any
	if err := ws.ReadJSON(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

// readEnvelope reads frames on ws until the envelope id and returns it.
func readEnvelope(t *testing.T, ws *websocket.Conn, id string) map[string]any {
	t.Helper()
	for {
		if f := readFrame(t, ws); f["envelope_id"] == id {
			return f
		}
	}
}

// envelopeByID returns the envelope id from srv.Envelopes.
func envelopeByID(t *testing.T, srv *fakeslack.Server, id string) fakeslack.Envelope {
	t.Helper()
	for _, e := range srv.Envelopes() {
		if e.ID == id {
			return e
		}
	}
	t.Fatalf("no envelope %s", id)
	return fakeslack.Envelope{}
}

func lastEnvelope(srv *fakeslack.Server) fakeslack.Envelope {
	e := srv.Envelopes()
	return e[len(e)-1]
}

// With several connections, consecutive envelopes go to each in turn, in the order they opened.
func TestEnvelopesGoToConnectionsInTurn(t *testing.T) {
	srv := newServer(t, fakeslack.Config{Subscriptions: []string{"message.im"}})
	names := []string{"replica-a", "replica-b", "replica-c"}
	var conns []*websocket.Conn
	for _, name := range names {
		conns = append(conns, dialConn(t, srv, name))
	}
	const n = 30
	for range n {
		srv.PostUserMessage("D1", "U1", "", "hi")
	}
	// Each connection reads and acks what it gets until it is closed; the test waits for all of them.
	results := make(chan []string, len(conns)) // one per reader, never blocking it
	for _, ws := range conns {
		go func() {
			var ids []string
			for {
				var env struct {
					EnvelopeID string `json:"envelope_id"`
				}
				if err := ws.ReadJSON(&env); err != nil {
					results <- ids
					return
				}
				ids = append(ids, env.EnvelopeID)
				_ = ws.WriteJSON(map[string]string{"envelope_id": env.EnvelopeID})
			}
		}()
	}
	err := srv.WaitFor(ctxFor(t), func() bool { return len(srv.Acks()) == n })
	for _, ws := range conns {
		ws.Close()
	}
	read := 0
	for range conns {
		ids := <-results
		if len(ids) != n/len(conns) {
			t.Errorf("a connection read %d envelopes, want %d", len(ids), n/len(conns))
		}
		read += len(ids)
	}
	if err != nil {
		t.Fatalf("acks = %d of %d", len(srv.Acks()), n)
	}
	if read != n {
		t.Errorf("envelopes read = %d, want %d", read, n)
	}
	for i, e := range srv.Envelopes() {
		if want := i%len(conns) + 1; e.Conn != want {
			t.Errorf("envelope %d went to connection %d, want %d (in turn)", i, e.Conn, want)
		}
	}
	for i, c := range srv.Conns() {
		if c.ID != i+1 || c.UserAgent != names[i] || c.Envelopes != n/len(conns) || c.Acks != n/len(conns) || c.RemoteAddr == "" {
			t.Errorf("connection %d: %+v", i+1, c)
		}
	}
}

// Slack retries an event not acked in time on any connection: the fake picks one other than the
// connection that did not ack it, when the app has another.
func TestRetryGoesToAnotherConnection(t *testing.T) {
	tests := []struct {
		name  string
		conns int
		want  int // the connection the first retry goes to
	}{
		{"one connection: the same", 1, 1},
		{"two: the other", 2, 2},
		{"three: the next in turn", 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, fakeslack.Config{Subscriptions: []string{"message.im"}, RedeliverAfter: 50 * time.Millisecond})
			var conns []*websocket.Conn
			for range tt.conns {
				conns = append(conns, dialConn(t, srv, "replica"))
			}
			srv.PostUserMessage("D1", "U1", "", "nobody acks this")
			first := srv.Envelopes()[0]
			var retry fakeslack.Envelope
			err := srv.WaitFor(ctxFor(t), func() bool {
				for _, e := range srv.Envelopes() {
					if e.Attempt == 1 && !e.Sent.IsZero() {
						retry = e
						return true
					}
				}
				return false
			})
			if err != nil {
				t.Fatalf("no retry sent: %+v", srv.Envelopes())
			}
			if retry.Conn != tt.want || retry.EventID != first.EventID || retry.ID == first.ID {
				t.Errorf("retry %+v of %+v, want it on connection %d with the same event_id", retry, first, tt.want)
			}
			f := readEnvelope(t, conns[tt.want-1], retry.ID)
			if f["retry_attempt"] != 1.0 || f["retry_reason"] != "timeout" {
				t.Errorf("retry frame %v", f)
			}
		})
	}
}

// A test sends an envelope to a chosen connection (Via, RedeliverTo): the rotation goes on
// around it.
func TestViaAndRedeliverToChooseTheConnection(t *testing.T) {
	srv := newServer(t, fakeslack.Config{Subscriptions: []string{"message.im"}})
	api := newAPI(srv)
	parent := srv.PostUserMessage("C1", "U1", "", "before any connection") // no message.channels: no event
	_, buttons, err := api.PostMessageContext(ctxFor(t), "C1", slack.MsgOptionTS(parent), buttonMessage("Answer", "v"))
	if err != nil {
		t.Fatal(err)
	}
	var conns []*websocket.Conn
	for _, name := range []string{"a", "b", "c"} {
		conns = append(conns, dialConn(t, srv, name))
	}
	// on checks that the envelope went to the connection want and reads it there.
	on := func(id string, want int) {
		t.Helper()
		if err := srv.WaitFor(ctxFor(t), func() bool { return !envelopeByID(t, srv, id).Sent.IsZero() }); err != nil {
			t.Fatalf("envelope %s not sent", id)
		}
		if got := envelopeByID(t, srv, id).Conn; got != want {
			t.Fatalf("envelope went to connection %d, want %d", got, want)
		}
		readEnvelope(t, conns[want-1], id)
	}

	srv.PostUserMessage("D1", "U1", "", "a mention")
	mention := lastEnvelope(srv)
	on(mention.ID, 1) // the first in turn

	again := srv.RedeliverTo(mention.ID, 3)
	if again == "" {
		t.Fatal("RedeliverTo an open connection refused")
	}
	if e := envelopeByID(t, srv, again); e.EventID != mention.EventID || e.Attempt != 1 {
		t.Errorf("redelivered %+v, want event %s again, attempt 1", e, mention.EventID)
	}
	on(again, 3)

	srv.PostUserMessage("D1", "U1", "", "the next one")
	on(lastEnvelope(srv).ID, 2) // the rotation goes on from 1: a chosen connection is no turn

	click, err := srv.Via(1).Click("C1", buttons, "U2", "stop")
	if err != nil {
		t.Fatal(err)
	}
	on(click, 1)
	if _, err := srv.Via(2).SlashCommand("C1", "U1", "/imagine", "a fox"); err != nil {
		t.Fatal(err)
	}
	on(lastEnvelope(srv).ID, 2)
	shortcut, err := srv.Via(3).MessageShortcut("C1", parent, "U1", "summarize")
	if err != nil {
		t.Fatal(err)
	}
	on(shortcut, 3)
	if _, err := srv.Via(1).Post(fakeslack.UserMessage{Channel: "D1", User: "U1", Text: "to the first"}); err != nil {
		t.Fatal(err)
	}
	on(lastEnvelope(srv).ID, 1)
	event, err := srv.Via(2).SendEvent(srv.EventOf("C1", parent, "app_mention"))
	if err != nil {
		t.Fatal(err)
	}
	on(event, 2)

	srv.PostUserMessage("D1", "U1", "", "in turn again")
	on(lastEnvelope(srv).ID, 3)

	before := len(srv.Envelopes())
	if _, err := srv.Via(4).Click("C1", buttons, "U2", "stop"); !errors.Is(err, fakeslack.ErrNoConnection) {
		t.Errorf("click via a connection that does not exist: %v, want ErrNoConnection", err)
	}
	if got := srv.RedeliverTo(mention.ID, 4); got != "" {
		t.Errorf("RedeliverTo a connection that does not exist = %q, want \"\"", got)
	}
	srv.Disconnect("refresh_requested") // RefreshGrace 0: no connection takes envelopes now
	if _, err := srv.Via(1).SendEvent(srv.EventOf("C1", parent, "app_mention")); !errors.Is(err, fakeslack.ErrNoConnection) {
		t.Errorf("event via a refreshed connection: %v, want ErrNoConnection", err)
	}
	if got := len(srv.Envelopes()); got != before {
		t.Errorf("envelopes %d, want %d: a refused Via sends nothing", got, before)
	}
	for _, c := range srv.Conns() {
		if !c.Open || !c.Draining || c.TakesEnvelopes {
			t.Errorf("after the disconnect: %+v, want open, draining, taking no envelopes", c)
		}
	}
}

// Beyond MaxConnections, a new connection gets a disconnect (too_many_websockets) as its only
// frame, no envelope, and is closed; the app's connections go on.
func TestTooManyConnections(t *testing.T) {
	if got := newServer(t, fakeslack.Config{}).Config().MaxConnections; got != 10 {
		t.Errorf("default MaxConnections = %d, want 10", got)
	}
	srv := newServer(t, fakeslack.Config{MaxConnections: 2, Subscriptions: []string{"message.im"}})
	first := dialConn(t, srv, "a")
	second := dialConn(t, srv, "b")
	third := dialRaw(t, srv, "c")
	if f := readFrame(t, third); f["type"] != "disconnect" || f["reason"] != "too_many_websockets" {
		t.Errorf("first frame beyond the limit %v, want a too_many_websockets disconnect", f)
	}
	_ = third.SetReadDeadline(time.Now().Add(waitLimit))
	if _, _, err := third.ReadMessage(); !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("after the disconnect: %v, want the connection closed", err)
	}
	third.Close()
	if err := srv.WaitFor(ctxFor(t), func() bool { return !srv.Conns()[2].Closed.IsZero() }); err != nil {
		t.Fatalf("refused connection still open: %+v", srv.Conns())
	}
	if c := srv.Connections(); c.Current != 2 || c.Total != 3 || c.Refused != 1 {
		t.Errorf("connections %+v, want 2 open, 3 in all, 1 refused", c)
	}
	if c := srv.Conns()[2]; !c.Refused || c.Open || c.Envelopes != 0 {
		t.Errorf("refused connection %+v", c)
	}

	srv.PostUserMessage("D1", "U1", "", "one")
	readEnvelope(t, first, lastEnvelope(srv).ID)
	srv.PostUserMessage("D1", "U1", "", "two")
	readEnvelope(t, second, lastEnvelope(srv).ID)

	// Once one closes, there is room again.
	first.Close()
	if err := srv.WaitFor(ctxFor(t), func() bool { return srv.Connections().Current == 1 }); err != nil {
		t.Fatal(err)
	}
	fourth := dialRaw(t, srv, "d")
	if f := readFrame(t, fourth); f["type"] != "hello" || f["num_connections"] != 2.0 {
		t.Errorf("first frame %v, want a hello counting 2 connections", f)
	}
}

// Two slack-go clients stand for two replicas: the event replica A read but did not ack is
// retried on replica B's connection, with the same event_id.
func TestUnackedEventIsRetriedOnTheOtherReplica(t *testing.T) {
	srv := newServer(t, fakeslack.Config{Subscriptions: []string{"app_mention"}, RedeliverAfter: 100 * time.Millisecond})
	a := runSocketMode(t, srv)
	nextEvent(t, a, socketmode.EventTypeHello) // A holds connection 1: B opens after it
	b := runSocketMode(t, srv)
	nextEvent(t, b, socketmode.EventTypeHello)

	srv.PostUserMessage("C1", "U1", "", "<@UBOT> who answers?")
	first := nextEvent(t, a, socketmode.EventTypeEventsAPI) // A crashes before its ack
	retry := nextEvent(t, b, socketmode.EventTypeEventsAPI)
	if err := b.AckCtx(ctxFor(t), retry.Request.EnvelopeID, nil); err != nil {
		t.Fatal(err)
	}
	eventID := func(e socketmode.Event) string {
		return e.Data.(slackevents.EventsAPIEvent).Data.(*slackevents.EventsAPICallbackEvent).EventID
	}
	if eventID(retry) != eventID(first) || retry.Request.RetryAttempt != 1 || retry.Request.RetryReason != "timeout" {
		t.Errorf("B got %+v, want A's event %s again (attempt 1, timeout)", retry.Request, eventID(first))
	}
	if err := srv.WaitFor(ctxFor(t), func() bool { return len(srv.Acks()) == 1 }); err != nil {
		t.Fatal(err)
	}
	if ack := srv.Acks()[0]; ack.EnvelopeID != retry.Request.EnvelopeID || ack.Conn != 2 {
		t.Errorf("ack %+v, want B's (connection 2) of the retry", ack)
	}
}

// Close does not wait for a refused client to close its connection.
func TestCloseEndsARefusedConnection(t *testing.T) {
	srv := fakeslack.New(fakeslack.Config{MaxConnections: 1})
	defer srv.Close()
	dialConn(t, srv, "a")
	refused := dialRaw(t, srv, "b")
	if f := readFrame(t, refused); f["reason"] != "too_many_websockets" {
		t.Fatalf("frame %v", f)
	}
	start := time.Now()
	srv.Close() // the refused client has not closed: the fake is waiting for it
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v, want it to end the refused connection at once", d)
	}
}
