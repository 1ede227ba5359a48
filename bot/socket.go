package bot

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
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/zap"
)

// SocketOpener opens Socket Mode connections (apps.connections.open with the app-level token).
// *slack.Client is one.
type SocketOpener interface {
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
	inboundQueue       = 1024             // see socket.in
	ackWriteTimeout    = 10 * time.Second // the reader's acks; a socket that takes longer is dead
)

// healthyAfter is how long a connection must stay up after its hello to count as healthy: when it
// ends, the next one is dialled at once, and the wait for connections that fail at once starts
// over. Slack refusing a connection ends it before or right after its hello, so this tells the two
// apart; and connections cut just after it still call apps.connections.open at most 30 times a
// minute, under its limit of about 50.
const healthyAfter = 2 * time.Second

// inbound is what the socket hands the loop: a frame, or a change of the connection's state.
type inbound struct {
	frame []byte           // a data frame as read (nil for state changes)
	head  head             // what the reader read of it
	acked bool             // the reader acks it: every envelope but a slash command (its ack carries the answer)
	read  time.Time        // when it was read (or sent, for a state change)
	evt   socketmode.Event // a state change (Connecting, Connected, ConnectionError), or a decoded event (tests)
}

// socket is the bot's Socket Mode client. One goroutine (Run's) dials, reads every frame and
// acks an envelope from its raw bytes right after reading it, before anything is decoded (a
// refresh dials the next connection in a second goroutine while it still reads the old one): the
// ack of the last envelope of a burst waits only for the reads and writes of those before it,
// not for decoding, routing or the goroutine hand-offs of slack-go's four-goroutine pipeline
// (round 3 of docs/benchmarks.md: ack p99 34 ms at N = 200 with slack-go's client). The acks of
// envelopes read together from one read of the network go out together, in one write
// (heldConn). Slash commands are acked by the loop, with the command's answer as payload (Ack).
//
// It reconnects on its own: when Slack asks (a disconnect frame other than "warning"), when a
// read or an ack fails, and when nothing (not even a ping) came for the ping timeout. It stops
// for good on a rejected app token or a 404 from apps.connections.open.
type socket struct {
	open        SocketOpener
	dialer      *websocket.Dialer
	log         *zap.Logger
	pingTimeout time.Duration
	acked       func(envelopeType string, latency time.Duration) // Hooks.Acked; may be nil

	// in carries frames to the loop, buffered so the reader goes on acking a burst of envelopes
	// while the loop decodes and routes the first ones (Slack sends N mentions' envelopes at
	// once); full, it holds the reader back (and with it the acks: Slack redelivers).
	// At ~2-5 KB a frame the buffer holds at most a few MB.
	in chan inbound

	wmu    sync.Mutex      // serialises writes (gorilla allows one writer) and guards conn, up and closed
	conn   *websocket.Conn // the connection acks go to; nil between connections
	up     chan struct{}   // closed when conn is set (Ack waits on it while reconnecting)
	closed bool            // close was called: no more acks

	dmu      sync.Mutex // orders read-deadline changes against shutdown (see extend)
	stopping bool
	until    time.Time // the fixed read deadline of the read under way (zero: a ping timeout ahead)

	app string // the bot token's app ("" when unknown): a hello from another app is fatal
}

// forApp makes a hello from any Slack app but app (when known) end Run with errWrongApp.
func (s *socket) forApp(app string) *socket {
	s.app = app
	return s
}

// errWrongApp is a Socket Mode connection of another Slack app than the bot token's: the app-level
// token and the bot token were taken from two apps, and the bot's events go to the other one.
type errWrongApp struct{ got, want string }

func (e errWrongApp) Error() string {
	return "socket mode: SLACK_APP_TOKEN belongs to Slack app " + e.got + " and SLACK_BOT_TOKEN to app " + e.want +
		", so the bot would never get its mentions: take both tokens from the same app at https://api.slack.com/apps " +
		"(the bot token under OAuth & Permissions, the app-level token under Basic Information > App-Level Tokens)"
}

func newSocket(open SocketOpener, log *zap.Logger, pingTimeout time.Duration, acked func(string, time.Duration)) *socket {
	if pingTimeout <= 0 {
		pingTimeout = defaultPingTimeout
	}
	return &socket{
		open: open, log: log, pingTimeout: pingTimeout, acked: acked,
		dialer: &websocket.Dialer{
			NetDialContext:   dialHeld,
			Proxy:            http.ProxyFromEnvironment,
			HandshakeTimeout: handshakeTimeout,
			ReadBufferSize:   readBufferSize,
			WriteBufferSize:  writeBufferSize,
		},
		in: make(chan inbound, inboundQueue),
		up: make(chan struct{}),
	}
}

// errDisconnect is Slack asking for a new connection (a disconnect frame).
type errDisconnect struct{ reason string }

func (e errDisconnect) Error() string { return "slack asked to reconnect (" + e.reason + ")" }

// Run connects and reads until ctx ends (it then returns ctx's error, leaving the last
// connection open for the loop's last acks: see close) or the app token is rejected.
//
// A connection that ends is replaced at once when Slack asked for it (refresh_requested, after
// at least a second) or when it was healthy (see healthyAfter); one that fails sooner (Socket
// Mode turned off, too many connections, a proxy that cuts them at once) after a wait that grows
// while that goes on (1 s, 2 s, ... 2 min), so the bot does not hammer apps.connections.open.
// A refresh opens the next connection before it closes the old one (see refresh).
func (s *socket) Run(ctx context.Context) error {
	defer func() {
		// Between connections when Run ends: no connection will come, so the loop's last
		// acks must not wait for one.
		s.wmu.Lock()
		if s.conn == nil && !s.closed {
			s.closed = true
			close(s.up)
		}
		s.wmu.Unlock()
	}()
	var wait time.Duration
	var next *websocket.Conn // opened by a refresh, before the one it replaces was closed
	for count := 0; ; count++ {
		if wait > 0 {
			s.log.Info("socket mode: waiting before connecting again", zap.Duration("wait", wait))
			if err := sleep(ctx, wait); err != nil {
				return err
			}
		}
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
		lived := time.Since(began)
		var d errDisconnect
		asked := errors.As(err, &d)
		refresh := asked && d.reason == "refresh_requested" && lived >= time.Second
		var retryAfter time.Duration
		if next = nil; refresh {
			var rerr error
			if next, rerr = s.refresh(ctx, conn, count+1); ctx.Err() != nil {
				return ctx.Err()
			}
			if next != nil {
				s.log.Info("socket mode: connection refreshed")
				wait = 0
				continue
			}
			s.log.Warn("socket mode: refresh failed; reconnecting", zap.Error(rerr))
			var rl *slack.RateLimitedError
			if errors.As(rerr, &rl) {
				retryAfter = rl.RetryAfter
			}
		}
		s.drop(conn)
		if errors.As(err, new(errWrongApp)) {
			return err // no reconnect fixes it
		}
		// Down now, not after the wait: readiness and metrics must not say connected meanwhile.
		if err := s.connecting(ctx, 0, count+1); err != nil {
			return err
		}
		switch {
		case refresh, healthy:
			wait = retryAfter
		default:
			wait = min(max(2*wait, firstBackoff), maxBackoff)
		}
		if asked {
			s.log.Info("socket mode: reconnecting", zap.String("reason", d.reason))
		} else {
			s.log.Warn("socket mode connection lost; reconnecting", zap.Error(err))
		}
	}
}

// drainTime bounds the read of what a replaced connection still holds, once its successor is up.
const drainTime = 250 * time.Millisecond

// dialed is the end of a dial: a connection, or why there is none.
type dialed struct {
	conn *websocket.Conn
	err  error
}

// refresh replaces old, which Slack asked to refresh, making before breaking: Slack sends each
// envelope to any open connection of the app, so while the bot has none (a reconnect's
// apps.connections.open and handshake) its events wait for a retry, and its slash commands and
// button clicks fail. The next connection (number count) is dialled while old is still read and
// acked; once it is up, old is read for at most drainTime more (envelopes Slack sent before it
// took the refresh into account), then closed, and acks go to the next one. If old ends first, the
// state goes down and acks wait for the next connection, as in any reconnect.
//
// It returns the next connection, or the dial's error (old is then left for Run to replace as any
// other, and a 429 says how long to wait). When ctx ends it returns ctx's error, and leaves the
// next connection installed if there is one (else old, if it has not ended), for the loop's last
// acks.
func (s *socket) refresh(ctx context.Context, old *websocket.Conn, count int) (*websocket.Conn, error) {
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
			// It fails only when ctx ended, and so does the dial then.
			_ = s.connecting(ctx, 1, count)
		}
		d = <-result // the dial ends with ctx too
	}
	if ctx.Err() != nil {
		// The next connection, when there is one, is the live one for the loop's last acks: Slack
		// closes old soon.
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
	// It fails only when ctx ended: Run then returns, and the next connection stays for the last acks.
	_ = s.connected(ctx, count)
	return d.conn, nil
}

// install makes conn the connection acks go to, waking the acks waiting for one. With replace
// false it does so only when there is none (and reports whether it did).
func (s *socket) install(conn *websocket.Conn, replace bool) bool {
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

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// connect opens a connection, retrying with a growing backoff until it works, ctx ends or the
// error is fatal.
func (s *socket) connect(ctx context.Context, count int) (*websocket.Conn, error) {
	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		if err := s.connecting(ctx, attempt, count); err != nil {
			return nil, err
		}
		conn, err := s.dial(ctx)
		if err == nil {
			s.install(conn, true)
			return conn, s.connected(ctx, count)
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
		if err := s.send(ctx, inbound{evt: socketmode.Event{Type: socketmode.EventTypeConnectionError,
			Data: &slack.ConnectionErrorEvent{Attempt: attempt, Backoff: wait, ErrorObj: err}}}); err != nil {
			return nil, err
		}
		if err := sleep(ctx, wait); err != nil {
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
func (s *socket) dial(ctx context.Context) (*websocket.Conn, error) {
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
func (s *socket) read(ctx context.Context, conn *websocket.Conn) (healthy bool, err error) {
	s.drainBy(conn, time.Time{})
	hello, err := s.readFrames(ctx, conn)
	return !hello.IsZero() && time.Since(hello) >= healthyAfter, err
}

// drainBy fixes the deadline of the read of conn under way (or about to start) at until, instead
// of a ping timeout ahead of every frame (zero until: back to that): the drain of a replaced
// connection.
func (s *socket) drainBy(conn *websocket.Conn, until time.Time) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	s.until = until
	if !until.IsZero() && !s.stopping {
		_ = conn.SetReadDeadline(until)
	}
}

// readFrames is read, with the read deadline drainBy set. It returns when the hello came (zero:
// none) with the error that ended the connection.
func (s *socket) readFrames(ctx context.Context, conn *websocket.Conn) (hello time.Time, err error) {
	s.dmu.Lock()
	s.stopping = false
	s.dmu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		s.dmu.Lock()
		defer s.dmu.Unlock()
		s.stopping = true
		_ = conn.SetReadDeadline(time.Now()) // unblocks the read below
	})
	defer stop()
	conn.SetPingHandler(func(data string) error {
		s.extend(conn)
		err := conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(ackWriteTimeout))
		if err != nil && !errors.Is(err, websocket.ErrCloseSent) {
			return err // net.Error: the read fails with it, and the connection is dialled again
		}
		return nil
	})
	held := heldOf(conn)
	defer func() {
		if err := held.flush(); err != nil {
			s.log.Debug("socket mode: last acks not written (Slack will redeliver)", zap.Error(err))
		}
	}()
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
		if err != nil {
			s.log.Warn("socket mode: frame is not a JSON object; ignored", zap.Error(err), zap.Int("bytes", len(frame)))
			continue
		}
		switch h.typ {
		case "hello":
			app := helloApp(frame)
			s.log.Debug("socket mode hello", zap.String("app", app))
			if s.app != "" && app != "" && app != s.app {
				return hello, errWrongApp{got: app, want: s.app}
			}
			hello = read
			continue
		case "disconnect":
			if h.reason == "warning" { // the refresh follows in ~10 s; the connection still works
				s.log.Debug("socket mode: disconnect warning")
				continue
			}
			return hello, errDisconnect{h.reason}
		}
		in := inbound{frame: frame, head: h, read: read, acked: h.id != "" && h.typ != socketmode.RequestTypeSlashCommands}
		select {
		case s.in <- in:
		default: // the loop is behind: the acks held go out before the reader waits for it
			if err := held.flush(); err != nil {
				return hello, fmt.Errorf("ack: %w", err)
			}
			if err := s.send(ctx, in); err != nil {
				return hello, err // shutting down: not acked, so Slack sends it again
			}
		}
		if !in.acked {
			continue
		}
		held.hold() // sent with the next read from the network (see heldConn)
		err = s.write(conn, ackFrame(h.id), time.Now().Add(ackWriteTimeout))
		held.release()
		if err != nil {
			// The loop handles it anyway; Slack redelivers it on the next connection and the
			// loop drops that as a duplicate.
			return hello, fmt.Errorf("ack: %w", err)
		}
		if s.acked != nil {
			s.acked(h.typ, time.Since(read)) // written, or held for the next read's write (heldConn)
		}
	}
}

// extend moves the read deadline a ping timeout ahead (any frame or ping is life), unless
// the socket is stopping.
func (s *socket) extend(conn *websocket.Conn) {
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

// connecting tells the loop the connection is down while connection number count is dialled (attempt 0:
// not yet).
func (s *socket) connecting(ctx context.Context, attempt, count int) error {
	return s.send(ctx, inbound{evt: socketmode.Event{Type: socketmode.EventTypeConnecting,
		Data: &slack.ConnectingEvent{Attempt: attempt, ConnectionCount: count}}})
}

// connected tells the loop connection number count is up.
func (s *socket) connected(ctx context.Context, count int) error {
	return s.send(ctx, inbound{evt: socketmode.Event{Type: socketmode.EventTypeConnected,
		Data: &socketmode.ConnectedEvent{ConnectionCount: count}}})
}

// send hands the loop a frame or a state change.
func (s *socket) send(ctx context.Context, in inbound) error {
	if in.read.IsZero() {
		in.read = time.Now()
	}
	select {
	case s.in <- in:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ackFrame is {"envelope_id":id}, built by hand for Slack's ids (UUIDs), by encoding/json for
// any other.
func ackFrame(id string) []byte {
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			b, _ := json.Marshal(socketmode.Response{EnvelopeID: id})
			return b
		}
	}
	b := make([]byte, 0, len(id)+18)
	b = append(b, `{"envelope_id":"`...)
	b = append(b, id...)
	return append(b, `"}`...)
}

// write writes one text frame to conn, the socket's only data writer at a time.
func (s *socket) write(conn *websocket.Conn, frame []byte, deadline time.Time) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = conn.SetWriteDeadline(deadline)
	return conn.WriteMessage(websocket.TextMessage, frame)
}

// Ack acknowledges an envelope the reader leaves to the loop (a slash command), with payload as
// the answer (nil: none), on the current connection; while the socket is reconnecting it waits
// for the next one until ctx ends (Slack does not resend a slash command).
func (s *socket) Ack(ctx context.Context, envelopeID string, payload any) error {
	frame, err := json.Marshal(socketmode.Response{EnvelopeID: envelopeID, Payload: payload})
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
func (s *socket) current(ctx context.Context) (*websocket.Conn, error) {
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
func (s *socket) drop(conn *websocket.Conn) {
	s.wmu.Lock()
	if s.conn == conn {
		s.conn, s.up = nil, make(chan struct{})
	}
	s.wmu.Unlock()
	_ = conn.Close()
}

// close ends the last connection with a close frame, once Run has returned and the loop has
// written its last acks.
func (s *socket) close() {
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
