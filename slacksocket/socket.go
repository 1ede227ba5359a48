// Package slacksocket is the bot's Socket Mode client: it dials Slack (apps.connections.open,
// then a WebSocket), reads every frame, acks each envelope from its raw bytes as soon as it is
// read, and hands the frames to its consumer undecoded. It reconnects on its own, and it answers
// pings and notices a connection gone quiet.
//
// It exists instead of slack-go's socketmode.Client for what people see during a refresh (a
// disconnect frame with reason refresh_requested, which Slack sends every few hours). Slack
// sends each envelope to any open connection of the app; while the app has none, events wait
// for a retry, and slash commands and button clicks fail for the person who sent them (Slack does
// not send those again). slack-go's client closes the old connection and only then calls
// apps.connections.open and dials, so Slack is left without a connection for as long as that
// takes, and it drops the frames still on the old connection after the disconnect frame, unacked.
// This client dials the next connection while it still reads and acks the old one, and closes
// the old one only once the next one is up: TestRefreshGapSlackGoVersusOurs runs both through
// the same refresh against the fake Slack and counts what failed.
//
// Acking on read also keeps an ack from waiting for the decoding of the envelopes before it: a
// burst of envelopes is acked as fast as it can be read.
package slacksocket

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/internal/watch"
)

// Opener opens Socket Mode connections (apps.connections.open with the app-level token).
// *slack.Client is one.
type Opener interface {
	StartSocketModeContext(ctx context.Context) (*slack.SocketModeConnection, string, error)
}

const (
	defaultPingTimeout = 30 * time.Second // as slack-go and Slack's node SDK: Slack pings more often
	handshakeTimeout   = 30 * time.Second
	maxAckSize         = 20 * 1024        // Slack silently drops larger Socket Mode responses
	readLimit          = 16 << 20         // a frame larger than this ends the connection (Slack's are KBs)
	writeBufferSize    = 32 * 1024        // above maxAckSize: an ack is written as one frame
	readBufferSize     = 64 * 1024        // a read takes in many envelopes of a burst (a few KB each)
	firstBackoff       = time.Second      // after a failed connection attempt, doubled up to maxBackoff
	maxBackoff         = 2 * time.Minute  // Slack's apps.connections.open is Tier 3 (~50 a minute)
	closeTimeout       = time.Second      // to write the close frame at shutdown
	framesQueue        = 1024             // see Client.frames
	ackWriteTimeout    = 10 * time.Second // the reader's acks; a socket that takes longer is dead
	slashCommands      = "slash_commands" // the envelopes the consumer acks: their ack carries the answer
)

// healthyAfter is how long a connection must stay up after its hello to count as healthy: when it
// ends, the next one is dialled at once, and the wait for connections that fail at once starts
// over. Slack refusing a connection ends it before or right after its hello, so this tells the two
// apart; and connections cut just after it still call apps.connections.open at most 30 times a
// minute, under its limit of about 50.
const healthyAfter = 2 * time.Second

// Frame is an envelope as read from Slack, not decoded.
type Frame struct {
	Data       []byte    // the frame as read
	EnvelopeID string    // its top-level envelope_id
	Type       string    // its top-level type: events_api, slash_commands, interactive, or one Slack added since
	Acked      bool      // acked on read; false for a slash command, whose ack carries its answer (Client.Ack)
	Read       time.Time // when it was read
}

// State is a change of the connection's state.
type State struct {
	// Connected: a connection is up, also one that replaced another without a gap (a refresh).
	// False: there is none, and Connection is being dialled (or will be, after a wait).
	Connected bool
	// Connection numbers connections: 0 the first, then one more for each that replaced another.
	Connection int
	// Attempt is, while down, the attempt at dialling Connection under way (0: none yet).
	Attempt int
	// Err is, while down, why that attempt failed (nil: it has not); Backoff is the wait before
	// the next one.
	Err     error
	Backoff time.Duration
}

// Options tune a Client. Zero values get the defaults named in the comments.
type Options struct {
	// PingTimeout: a connection that brings nothing, not even a ping, for this long is dialled
	// again; default 30 s.
	PingTimeout time.Duration
	// AppID is the Slack app of the bot token ("" when unknown): a hello from another app ends
	// Run with an error that says the two tokens come from different apps.
	AppID string
	// Acked is told of each envelope acked on read, once its ack is written, with the time since
	// it was read. May be nil; must not block.
	Acked func(envelopeType string, latency time.Duration)
	// State is told of every change of the connection's state, from Run's goroutine. May be nil;
	// must not block.
	State func(State)
}

// Client is a Socket Mode client. One goroutine (Run's) dials, reads every frame and acks an
// envelope from its raw bytes right after reading it, before anything is decoded (a refresh
// dials the next connection in a second goroutine while it still reads the old one): the ack of
// the last envelope of a burst waits only for the reads and writes of those before it. Slash commands are acked by the consumer, with the command's answer as payload
// (Ack).
//
// It reconnects on its own: when Slack asks (a disconnect frame other than "warning"), when a
// read or an ack fails, and when nothing (not even a ping) came for the ping timeout. It stops
// for good on a rejected app token or a 404 from apps.connections.open.
type Client struct {
	open        Opener
	dialer      *websocket.Dialer
	log         *zap.Logger
	pingTimeout time.Duration
	acked       func(envelopeType string, latency time.Duration) // may be nil
	onState     func(State)                                      // may be nil

	// frames carries frames to the consumer, buffered so the reader goes on acking a burst of
	// envelopes while the consumer decodes and routes the first ones (Slack sends N mentions'
	// envelopes at once); full, it holds the reader back (and with it the acks: Slack
	// redelivers). At ~2-5 KB a frame the buffer holds at most a few MB.
	frames chan Frame

	wmu    sync.Mutex      // serialises writes (gorilla allows one writer) and guards conn, up and closed
	conn   *websocket.Conn // the connection acks go to; nil between connections
	up     chan struct{}   // closed when conn is set (Ack waits on it while reconnecting)
	closed bool            // Close was called, or Run ended between connections: no more acks

	dmu      sync.Mutex // orders read-deadline changes against shutdown (see extend)
	stopping bool
	until    time.Time // the fixed read deadline of the read under way (zero: a ping timeout ahead)

	app string // the bot token's app ("" when unknown): a hello from another app is fatal
}

// errWrongApp is a Socket Mode connection of another Slack app than the bot token's: the app-level
// token and the bot token were taken from two apps, and the bot's events go to the other one.
type errWrongApp struct{ got, want string }

func (e errWrongApp) Error() string {
	return "socket mode: SLACK_APP_TOKEN belongs to Slack app " + e.got + " and SLACK_BOT_TOKEN to app " + e.want +
		", so the bot would never get its mentions: take both tokens from the same app at https://api.slack.com/apps " +
		"(the bot token under OAuth & Permissions, the app-level token under Basic Information > App-Level Tokens)"
}

// New returns a Client that opens its connections with open. Call Run once, read Frames, and
// Close once Run has returned and the last acks are written.
func New(open Opener, log *zap.Logger, opt Options) *Client {
	if opt.PingTimeout <= 0 {
		opt.PingTimeout = defaultPingTimeout
	}
	return &Client{
		open: open, log: log, pingTimeout: opt.PingTimeout, acked: opt.Acked, onState: opt.State, app: opt.AppID,
		dialer: &websocket.Dialer{
			NetDialContext:   (&net.Dialer{}).DialContext, // dial wraps it to close a dial that shutdown overtakes
			Proxy:            http.ProxyFromEnvironment,
			HandshakeTimeout: handshakeTimeout,
			ReadBufferSize:   readBufferSize,
			WriteBufferSize:  writeBufferSize,
		},
		frames: make(chan Frame, framesQueue),
		up:     make(chan struct{}),
	}
}

// Frames delivers the envelopes read, in order. Every envelope is acked on read but slash
// commands, which the consumer acks with Ack. Frames read before Run returned stay in it.
func (s *Client) Frames() <-chan Frame { return s.frames }

// errDisconnect is Slack asking for a new connection (a disconnect frame).
type errDisconnect struct{ reason string }

func (e errDisconnect) Error() string { return "slack asked to reconnect (" + e.reason + ")" }

// Run connects and reads until ctx ends (it then returns ctx's error, leaving the last
// connection open for the consumer's last acks: see Close) or the app token is rejected.
//
// A connection that ends is replaced at once when Slack asked for it (refresh_requested, after
// at least a second) or when it was healthy (see healthyAfter); one that fails sooner (Socket
// Mode turned off, too many connections, a proxy that cuts them at once) after a wait that grows
// while that goes on (1 s, 2 s, ... 2 min), so the client does not hammer apps.connections.open.
// A refresh opens the next connection before it closes the old one (see refresh).
func (s *Client) Run(ctx context.Context) error {
	defer s.closeIfDown()
	var wait time.Duration
	var next *websocket.Conn // opened by a refresh, before the one it replaces was closed
	for count := 0; ; count++ {
		conn := next
		if conn == nil {
			var err error
			if conn, err = s.connect(ctx, count); err != nil {
				return err
			}
		}
		began := time.Now()
		healthy, err := s.read(ctx, conn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var retryAfter time.Duration
		refresh := refreshAsked(err) && time.Since(began) >= time.Second
		if next = nil; refresh {
			var stop error
			if next, retryAfter, stop = s.refreshOrWait(ctx, conn, count+1); stop != nil {
				return stop
			}
			if next != nil {
				wait = 0
				continue
			}
		}
		s.drop(conn)
		if errors.As(err, new(errWrongApp)) {
			return err // no reconnect fixes it
		}
		// Down now, not after the wait: readiness and metrics must not say connected meanwhile.
		s.state(State{Connection: count + 1})
		wait = reconnectWait(wait, refresh || healthy, retryAfter)
		s.logReconnect(err)
		if err := s.waitToConnect(ctx, wait); err != nil {
			return err
		}
	}
}

// closeIfDown ends the acks' wait for a connection when Run ends between connections: none will
// come, so the consumer's last acks must not wait for one.
func (s *Client) closeIfDown() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.conn == nil && !s.closed {
		s.closed = true
		close(s.up)
	}
}

// refreshAsked reports whether err, which ended a connection, is Slack asking for a refresh.
func refreshAsked(err error) bool {
	var d errDisconnect
	return errors.As(err, &d) && d.reason == "refresh_requested"
}

// refreshOrWait refreshes conn (see refresh), and returns the next connection, or, when the
// dial failed, how long Slack asked to wait before the next attempt (zero: no need to). It
// returns ctx's error when ctx ended meanwhile.
func (s *Client) refreshOrWait(ctx context.Context, conn *websocket.Conn, count int) (*websocket.Conn, time.Duration, error) {
	next, err := s.refresh(ctx, conn, count)
	switch {
	case ctx.Err() != nil:
		return nil, 0, ctx.Err()
	case next != nil:
		s.log.Info("socket mode: connection refreshed")
		return next, 0, nil
	}
	s.log.Warn("socket mode: refresh failed; reconnecting", zap.Error(err))
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		return nil, rl.RetryAfter, nil
	}
	return nil, 0, nil
}

// reconnectWait is the wait before dialling again after a connection that ended, last the wait
// before the one that ended: retryAfter when it was healthy or refreshed (Slack asked for that
// much, or nothing), else last doubled, from firstBackoff up to maxBackoff.
func reconnectWait(last time.Duration, healthyOrRefreshed bool, retryAfter time.Duration) time.Duration {
	if healthyOrRefreshed {
		return retryAfter
	}
	return min(max(2*last, firstBackoff), maxBackoff)
}

// logReconnect says why a connection ended and is dialled again.
func (s *Client) logReconnect(err error) {
	var d errDisconnect
	if errors.As(err, &d) {
		s.log.Info("socket mode: reconnecting", zap.String("reason", d.reason))
	} else {
		s.log.Warn("socket mode connection lost; reconnecting", zap.Error(err))
	}
}

// waitToConnect waits d (none when it is zero) or until ctx ends.
func (s *Client) waitToConnect(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	s.log.Info("socket mode: waiting before connecting again", zap.Duration("wait", d))
	return watch.Sleep(ctx, d)
}

// drainTime bounds the read of what a replaced connection still holds, once its successor is up.
const drainTime = 250 * time.Millisecond

// dialed is the end of a dial: a connection, or why there is none.
type dialed struct {
	conn *websocket.Conn
	err  error
}

// refresh replaces old, which Slack asked to refresh, making before breaking: Slack sends each
// envelope to any open connection of the app, so while the app has none (a reconnect's
// apps.connections.open and handshake) its events wait for a retry, and its slash commands and
// button clicks fail. The next connection (number count) is dialled while old is still read and
// acked; once it is up, old is read for at most drainTime more (envelopes Slack sent before it
// took the refresh into account), then closed, and acks go to the next one. If old ends first, the
// state goes down and acks wait for the next connection, as in any reconnect.
//
// It returns the next connection, or the dial's error (old is then left for Run to replace as any
// other, and a 429 says how long to wait). When ctx ends it returns ctx's error, and leaves the
// next connection installed if there is one (else old, if it has not ended), for the consumer's
// last acks.
func (s *Client) refresh(ctx context.Context, old *websocket.Conn, count int) (*websocket.Conn, error) {
	s.drainBy(old, time.Time{})
	result := make(chan dialed, 1) // size 1: the dial never waits for the reader
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		next, err := s.dial(ctx)
		result <- dialed{next, err}
		s.drainBy(old, time.Now().Add(drainTime)) // ends the read below (harmless if old already ended)
	})
	_, err := s.readFrames(ctx, old)
	if err != nil && !isTimeout(err) && ctx.Err() == nil {
		s.log.Debug("socket mode: replaced connection ended", zap.Error(err))
	}
	var d dialed
	select {
	case d = <-result: // up (or failed) first: that read was old's drain
	default:
		if ctx.Err() == nil { // old ended first: down until the next connection is up
			s.drop(old)
			s.state(State{Connection: count, Attempt: 1})
		}
		d = <-result // the dial ends with ctx too
	}
	if ctx.Err() != nil {
		// The next connection, when there is one, is the live one for the consumer's last acks:
		// Slack closes old soon.
		if d.conn != nil {
			if s.install(d.conn, true) {
				s.drop(old)
			} else {
				d.conn.Close()
			}
		}
		return nil, ctx.Err()
	}
	if d.err != nil {
		return nil, d.err
	}
	s.install(d.conn, true)
	s.drop(old)
	s.state(State{Connected: true, Connection: count})
	return d.conn, nil
}

// install makes conn the connection acks go to, waking the acks waiting for one. With replace
// false it does so only when there is none (and reports whether it did).
func (s *Client) install(conn *websocket.Conn, replace bool) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	switch {
	case s.closed:
		return false
	case s.conn == nil:
		close(s.up)
	case !replace:
		return false
	}
	s.conn = conn
	return true
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// helloApp is the app id a hello frame names (connection_info.app_id), "" when it names none.
func helloApp(frame []byte) string {
	var h struct {
		ConnectionInfo struct {
			AppID string `json:"app_id"`
		} `json:"connection_info"`
	}
	_ = json.Unmarshal(frame, &h)
	return h.ConnectionInfo.AppID
}

// connect opens a connection, retrying with a growing backoff until it works, ctx ends or the
// error is fatal.
func (s *Client) connect(ctx context.Context, count int) (*websocket.Conn, error) {
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		s.state(State{Connection: count, Attempt: attempt})
		conn, err := s.dial(ctx)
		if err == nil {
			s.install(conn, true)
			s.state(State{Connected: true, Connection: count})
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := fatal(err); err != nil {
			return nil, err
		}
		wait := backoff/2 + rand.N(backoff/2+1) // jitter: many bots restarting together spread out
		var rl *slack.RateLimitedError
		if errors.As(err, &rl) {
			wait = max(wait, rl.RetryAfter)
		}
		backoff = min(2*backoff, maxBackoff)
		s.state(State{Connection: count, Attempt: attempt, Err: err, Backoff: wait})
		if err := watch.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// fatal explains the errors no retry can fix (the app token is wrong, or the API URL is), and
// returns nil for the others.
func fatal(err error) error {
	switch msg := err.Error(); msg {
	case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type", "missing_scope":
		return fmt.Errorf("socket mode: Slack rejected SLACK_APP_TOKEN (%s): create an app-level token with connections:write under Basic Information > App-Level Tokens: %w", msg, err)
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code == http.StatusNotFound {
		return fmt.Errorf("socket mode: apps.connections.open not found (is SLACK_API_URL right?): %w", err)
	}
	return nil
}

// dial calls apps.connections.open and dials the URL it returns (a new one every time).
func (s *Client) dial(ctx context.Context) (*websocket.Conn, error) {
	_, wsURL, err := s.open.StartSocketModeContext(ctx)
	if err != nil {
		return nil, err // apps.connections.open's error names it; it carries no token
	}
	hdr := http.Header{"Origin": {"https://api.slack.com"}}
	// gorilla reads the upgrade response with only HandshakeTimeout as a bound (a deadline it
	// sets itself): ctx's end must unblock it too (shutdown during a hung handshake), so it
	// closes the connection being dialled; one dialled after ctx ended is closed at once.
	var mu sync.Mutex
	var nc net.Conn
	d := *s.dialer
	d.NetDialContext = func(dctx context.Context, network, addr string) (net.Conn, error) {
		c, err := s.dialer.NetDialContext(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			c.Close()
			return nil, ctx.Err()
		}
		nc = c
		return c, nil
	}
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if nc != nil {
			_ = nc.Close()
		}
	})
	conn, resp, err := d.DialContext(ctx, wsURL, hdr)
	if !stop() {
		if conn != nil {
			conn.Close()
		}
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		return nil, ctx.Err()
	}
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		status := ""
		if resp != nil {
			status = " (" + resp.Status + ")"
		}
		// The URL holds a ticket: it is never logged (a *url.Error would print it, and a proxy's
		// URL may hold credentials).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("socket mode dial%s: %w", status, err)
	}
	conn.SetReadLimit(readLimit)
	return conn, nil
}

// read reads frames until the connection fails, Slack asks for a new one, or ctx ends. It
// reports whether the connection was healthy: its hello came at least healthyAfter before it ended.
func (s *Client) read(ctx context.Context, conn *websocket.Conn) (healthy bool, err error) {
	s.drainBy(conn, time.Time{})
	hello, err := s.readFrames(ctx, conn)
	return !hello.IsZero() && time.Since(hello) >= healthyAfter, err
}

// drainBy fixes the deadline of the read of conn under way (or about to start) at until, instead
// of a ping timeout ahead of every frame (zero until: back to that): the drain of a replaced
// connection.
func (s *Client) drainBy(conn *websocket.Conn, until time.Time) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.until = until
	if !until.IsZero() && !s.stopping {
		_ = conn.SetReadDeadline(until)
	}
}

// readFrames is read, with the read deadline drainBy set. It returns when the hello came (zero:
// none) with the error that ended the connection.
func (s *Client) readFrames(ctx context.Context, conn *websocket.Conn) (hello time.Time, err error) {
	defer s.stopReadingWith(ctx, conn)()
	conn.SetPingHandler(func(data string) error { return s.pong(conn, data) })
	for {
		s.extend(conn)
		typ, frame, err := conn.ReadMessage()
		if err != nil {
			return hello, err
		}
		read := time.Now()
		if typ != websocket.TextMessage {
			continue
		}
		h, err := readHead(frame)
		switch {
		case err != nil:
			s.log.Warn("socket mode: frame is not a JSON object; ignored", zap.Error(err), zap.Int("bytes", len(frame)))
		case h.typ == "hello":
			if err := s.checkHello(frame); err != nil {
				return hello, err
			}
			hello = read
		case h.typ == "disconnect" && h.reason == "warning": // the refresh follows in ~10 s; the connection still works
			s.log.Debug("socket mode: disconnect warning")
		case h.typ == "disconnect":
			return hello, errDisconnect{h.reason}
		default:
			f := Frame{Data: frame, EnvelopeID: h.id, Type: h.typ, Read: read, Acked: h.id != "" && h.typ != slashCommands}
			if err := s.deliver(ctx, conn, f); err != nil {
				return hello, err
			}
		}
	}
}

// stopReadingWith makes the end of ctx end the read of conn under way, and returns the function
// that stops that (the read is over).
func (s *Client) stopReadingWith(ctx context.Context, conn *websocket.Conn) (stop func() bool) {
	s.dmu.Lock()
	s.stopping = false
	s.dmu.Unlock()
	return context.AfterFunc(ctx, func() {
		s.dmu.Lock()
		defer s.dmu.Unlock()
		s.stopping = true
		_ = conn.SetReadDeadline(time.Now()) // unblocks the read
	})
}

// pong answers a ping: life, like any frame.
func (s *Client) pong(conn *websocket.Conn, data string) error {
	s.extend(conn)
	err := conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(ackWriteTimeout))
	if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
		return err // net.Error: the read fails with it, and the connection is dialled again
	}
	return nil
}

// checkHello fails a hello from another app than the bot token's.
func (s *Client) checkHello(frame []byte) error {
	app := helloApp(frame)
	s.log.Debug("socket mode hello", zap.String("app", app))
	if s.app != "" && app != "" && app != s.app {
		return errWrongApp{got: app, want: s.app}
	}
	return nil
}

// deliver hands f to the consumer, then acks it when it is to be acked on read. A consumer that
// is behind holds the reader back.
func (s *Client) deliver(ctx context.Context, conn *websocket.Conn, f Frame) error {
	select {
	case s.frames <- f:
	case <-ctx.Done():
		return ctx.Err() // shutting down: not acked, so Slack sends it again
	}
	if !f.Acked {
		return nil
	}
	err := s.write(conn, ackFrame(f.EnvelopeID), time.Now().Add(ackWriteTimeout))
	if err != nil {
		// The consumer has it anyway; Slack redelivers it on the next connection, and the
		// consumer must drop that as a duplicate.
		return fmt.Errorf("ack: %w", err)
	}
	if s.acked != nil {
		s.acked(f.Type, time.Since(f.Read))
	}
	return nil
}

// extend moves the read deadline a ping timeout ahead (any frame or ping is life), unless
// the socket is stopping.
func (s *Client) extend(conn *websocket.Conn) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	switch {
	case s.stopping:
	case !s.until.IsZero():
		_ = conn.SetReadDeadline(s.until)
	default:
		_ = conn.SetReadDeadline(time.Now().Add(s.pingTimeout))
	}
}

// state tells Options.State of a change.
func (s *Client) state(st State) {
	if s.onState != nil {
		s.onState(st)
	}
}

// ackFrame is {"envelope_id":id}, built by hand for Slack's ids (UUIDs), by encoding/json for
// any other.
func ackFrame(id string) []byte {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			b, _ := json.Marshal(response{EnvelopeID: id})
			return b
		}
	}
	b := make([]byte, 0, len(id)+18)
	b = append(b, `{"envelope_id":"`...)
	b = append(b, id...)
	return append(b, `"}`...)
}

// write writes one text frame to conn, the socket's only data writer at a time.
func (s *Client) write(conn *websocket.Conn, frame []byte, deadline time.Time) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = conn.SetWriteDeadline(deadline)
	return conn.WriteMessage(websocket.TextMessage, frame)
}

// response is a Socket Mode ack: the envelope's id and, for a slash command, its answer.
type response struct {
	EnvelopeID string `json:"envelope_id"`
	Payload    any    `json:"payload,omitempty"`
}

// Ack acknowledges an envelope the reader left to the consumer (Frame.Acked false: a slash
// command, or a frame that spells its envelope_id with escapes, which the reader does not read),
// with payload as the answer (nil: none), on the current connection; while the client
// reconnects it waits for the next one until ctx ends (Slack does not resend a slash command).
// Safe for concurrent use.
func (s *Client) Ack(ctx context.Context, envelopeID string, payload any) error {
	frame, err := json.Marshal(response{EnvelopeID: envelopeID, Payload: payload})
	if err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	if len(frame) >= maxAckSize {
		return fmt.Errorf("ack of %d bytes: Slack drops acks of %d bytes or more", len(frame), maxAckSize)
	}
	conn, err := s.current(ctx)
	if err != nil {
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(ackWriteTimeout)
	}
	if err := s.write(conn, frame, deadline); err != nil {
		return fmt.Errorf("ack: %w", err)
	}
	return nil
}

// current returns the connection, waiting for one while the socket reconnects.
func (s *Client) current(ctx context.Context) (*websocket.Conn, error) {
	for {
		s.wmu.Lock()
		conn, up, closed := s.conn, s.up, s.closed
		s.wmu.Unlock()
		switch {
		case conn != nil:
			return conn, nil
		case closed:
			return nil, errors.New("ack: not connected (shutting down)")
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, fmt.Errorf("ack: not connected: %w", context.Cause(ctx))
		}
	}
}

// drop closes a connection that failed or that Slack asked to replace.
func (s *Client) drop(conn *websocket.Conn) {
	s.wmu.Lock()
	if s.conn == conn {
		s.conn, s.up = nil, make(chan struct{})
	}
	s.wmu.Unlock()
	_ = conn.Close()
}

// Close ends the last connection with a close frame, once Run has returned and the consumer has
// written its last acks. Acks after it fail.
func (s *Client) Close() {
	s.wmu.Lock()
	conn := s.conn
	s.conn, s.closed = nil, true
	s.wmu.Unlock()
	if conn == nil {
		return
	}
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	_ = conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(closeTimeout))
	_ = conn.Close()
}
