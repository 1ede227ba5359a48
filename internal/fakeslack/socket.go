package fakeslack

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gorilla/websocket"
)

// maxRetries is how often Slack retries an unacked event.
const maxRetries = 3

const writeTimeout = 5 * time.Second

// AckDeadline is how long Slack waits for the ack of a slash command or a click before it tells
// the person the app failed.
const AckDeadline = 3 * time.Second

// What Slack tells the person (Envelope.Failed) when a slash command or a click does not reach
// the app: it does not send those again, unlike events, which wait for a connection and are
// retried.
const (
	// FailedDispatch: the app had no connection that Slack sends envelopes to ("dispatch_failed").
	FailedDispatch = "dispatch_failed"
	// FailedTimeout: it was not acked within AckDeadline ("operation_timeout").
	FailedTimeout = "operation_timeout"
)

// Envelope is a Socket Mode envelope the fake has queued, sent, and maybe seen acked.
type Envelope struct {
	ID          string
	Type        string // "events_api", "slash_commands", "interactive" (Click), or "" for SendRaw frames without a type
	EventID     string // events_api only
	EventType   string // the inner event's type (app_mention, message)
	Attempt     int    // retry_attempt
	Queued      time.Time
	Sent        time.Time // zero until written to a connection
	Acked       time.Time // zero until the first ack
	Conn        int       // the connection it was written to (1-based, in connection order)
	AckPayload  json.RawMessage
	Redelivered bool // a retry of it has been queued
	// Failed is, for a slash command or a click, the error Slack showed the person instead of
	// the app's answer (FailedDispatch, FailedTimeout), or "".
	Failed string
}

// Ack is one ack frame read from a Socket Mode connection.
type Ack struct {
	EnvelopeID string
	Type       string // the envelope's type, if the envelope is known
	Time       time.Time
	Latency    time.Duration // from the envelope's write to this ack (0 if unknown)
	Payload    json.RawMessage
	Conn       int
	Known      bool // the envelope id was sent by this fake
	Duplicate  bool // the envelope was already acked
}

// ConnStats counts Socket Mode connections.
type ConnStats struct {
	Current int // the app's open connections
	Total   int // every connection opened, refused ones included
	Refused int // connections refused beyond Config.MaxConnections (too_many_websockets)
	Pongs   int // pongs received for the server's pings, on all connections
	// Gaps counts the times the last open connection closed: until the next one, Slack has no
	// connection to send the app's envelopes to.
	Gaps int
	// GapTime is how long those gaps lasted in all (one still open counts up to now).
	GapTime time.Duration
}

type envelope struct {
	Envelope
	accepts  bool
	reason   string
	payload  json.RawMessage
	rawFrame []byte // SendRaw: written as is
	// to is the connection a test sent it to (Via, RedeliverTo), 0 for Slack's choice.
	to int
	// avoid is the connection that did not ack the envelope this one retries: Slack's retry
	// goes to any connection, so with several it prefers another.
	avoid int
}

func (e *envelope) frame() []byte {
	if e.rawFrame != nil {
		return e.rawFrame
	}
	f := map[string]any{
		"envelope_id":              e.ID,
		"type":                     e.Type,
		"accepts_response_payload": e.accepts,
		"payload":                  e.payload,
	}
	if e.Type == "events_api" {
		f["retry_attempt"] = e.Attempt
		f["retry_reason"] = e.reason
	}
	b, _ := json.Marshal(f)
	return b
}

// wsConn is one Socket Mode connection. Its fields after ws and done are guarded by Server.mu.
type wsConn struct {
	id       int
	ws       *websocket.Conn
	done     chan struct{} // closed when the connection is gone
	control  [][]byte      // frames written before any envelope (disconnect)
	draining bool          // a disconnect was queued: envelopes only as takesEnvelopesLocked says
	drainAt  time.Time     // when the first disconnect was queued
	refused  bool          // beyond Config.MaxConnections: told too_many_websockets, never registered

	opened, closed    time.Time
	sent, acks        int // envelopes written to it, ack frames read on it
	remote, userAgent string
}

func newEnvelopeID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// enqueueLocked queues e for the connection whose turn it is (takeForLocked). A slash command
// or a click that no connection can take now fails at once, as in Slack; an event waits for the
// next connection.
func (s *Server) enqueueLocked(e *envelope) {
	e.Queued = time.Now()
	s.envelopes[e.ID] = e
	s.envOrder = append(s.envOrder, e.ID)
	if answeredNow(e.Type) && !s.deliverableLocked(e.Queued) {
		e.Failed = FailedDispatch
	} else {
		s.pending = append(s.pending, e)
		if e.to != 0 {
			s.pinnedPending++
		}
	}
	s.notifyLocked()
}

// answeredNow reports whether Slack waits for the app's ack of an envelope of type typ to answer
// the person (a slash command, a click) instead of retrying it later.
func answeredNow(typ string) bool { return typ == "slash_commands" || typ == "interactive" }

// deliverableLocked reports whether a connection takes envelopes at now.
func (s *Server) deliverableLocked(now time.Time) bool {
	for c := range s.conns {
		if s.takesEnvelopesLocked(c, now) {
			return true
		}
	}
	return false
}

// takesEnvelopesLocked reports whether c takes envelopes at now: it has not been asked to
// disconnect, or was asked less than Config.RefreshGrace ago and the app has no other
// connection that was not.
func (s *Server) takesEnvelopesLocked(c *wsConn, now time.Time) bool {
	if !c.draining {
		return true
	}
	if now.Sub(c.drainAt) >= s.cfg.RefreshGrace {
		return false
	}
	for o := range s.conns {
		if !o.draining {
			return false
		}
	}
	return true
}

// failPendingLocked fails the slash commands and clicks waiting for a connection when none
// takes envelopes any more (Slack does not hold them for the next one).
func (s *Server) failPendingLocked(now time.Time) {
	if s.deliverableLocked(now) {
		return
	}
	s.pending = slices.DeleteFunc(s.pending, func(e *envelope) bool {
		if answeredNow(e.Type) {
			e.Failed = FailedDispatch
			return true
		}
		return false
	})
	s.pinnedPending = 0
	for _, e := range s.pending {
		if e.to != 0 {
			s.pinnedPending++
		}
	}
}

// failedLocked is e's Failed at now: a slash command or a click not acked within AckDeadline
// of the person's action (when it was queued) has failed for them, even when its ack comes later.
func failedLocked(e *envelope, now time.Time) string {
	switch {
	case e.Failed != "" || !answeredNow(e.Type):
		return e.Failed
	case e.Acked.IsZero() && now.Sub(e.Queued) > AckDeadline, !e.Acked.IsZero() && e.Acked.Sub(e.Queued) > AckDeadline:
		return FailedTimeout
	}
	return ""
}

func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	ticket := r.URL.Query().Get("ticket")
	s.mu.Lock()
	ok := s.tickets[ticket] && !s.closed
	delete(s.tickets, ticket)
	s.mu.Unlock()
	if !ok {
		http.Error(w, "invalid or used ticket", http.StatusUnauthorized)
		return
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }} // slack-go sends Origin: https://api.slack.com
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &wsConn{ws: ws, done: make(chan struct{}), opened: time.Now(), remote: r.RemoteAddr, userAgent: r.UserAgent()}
	ws.SetPongHandler(func(string) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pongs++
		s.notifyLocked()
		return nil
	})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ws.Close()
		return
	}
	s.connTotal++
	c.id = s.connTotal
	s.connLog = append(s.connLog, c)
	if len(s.conns) >= s.cfg.MaxConnections {
		c.refused = true
		s.refusing[c] = true
		s.wg.Add(1)
		s.notifyLocked()
		s.mu.Unlock()
		s.refuse(c)
		return
	}
	if len(s.conns) == 0 && !s.gapSince.IsZero() {
		s.gapTime += time.Since(s.gapSince)
		s.gapSince = time.Time{}
	}
	s.conns[c] = true
	s.wg.Add(2)
	hello, _ := json.Marshal(map[string]any{
		"type":            "hello",
		"num_connections": len(s.conns),
		"connection_info": map[string]any{"app_id": s.cfg.AppID},
		"debug_info": map[string]any{
			"host": "applink-fake-1", "build_number": 1, "approximate_connection_time": 18060,
			"started": time.Now().UTC().Format("2006-01-02 15:04:05.000"),
		},
	})
	c.control = append(c.control, hello)
	s.notifyLocked()
	s.mu.Unlock()
	go s.writeLoop(c)
	s.readLoop(c)
}

// closeWait is how long the fake waits for a client to close a connection it was told to leave.
const closeWait = 2 * time.Second

// refuse answers a connection beyond Config.MaxConnections as Slack is reported to: its only
// frame is a disconnect with reason too_many_websockets (no hello), it is not one of the app's
// connections (no envelope goes to it, num_connections does not count it), and it is closed.
// Whether and when Slack closes such a socket itself is not published: the fake then sends a
// close frame (code 1008, its own choice) and waits up to closeWait for the client's, so the
// disconnect frame is read before the socket goes away.
func (s *Server) refuse(c *wsConn) {
	defer s.wg.Done()
	deadline := time.Now().Add(writeTimeout)
	_ = c.ws.SetWriteDeadline(deadline)
	if c.ws.WriteMessage(websocket.TextMessage, disconnectFrame("too_many_websockets")) == nil &&
		c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "too_many_websockets"), deadline) == nil {
		_ = c.ws.SetReadDeadline(time.Now().Add(closeWait))
		for {
			if _, _, err := c.ws.ReadMessage(); err != nil {
				break
			}
		}
	}
	c.ws.Close()
	s.mu.Lock()
	delete(s.refusing, c)
	c.closed = time.Now()
	s.notifyLocked()
	s.mu.Unlock()
}

// rawAck is a frame read from a connection and when it was read.
type rawAck struct {
	data []byte
	read time.Time
}

// readLoop reads acks until the connection fails, then forgets the connection. It only reads
// and timestamps them: recordAcks matches them under the server's lock, so an ack's time is
// when it arrived, not when the lock was free (a test posting many messages at once holds the
// lock for each, and acks read meanwhile would otherwise look late by the whole burst).
func (s *Server) readLoop(c *wsConn) {
	defer s.wg.Done()
	acks := make(chan rawAck, 4096) // the burst of acks a test can cause; full, reading waits
	recorded := make(chan struct{})
	go func() { defer close(recorded); s.recordAcks(c, acks) }() // waited for below
	defer func() {
		close(acks)
		<-recorded
		c.ws.Close()
		s.mu.Lock()
		delete(s.conns, c)
		c.closed = time.Now()
		if len(s.conns) == 0 && !s.closed {
			s.gaps++
			s.gapSince = time.Now()
		}
		s.failPendingLocked(time.Now())
		close(c.done)
		s.notifyLocked()
		s.mu.Unlock()
	}()
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		acks <- rawAck{data: data, read: time.Now()}
	}
}

// recordAcks matches the acks read on c with their envelopes.
func (s *Server) recordAcks(c *wsConn, acks <-chan rawAck) {
	for r := range acks {
		data, now := r.data, r.read
		var a struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(data, &a) != nil || a.EnvelopeID == "" {
			continue
		}
		s.mu.Lock()
		ack := Ack{EnvelopeID: a.EnvelopeID, Time: now, Payload: a.Payload, Conn: c.id}
		c.acks++
		if e := s.envelopes[a.EnvelopeID]; e != nil {
			ack.Known, ack.Type = true, e.Type
			if !e.Sent.IsZero() {
				ack.Latency = now.Sub(e.Sent)
			}
			if e.Acked.IsZero() {
				e.Acked, e.AckPayload = now, a.Payload
			} else {
				ack.Duplicate = true
			}
		}
		s.acks = append(s.acks, ack)
		s.notifyLocked()
		s.mu.Unlock()
	}
}

// writeLoop is the connection's only data writer: hello and control frames, the envelopes whose
// turn it is to get (takeForLocked), and pings.
func (s *Server) writeLoop(c *wsConn) {
	defer s.wg.Done()
	ping := time.NewTicker(s.cfg.PingInterval)
	defer ping.Stop()
	var closeAfter <-chan time.Time // after a disconnect frame: close if the client does not
	for {
		s.mu.Lock()
		now := time.Now()
		wake := s.changes.C()
		var frame []byte
		var env *envelope
		if len(c.control) > 0 {
			frame = c.control[0]
			c.control = c.control[1:]
		} else if env = s.takeForLocked(c, now); env != nil {
			if answeredNow(env.Type) && now.Sub(env.Queued) > AckDeadline {
				env.Failed = FailedTimeout // the person was told it failed: Slack no longer sends it
				s.notifyLocked()
				s.mu.Unlock()
				continue
			}
			env.Sent, env.Conn = now, c.id
			c.sent++
			frame = env.frame()
			s.notifyLocked() // the next envelope may be another connection's turn: wake its writer
		}
		draining := c.draining
		graceEnds := s.graceEndsLocked(now)
		s.mu.Unlock()

		if frame != nil {
			_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
			if err := c.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
				if env != nil { // not delivered: the next connection gets it
					s.mu.Lock()
					env.Sent, env.Conn = time.Time{}, 0
					c.sent--
					s.pending = slices.Insert(s.pending, 0, env)
					if env.to != 0 {
						s.pinnedPending++
					}
					s.notifyLocked()
					s.mu.Unlock()
				}
				c.ws.Close()
				return
			}
			if draining && closeAfter == nil {
				closeAfter = time.After(closeWait)
			}
			continue
		}
		// A refreshed connection stops taking envelopes when its grace ends, which nothing
		// announces: look again then, as the turn may have passed to this connection.
		var recheck <-chan time.Time
		var timer *time.Timer
		if !graceEnds.IsZero() {
			timer = time.NewTimer(graceEnds.Sub(now))
			recheck = timer.C
		}
		stop := false
		select {
		case <-wake:
		case <-recheck:
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(writeTimeout)); err != nil {
				c.ws.Close()
				stop = true
			}
		case <-closeAfter:
			c.ws.Close()
			stop = true
		case <-c.done:
			stop = true
		case <-s.stop:
			stop = true
		}
		if timer != nil {
			timer.Stop()
		}
		if stop {
			return
		}
	}
}

// redeliverLoop re-queues envelopes left unacked for cfg.RedeliverAfter.
func (s *Server) redeliverLoop() {
	defer s.wg.Done()
	t := time.NewTicker(max(s.cfg.RedeliverAfter/4, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.mu.Lock()
			for _, id := range s.envOrder {
				e := s.envelopes[id]
				if e.Sent.IsZero() || !e.Acked.IsZero() || e.Redelivered || e.rawFrame != nil ||
					e.Type != "events_api" || e.Attempt >= maxRetries || now.Sub(e.Sent) < s.cfg.RedeliverAfter {
					continue
				}
				s.retryLocked(e, "timeout", 0)
			}
			s.mu.Unlock()
		}
	}
}

// retryLocked queues a new delivery of e's payload: a new envelope id, the same event,
// retry_attempt+1. It goes to the connection to (0: Slack's choice, which prefers one other
// than the connection e went to).
func (s *Server) retryLocked(e *envelope, reason string, to int) *envelope {
	e.Redelivered = true
	n := &envelope{
		Envelope: Envelope{ID: newEnvelopeID(), Type: e.Type, EventID: e.EventID, EventType: e.EventType, Attempt: e.Attempt + 1},
		accepts:  e.accepts, reason: reason, payload: e.payload, rawFrame: e.rawFrame,
		to: to, avoid: e.Conn,
	}
	s.enqueueLocked(n)
	return n
}

// Redeliver sends the envelope again as Slack retries an event: a new envelope id, the same
// payload and event_id, retry_attempt+1, retry_reason "timeout". Like Slack's retry it may go to
// any connection; with several, the fake sends it to one other than the connection the envelope
// went to. It returns the new envelope id, or "" if envelopeID is unknown. RedeliverTo picks the
// connection.
func (s *Server) Redeliver(envelopeID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envelopes[envelopeID]
	if e == nil {
		return ""
	}
	return s.retryLocked(e, "timeout", 0).ID
}

// SendRaw queues frame to be written as is to one Socket Mode connection (now, or the next
// one), for malformed or unusual envelopes. If frame has an envelope_id, its ack is
// matched. It returns that envelope_id (or a generated id to look the frame up by).
func (s *Server) SendRaw(frame []byte) string {
	var probe struct {
		EnvelopeID string `json:"envelope_id"`
		Type       string `json:"type"`
	}
	_ = json.Unmarshal(frame, &probe)
	id := probe.EnvelopeID
	if id == "" {
		id = "raw-" + newEnvelopeID()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enqueueLocked(&envelope{Envelope: Envelope{ID: id, Type: probe.Type}, rawFrame: slices.Clone(frame)})
	return id
}

// Disconnect writes {"type":"disconnect","reason":reason} to every open connection
// ("warning", "refresh_requested", "link_disabled", "too_many_websockets"). Except for
// "warning" (Slack's notice ~10 s ahead, after which the connection still works), the
// connections get no further envelopes (after Config.RefreshGrace, or once the app has opened
// another connection) and are closed 2 s after the frame if the client has not.
func (s *Server) Disconnect(reason string) {
	frame := disconnectFrame(reason)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.control = append(c.control, frame)
		if !c.draining && reason != "warning" {
			c.draining, c.drainAt = true, time.Now()
		}
	}
	s.notifyLocked()
}

func disconnectFrame(reason string) []byte {
	frame, _ := json.Marshal(map[string]any{
		"type": "disconnect", "reason": reason,
		"debug_info": map[string]any{"host": "applink-fake-1"},
	})
	return frame
}

// DropConnections closes every Socket Mode connection abruptly (no close frame).
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.ws.NetConn().Close()
	}
}
