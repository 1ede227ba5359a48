package slacksocket

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/waittest"
	"github.com/llmbot/llmbot/internal/watch"
)

// waitTimeout bounds every wait in these tests.
const waitTimeout = 10 * time.Second

func newFakeSlack(t testing.TB, cfg fakeslack.Config) *fakeslack.Server {
	t.Helper()
	fs := fakeslack.New(cfg)
	t.Cleanup(fs.Close)
	return fs
}

// slackAPI is a Web API client of fs with the app-level token: an Opener.
func slackAPI(fs *fakeslack.Server) *slack.Client {
	return slack.New("xoxb-test", slack.OptionAPIURL(fs.URL()), slack.OptionAppLevelToken("xapp-test"))
}

// eventually polls cond until it holds, failing the test after waitTimeout.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waittest.Eventually(t, waitTimeout, what, cond)
}

// waitChan waits for a value from c.
func waitChan[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	return waittest.Receive(t, waitTimeout, what, c)
}

// app runs a Client against the fake as the bot does, and keeps what it got: the frames, in
// order, and the state changes. Slash commands are left unacked for the test to ack.
type app struct {
	c       *Client
	stop    context.CancelFunc
	runDone chan struct{} // closed when Run has returned

	mu     sync.Mutex
	frames []Frame
	states []State
}

// startApp runs a Client on the fake (its Opener wrapped by wrap, nil: none) until the test ends
// (or stop), and waits for it to connect.
func startApp(t *testing.T, fs *fakeslack.Server, wrap func(Opener) Opener, opt Options) *app {
	t.Helper()
	var open Opener = slackAPI(fs)
	if wrap != nil {
		open = wrap(open)
	}
	a := &app{runDone: make(chan struct{})}
	opt.State = func(s State) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.states = append(a.states, s)
	}
	a.c = New(open, zaptest.NewLogger(t), opt)
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	go func() { defer close(a.runDone); _ = a.c.Run(ctx) }()
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() { // the consumer
		for {
			select {
			case f := <-a.c.Frames():
				a.mu.Lock()
				a.frames = append(a.frames, f)
				a.mu.Unlock()
			case <-done:
				return
			}
		}
	})
	t.Cleanup(func() {
		a.shutdown(t)
		close(done)
		wg.Wait()
		a.c.Close()
	})
	eventually(t, "connected", func() bool { return a.connected() && fs.Connections().Current == 1 })
	return a
}

// shutdown ends Run and waits for it to return (the consumer goes on reading).
func (a *app) shutdown(t *testing.T) {
	t.Helper()
	a.stop()
	select {
	case <-a.runDone:
	case <-time.After(waitTimeout):
		t.Error("Run did not return after cancel")
	}
}

// connected reports whether the last state reported was a connection up.
func (a *app) connected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.states) > 0 && a.states[len(a.states)-1].Connected
}

// received returns the frames the consumer got.
func (a *app) received() []Frame {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Frame(nil), a.frames...)
}

// statesSince returns the state changes from the nth on.
func (a *app) statesSince(n int) []State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]State(nil), a.states[n:]...)
}

// counts is what the bot makes of the states (Hooks.Connection): every connection up, and the
// connection going down (once each time).
func (a *app) counts() (ups, downs int) {
	up := false
	for _, s := range a.statesSince(0) {
		switch {
		case s.Connected:
			ups++
		case up:
			downs++
		}
		up = s.Connected
	}
	return ups, downs
}

// slashCommand sends a slash command and waits for the consumer to get it; it returns its
// envelope id.
func (a *app) slashCommand(t *testing.T, fs *fakeslack.Server) string {
	t.Helper()
	n := len(a.received())
	fs.SlashCommand("C1", "U1", "/imagine", "a fox")
	eventually(t, "the command read", func() bool { return len(a.received()) > n })
	f := a.received()[n]
	if f.Type != "slash_commands" || f.Acked {
		t.Fatalf("frame %+v: want the slash command, not acked", f)
	}
	return f.EnvelopeID
}

// answer is the payload the tests ack slash commands with.
var answer = map[string]any{"response_type": "ephemeral", "text": "ok"}

// ackedWith reports whether the envelope id was acked with answer.
func ackedWith(fs *fakeslack.Server, id string) bool {
	for _, a := range fs.Acks() {
		if a.EnvelopeID == id && strings.Contains(string(a.Payload), `"text":"ok"`) {
			return true
		}
	}
	return false
}

// Every envelope is acked as it is read, before the consumer has it: while the consumer is held
// up, envelopes behind it are acked all the same. A slash command is left to the consumer.
func TestEnvelopesAckedOnRead(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	c := New(slackAPI(fs), zaptest.NewLogger(t), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	defer func() { cancel(); waitChan(t, "Run to return", errc); c.Close() }()
	eventually(t, "connected", func() bool { return fs.Connections().Current == 1 })

	fs.SlashCommand("C1", "U1", "/imagine", "a fox")
	for range 5 {
		fs.PostUserMessage("D1", "U1", "", "hello")
	}
	eventually(t, "the five messages acked", func() bool { return len(fs.Acks()) == 5 })
	for _, a := range fs.Acks() {
		if a.Type != "events_api" || a.Payload != nil {
			t.Errorf("ack %+v: want the events_api envelopes, without payload", a)
		}
	}
	for i := range 6 { // nothing read them yet: they wait in Frames, in order
		f := waitChan(t, "a frame", c.Frames())
		if wantCmd := i == 0; (f.Type == "slash_commands") != wantCmd || f.Acked == wantCmd || f.EnvelopeID == "" || f.Read.IsZero() {
			t.Errorf("frame %d: %+v", i, f)
		}
	}
}

// A disconnect "warning" announces a refresh (~10 s later); the connection still works and is
// kept until Slack asks for the refresh.
func TestDisconnectWarningKeepsTheConnection(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	a := startApp(t, fs, nil, Options{})
	fs.Disconnect("warning")
	fs.PostUserMessage("D1", "U1", "", "hello")
	eventually(t, "the message read", func() bool { return len(a.received()) == 1 })
	if c := fs.Connections(); c.Total != 1 || c.Current != 1 {
		t.Errorf("connections %+v after a warning: want the first one kept", c)
	}
	fs.Disconnect("refresh_requested")
	eventually(t, "a new connection", func() bool {
		c := fs.Connections()
		return c.Total == 2 && c.Current == 1 && a.connected()
	})
}

// A refresh opens the next connection before the old one closes: Slack always has a connection to
// send the app's envelopes to (a slash command or a click sent while there is none fails), and
// the client never says it is down. An envelope Slack sent on the old connection after asking for
// the refresh is still read and acked there.
func TestRefreshOpensTheNextConnectionFirst(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{RefreshGrace: time.Second})
	// The refresh's apps.connections.open takes 200 ms, as over a real network: the message sent as the
	// refresh begins is then on the old connection for sure (a fast dial could open the next first).
	op := &slowOpener{nth: 2, delay: 200 * time.Millisecond, started: make(chan struct{})}
	a := startApp(t, fs, func(o Opener) Opener { op.open = o; return op }, Options{})
	time.Sleep(1100 * time.Millisecond) // a refresh within a second of connecting waits first (Run)
	before := len(a.statesSince(0))
	fs.Disconnect("refresh_requested")
	fs.PostUserMessage("D1", "U1", "", "sent as the refresh began")
	eventually(t, "the message read and a new connection", func() bool {
		c := fs.Connections()
		return len(a.received()) == 1 && c.Total == 2 && c.Current == 1 && len(a.statesSince(before)) > 0
	})
	if c := fs.Connections(); c.Gaps != 0 {
		t.Errorf("connections %+v: Slack was left without a connection %d times, want never", c, c.Gaps)
	}
	if s := a.statesSince(before); len(s) != 1 || s[0] != (State{Connected: true, Connection: 1}) {
		t.Errorf("states during the refresh: %+v; want only the next connection up (a reconnect for the metrics), never down", s)
	}
	envs := fs.Envelopes()
	last := envs[len(envs)-1]
	if last.Conn != 1 {
		t.Fatalf("the message was sent on connection %d, want 1 (the one being replaced): the test did not reach the drain", last.Conn)
	}
	acks := fs.Acks()
	if len(acks) != 1 || acks[0].EnvelopeID != last.ID || acks[0].Conn != 1 {
		t.Errorf("acks %+v, want one, of the message, on connection 1", acks)
	}
	fs.PostUserMessage("D1", "U1", "", "and after it")
	eventually(t, "the next message read", func() bool { return len(a.received()) == 2 })
	if n := fs.CallCount("apps.connections.open"); n != 2 {
		t.Errorf("apps.connections.open called %d times, want 2", n)
	}
}

// A refresh whose dial fails falls back to a reconnect (with the usual retries), and says the
// connection is down meanwhile.
func TestRefreshThatCannotDialReconnects(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	a := startApp(t, fs, nil, Options{})
	time.Sleep(1100 * time.Millisecond)
	fs.FailNext("apps.connections.open", "internal_error")
	fs.Disconnect("refresh_requested")
	eventually(t, "down and up again", func() bool {
		ups, downs := a.counts()
		return ups == 2 && downs == 1 && a.connected() && fs.Connections().Total == 2
	})
	fs.PostUserMessage("D1", "U1", "", "hello")
	eventually(t, "the message read", func() bool { return len(a.received()) == 1 })
	if n := fs.CallCount("apps.connections.open"); n != 3 {
		t.Errorf("apps.connections.open called %d times, want 3 (the first, the refresh that failed, its retry)", n)
	}
}

// While a refresh's dial is slow (apps.connections.open or the handshake: up to 30 s + 30 s), the old
// connection is still read; once Slack closes it the app has no connection, and the state (so
// /readyz and the connected gauge) says so until the next one is up.
func TestRefreshDownWhenTheOldConnectionEndsFirst(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	op := &slowOpener{nth: 2, delay: 5 * time.Second, started: make(chan struct{})}
	a := startApp(t, fs, func(o Opener) Opener { op.open = o; return op }, Options{})
	time.Sleep(1100 * time.Millisecond) // a refresh, not a young connection's reconnect
	fs.Disconnect("refresh_requested")
	waitChan(t, "the refresh's dial", op.started)
	// The fake closes a connection 2 s after its disconnect frame.
	eventually(t, "Slack closed the old connection", func() bool { return fs.Connections().Current == 0 })
	time.Sleep(200 * time.Millisecond)
	if fs.Connections().Current == 0 && a.connected() {
		t.Errorf("Slack has no connection of the app (the refresh's dial hangs), but the state says connected: /readyz says ready, the connected gauge 1")
	}
	eventually(t, "connected again", func() bool { return a.connected() && fs.Connections().Current == 1 })
}

// A slash command's ack written during a slow refresh dial, after Slack closed the old
// connection, waits for the next connection (as in TestSlashAckWaitsForTheNextConnection), not
// written into the dead one: Slack does not resend slash commands.
func TestSlashAckDuringARefreshAfterTheOldConnectionEnded(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	op := &slowOpener{nth: 2, delay: 4 * time.Second, started: make(chan struct{})}
	a := startApp(t, fs, func(o Opener) Opener { op.open = o; return op }, Options{})
	time.Sleep(1100 * time.Millisecond)
	id := a.slashCommand(t, fs)
	fs.Disconnect("refresh_requested")
	waitChan(t, "the refresh's dial", op.started)
	// Once the client has read the end of the old connection (its state goes down): until then an ack
	// written into it is lost in the network whatever the client does, as with Slack.
	eventually(t, "Slack closed the old connection, and the client knows", func() bool {
		return fs.Connections().Current == 0 && !a.connected()
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := a.c.Ack(ctx, id, answer); err != nil { // now, during the refresh's dial
		t.Fatalf("Ack: %v", err)
	}
	eventually(t, "connected again", func() bool { return fs.Connections().Current == 1 })
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if ackedWith(fs, id) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("the slash command was never acked (acks %+v): its ack went to the connection being refreshed, after Slack closed it", fs.Acks())
}

// A refresh whose apps.connections.open gets a 429 falls back to a reconnect after the Retry-After
// Slack gave, not at once.
func TestRefreshRateLimitedWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	a := startApp(t, fs, nil, Options{})
	time.Sleep(1100 * time.Millisecond)
	fs.RateLimitNext("apps.connections.open", 3*time.Second)
	fs.Disconnect("refresh_requested")
	eventually(t, "connected again", func() bool {
		return len(fs.CallsTo("apps.connections.open")) == 3 && a.connected() && fs.Connections().Current == 1
	})
	calls := fs.CallsTo("apps.connections.open")
	if calls[1].Status != 429 {
		t.Fatalf("second apps.connections.open answered %d, want the 429", calls[1].Status)
	}
	if gap := calls[2].Time.Sub(calls[1].Time); gap < 2*time.Second {
		t.Errorf("apps.connections.open called again %v after a 429 with Retry-After: 3s", gap)
	}
}

// slowOpener delays its nth apps.connections.open call by delay (or until ctx ends): a Slack
// incident, a slow proxy. started is closed when that call begins.
type slowOpener struct {
	open    Opener
	nth     int32
	delay   time.Duration
	calls   atomic.Int32
	started chan struct{}
}

func (o *slowOpener) StartSocketModeContext(ctx context.Context) (*slack.SocketModeConnection, string, error) {
	if o.calls.Add(1) == o.nth {
		close(o.started)
		if err := watch.Sleep(ctx, o.delay); err != nil {
			return nil, "", err
		}
	}
	return o.open.StartSocketModeContext(ctx)
}

// A shutdown while a refresh drains the old connection (the next one is up) leaves the next
// connection for the consumer's last acks, not the one Slack asked to refresh and closes soon (the
// fake: 2 s after its disconnect frame): a slash command's ack written after that still arrives
// (Slack does not resend slash commands).
func TestShutdownDuringARefreshDrainKeepsTheNextConnection(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	a := startApp(t, fs, nil, Options{})
	time.Sleep(1100 * time.Millisecond) // a refresh, not a young connection's reconnect
	id := a.slashCommand(t, fs)
	fs.Disconnect("refresh_requested")
	asked := time.Now()
	eventually(t, "the next connection up (the old one is drained for 250 ms)", func() bool { return fs.Connections().Total == 2 })
	time.Sleep(50 * time.Millisecond)                          // the client's dial returns just after the fake took the connection
	a.shutdown(t)                                              // during the drain
	time.Sleep(time.Until(asked.Add(2300 * time.Millisecond))) // Slack has closed the refreshed connection
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := a.c.Ack(ctx, id, answer); err != nil { // the consumer's last ack, before Close
		t.Errorf("Ack after Run returned: %v", err)
	}
	a.c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if ackedWith(fs, id) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("the slash command was never acked (acks %+v): at shutdown during the drain, refresh closed the next connection and kept the one Slack was closing", fs.Acks())
}

// A failed apps.connections.open is retried after a backoff; the state says not connected
// meanwhile.
func TestConnectRetriesAfterAnError(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	fs.FailNext("apps.connections.open", "internal_error")
	start := time.Now()
	a := startApp(t, fs, nil, Options{})
	if d := time.Since(start); d < firstBackoff/2 {
		t.Errorf("connected %v after a failure, want a backoff of at least %v", d, firstBackoff/2)
	}
	if n := fs.CallCount("apps.connections.open"); n != 2 {
		t.Errorf("apps.connections.open called %d times, want 2", n)
	}
	s := a.statesSince(0)
	if len(s) != 4 || s[0] != (State{Attempt: 1}) || s[1].Err == nil || s[1].Backoff < firstBackoff/2 ||
		s[2] != (State{Attempt: 2}) || s[3] != (State{Connected: true}) {
		t.Errorf("states %+v: want attempt 1, its error and backoff, attempt 2, connected", s)
	}
	fs.PostUserMessage("D1", "U1", "", "hello")
	eventually(t, "the message read", func() bool { return len(a.received()) == 1 })
}

// Ack refuses what Slack would drop silently, and says so when no connection came before its
// context ended, or the client is closed.
func TestAckErrors(t *testing.T) {
	t.Parallel()
	s := New(nil, nil, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Ack(ctx, "e1", nil); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("Ack without a connection: %v", err)
	}
	s.Close()
	if err := s.Ack(context.Background(), "e1", nil); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Ack after Close: %v", err)
	}
	big := map[string]string{"text": strings.Repeat("x", maxAckSize)}
	if err := s.Ack(context.Background(), "e1", big); err == nil || !strings.Contains(err.Error(), "Slack drops") {
		t.Errorf("Ack of %d bytes: %v", maxAckSize, err)
	}
	if fatal(errors.New("invalid_auth")) == nil || fatal(errors.New("internal_error")) != nil {
		t.Error("fatal: invalid_auth must stop, internal_error retry")
	}
}

// A connection that ends young is replaced after a wait (Slack could be refusing them, and
// apps.connections.open is limited); one Slack asks to refresh, at once.
func TestYoungConnectionsReconnectAfterAWait(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	a := startApp(t, fs, nil, Options{})
	fs.DropConnections()
	dropped := time.Now()
	eventually(t, "a new connection", func() bool { return fs.Connections().Total == 2 && a.connected() })
	if d := time.Since(dropped); d < firstBackoff {
		t.Errorf("a connection dropped at once was replaced after %v, want at least %v", d, firstBackoff)
	}
	fs.Disconnect("refresh_requested")
	eventually(t, "a refreshed connection", func() bool { return fs.Connections().Total == 3 && a.connected() })
	if n := fs.CallCount("apps.connections.open"); n != 3 {
		t.Errorf("apps.connections.open called %d times, want 3", n)
	}
}

// A connection that got its hello and stayed up for healthyAfter worked: when it drops, the next
// one is dialled at once, however many dropped before (a flaky network, a proxy that cuts
// connections). Connections that drop at once (Slack refusing them) are replaced after a wait that
// doubles each time, so the client does not hammer apps.connections.open.
func TestReconnectWaitResetsAfterAHealthyConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		upFor   time.Duration // from connected to the drop
		drops   int
		healthy bool
	}{
		{"healthy connections", healthyAfter + 500*time.Millisecond, 3, true},
		{"connections dropped at once", 0, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeSlack(t, fakeslack.Config{})
			a := startApp(t, fs, nil, Options{})
			for i := range tc.drops {
				time.Sleep(tc.upFor)
				fs.DropConnections()
				dropped := time.Now()
				eventually(t, "a new connection", func() bool { return fs.Connections().Total == i+2 })
				wait := time.Since(dropped)
				switch want := firstBackoff << i; {
				case tc.healthy && wait >= firstBackoff/2:
					t.Errorf("drop %d: replaced after %v, want at once (the connection was healthy)", i+1, wait)
				case !tc.healthy && wait < want:
					t.Errorf("drop %d: replaced after %v, want at least %v (the wait doubles)", i+1, wait, want)
				}
				eventually(t, "connected", func() bool { return a.connected() && fs.Connections().Current == 1 })
			}
		})
	}
}

// The connection's state goes down as soon as it drops, not after the wait before the next one
// (readiness and metrics follow it).
func TestStateDownDuringTheWait(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	a := startApp(t, fs, nil, Options{})
	fs.DropConnections()
	dropped := time.Now()
	eventually(t, "state down", func() bool { return !a.connected() })
	if d := time.Since(dropped); d >= firstBackoff/2 {
		t.Errorf("state went down %v after the drop, want before the wait of at least %v ends", d, firstBackoff/2)
	}
	if c := fs.Connections(); c.Total != 1 {
		t.Errorf("connections %+v: the wait should still be running", c)
	}
	eventually(t, "up again", func() bool { return a.connected() && fs.Connections().Current == 1 })
}

// A slash command's ack written while the client reconnects waits for the new connection (Slack
// does not resend slash commands).
func TestSlashAckWaitsForTheNextConnection(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	a := startApp(t, fs, nil, Options{})
	id := a.slashCommand(t, fs)
	fs.DropConnections()
	eventually(t, "the connection gone", func() bool { return fs.Connections().Current == 0 })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := a.c.Ack(ctx, id, answer); err != nil { // between connections: the next comes after a wait of 0.5-1 s
		t.Fatalf("Ack: %v", err)
	}
	eventually(t, "the command acked on the next connection", func() bool {
		acks := fs.Acks()
		return len(acks) == 1 && acks[0].Conn == 2 && ackedWith(fs, id)
	})
}
