package bot

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

func TestReadHead(t *testing.T) {
	for _, tc := range []struct {
		name, frame string
		want        head
	}{
		{"slack order", `{"envelope_id":"1d2c-4e","payload":{"type":"event_callback","event":{"type":"app_mention"}},"type":"events_api","accepts_response_payload":false,"retry_attempt":0,"retry_reason":""}`,
			head{id: "1d2c-4e", typ: "events_api"}},
		{"type after a payload full of traps", `{"payload":{"text":"\"envelope_id\":\"no\" } ] {","type":"x","a":[1,{"type":"y"}],"n":-1.5e3,"t":true,"z":null},"envelope_id":"e1","type":"interactive"}`,
			head{id: "e1", typ: "interactive"}},
		{"spaces", " \n{ \"type\" : \"slash_commands\" , \"envelope_id\" : \"s1\" } ", head{id: "s1", typ: "slash_commands"}},
		{"hello", `{"type":"hello","num_connections":1,"debug_info":{"host":"applink-1"},"connection_info":{"app_id":"A1"}}`, head{typ: "hello"}},
		{"disconnect", `{"type":"disconnect","reason":"refresh_requested","debug_info":{"host":"applink-1"}}`, head{typ: "disconnect", reason: "refresh_requested"}},
		{"escaped id", `{"envelope_id":"a\"b\u00e9","type":"events_api"}`, head{id: "a\"bé", typ: "events_api"}},
		{"null id", `{"envelope_id":null,"type":"events_api"}`, head{typ: "events_api"}},
		{"last of a repeated key", `{"type":"a","type":"b"}`, head{typ: "b"}},
		{"empty object", `{}`, head{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readHead([]byte(tc.frame))
			if err != nil || got != tc.want {
				t.Errorf("readHead = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"type":1}`, `{"type":"x"`, `{"type" "x"}`, `{"payload":{"a":"b}`, `{"type":"x",}`, `{type:"x"}`, `{"a":}`} {
		if h, err := readHead([]byte(bad)); err == nil {
			t.Errorf("readHead(%q) = %+v, want an error", bad, h)
		}
	}
}

// headByJSON reads the same fields as readHead with encoding/json (exact key match, the last
// of repeated keys, null as ""). Frames that spell one of the keys with escapes ("envelope\u005fid")
// are not compared: readHead matches keys as written (Slack writes them plainly); such a frame is
// acked by the loop instead, after decoding.
func headByJSON(frame []byte) (head, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(frame, &m) != nil {
		return head{}, false
	}
	var h head
	for key, dst := range map[string]*string{"envelope_id": &h.id, "type": &h.typ, "reason": &h.reason} {
		if _, ok := m[key]; ok && !strings.Contains(string(frame), `"`+key+`"`) {
			return head{}, false // spelt with escapes
		}
		if v, ok := m[key]; ok && string(v) != "null" {
			if json.Unmarshal(v, dst) != nil {
				return head{}, false
			}
		}
	}
	return h, true
}

// readHead agrees with encoding/json on every input encoding/json accepts whose keys are written
// without escapes. (It may accept some invalid JSON, which the loop's decoding then rejects.)
func FuzzReadHead(f *testing.F) {
	for _, s := range []string{sampleMention, sampleMessage, sampleCommand, sampleClick,
		`{"type":"disconnect","reason":"warning"}`, `{"envelope_id":"a\\u0022b","payload":[{"x":"}"}],"type":"t"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		want, ok := headByJSON(frame)
		if !ok {
			return
		}
		got, err := readHead(frame)
		if err != nil || got != want {
			t.Fatalf("readHead(%q) = %+v, %v; encoding/json reads %+v", frame, got, err, want)
		}
	})
}

func TestAckFrame(t *testing.T) {
	for _, id := range []string{"1d2c8d5e-4e2b-4f1a-9a77-6b1c0e3d2f10", `odd "id" \ é`, ""} {
		var got struct {
			EnvelopeID *string `json:"envelope_id"`
		}
		frame := ackFrame(id)
		if err := json.Unmarshal(frame, &got); err != nil || got.EnvelopeID == nil || *got.EnvelopeID != id {
			t.Errorf("ackFrame(%q) = %s (%v)", id, frame, err)
		}
	}
}

// blockingImaginer holds the loop in Accept (which the loop calls itself) until release.
type blockingImaginer struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingImaginer) Accept(handlers.ImagineRequest) (string, bool) {
	b.entered <- struct{}{}
	<-b.release
	return "ok", false
}

func (b *blockingImaginer) Run(context.Context, handlers.ImagineRequest) error { return nil }

// The socket acks every envelope as it reads it, before the loop decodes it: while the loop is
// held up, envelopes behind it are acked all the same, and handled once it goes on.
func TestEnvelopesAckedWhileTheLoopIsBusy(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r := &fakeReplier{}
	im := &blockingImaginer{entered: make(chan struct{}), release: make(chan struct{})}
	h := startBot(t, fs, r, im, Options{})

	cmd := fs.SlashCommand("C1", "U1", "/imagine", "a fox")
	waitChan(t, "the loop in Accept", im.entered)
	for range 5 {
		fs.PostUserMessage("D1", "U1", "", "hello")
	}
	h.waitFor(t, "the five messages acked", func() bool { return len(fs.Acks()) == 5 })
	if n := len(r.requests()); n != 0 {
		t.Fatalf("%d replies started while the loop was held", n)
	}
	for _, a := range fs.Acks() {
		if a.Type != "events_api" || a.Payload != nil {
			t.Errorf("ack %+v: want the events_api envelopes, without payload", a)
		}
	}
	close(im.release)
	h.waitFor(t, "the five messages answered", func() bool { return len(r.requests()) == 5 })
	h.waitFor(t, "the command acked by the loop", func() bool { return len(fs.Acks()) == 6 })
	if a := fs.Acks()[5]; !strings.Contains(string(a.Payload), `"text":"ok"`) {
		t.Errorf("command ack %+v, want the Accept text as payload (response_url %s)", a, cmd)
	}
}

// At shutdown nothing the socket acked is lost: envelopes read before ctx ended are handled
// (here: still queued behind a busy loop when Run is cancelled).
func TestShutdownHandlesWhatWasAcked(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r := &fakeReplier{}
	im := &blockingImaginer{entered: make(chan struct{}), release: make(chan struct{})}
	h := startBot(t, fs, r, im, Options{Grace: 5 * time.Second})

	fs.SlashCommand("C1", "U1", "/imagine", "a fox")
	waitChan(t, "the loop in Accept", im.entered)
	for range 3 {
		fs.PostUserMessage("D1", "U1", "", "hello")
	}
	h.waitFor(t, "the three messages acked", func() bool { return len(fs.Acks()) == 3 })
	errc := make(chan error, 1)
	go func() { errc <- h.shutdown(t) }()
	time.Sleep(50 * time.Millisecond) // let the cancel reach the socket while the loop is held
	close(im.release)
	if err := waitChan(t, "Run to return", errc); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := len(r.requests()); n != 3 {
		t.Errorf("%d of the 3 acked messages answered", n)
	}
	// The fake reads on its own goroutine: what the bot wrote before Run returned arrives soon after.
	h.waitFor(t, "the command's ack too, on the connection kept open for it", func() bool { return len(fs.Acks()) == 4 })
	h.waitFor(t, "the connection closed", func() bool { return fs.Connections().Current == 0 })
}

// A disconnect "warning" announces a refresh (~10 s later); the connection still works and is
// kept until Slack asks for the refresh.
func TestDisconnectWarningKeepsTheConnection(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r := &fakeReplier{}
	h := startBot(t, fs, r, nil, Options{})
	fs.Disconnect("warning")
	fs.PostUserMessage("D1", "U1", "", "hello")
	h.waitFor(t, "the message answered", func() bool { return len(r.requests()) == 1 })
	if c := fs.Connections(); c.Total != 1 || c.Current != 1 {
		t.Errorf("connections %+v after a warning: want the first one kept", c)
	}
	fs.Disconnect("refresh_requested")
	h.waitFor(t, "a new connection", func() bool {
		c := fs.Connections()
		return c.Total == 2 && c.Current == 1 && h.bot.State().Connected
	})
}

// A refresh opens the next connection before the old one closes: Slack always has a connection to
// send the app's envelopes to (a slash command or a click sent while there is none fails), and
// the bot never says it is down. An envelope Slack sent on the old connection after asking for
// the refresh is still read and acked there.
func TestRefreshOpensTheNextConnectionFirst(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{RefreshGrace: time.Second})
	r := &fakeReplier{}
	var conns connCounter
	h := startBot(t, fs, r, nil, Options{Hooks: Hooks{Connection: conns.record}})
	time.Sleep(1100 * time.Millisecond) // a refresh within a second of connecting waits first (Run)
	fs.Disconnect("refresh_requested")
	fs.PostUserMessage("D1", "U1", "", "sent as the refresh began")
	h.waitFor(t, "the message answered on a new connection", func() bool {
		c := fs.Connections()
		ups, _ := conns.counts() // the refresh reports the next connection after it closed the old one
		return len(r.requests()) == 1 && c.Total == 2 && c.Current == 1 && ups == 2
	})
	if c := fs.Connections(); c.Gaps != 0 {
		t.Errorf("connections %+v: Slack was left without a connection %d times, want never", c, c.Gaps)
	}
	if ups, downs := conns.counts(); ups != 2 || downs != 0 {
		t.Errorf("Hooks.Connection: %d ups, %d downs; want 2 ups (the first connection, the refresh's: a reconnect for the metrics) and no down", ups, downs)
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
	h.waitFor(t, "the next message answered", func() bool { return len(r.requests()) == 2 })
	if n := fs.CallCount("apps.connections.open"); n != 2 {
		t.Errorf("apps.connections.open called %d times, want 2", n)
	}
}

// A refresh whose dial fails falls back to a reconnect (with the usual retries), and says the
// bot is down meanwhile.
func TestRefreshThatCannotDialReconnects(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r := &fakeReplier{}
	var conns connCounter
	h := startBot(t, fs, r, nil, Options{Hooks: Hooks{Connection: conns.record}})
	time.Sleep(1100 * time.Millisecond)
	fs.FailNext("apps.connections.open", "internal_error")
	fs.Disconnect("refresh_requested")
	h.waitFor(t, "down and up again", func() bool {
		ups, downs := conns.counts()
		return ups == 2 && downs == 1 && h.bot.State().Connected && fs.Connections().Total == 2
	})
	fs.PostUserMessage("D1", "U1", "", "hello")
	h.waitFor(t, "the message answered", func() bool { return len(r.requests()) == 1 })
	if n := fs.CallCount("apps.connections.open"); n != 3 {
		t.Errorf("apps.connections.open called %d times, want 3 (the first, the refresh that failed, its retry)", n)
	}
}

// While a refresh's dial is slow (apps.connections.open or the handshake: up to 30 s + 30 s), the old
// connection is still read; once Slack closes it the bot has no connection, and its state (so
// /readyz and the connected gauge) says so until the next one is up.
func TestRefreshDownWhenTheOldConnectionEndsFirst(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	op := &slowOpener{nth: 2, delay: 5 * time.Second, started: make(chan struct{})}
	h := startBotWith(t, fs, func(o SocketOpener) SocketOpener { op.open = o; return op }, &fakeReplier{}, nil, Options{})
	time.Sleep(1100 * time.Millisecond) // a refresh, not a young connection's reconnect
	fs.Disconnect("refresh_requested")
	waitChan(t, "the refresh's dial", op.started)
	// The fake closes a connection 2 s after its disconnect frame.
	h.waitFor(t, "Slack closed the old connection", func() bool { return fs.Connections().Current == 0 })
	time.Sleep(200 * time.Millisecond)
	if fs.Connections().Current == 0 && h.bot.State().Connected {
		t.Errorf("Slack has no connection of the bot (the refresh's dial hangs), but State().Connected = true: /readyz says ready, the connected gauge 1")
	}
	h.waitFor(t, "connected again", func() bool { return h.bot.State().Connected && fs.Connections().Current == 1 })
}

// A slash command's ack the loop writes during a slow refresh dial, after Slack closed the old
// connection, waits for the next connection (as in TestSlashAckWaitsForTheNextConnection), not
// written into the dead one: Slack does not resend slash commands.
func TestSlashAckDuringARefreshAfterTheOldConnectionEnded(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	op := &slowOpener{nth: 2, delay: 4 * time.Second, started: make(chan struct{})}
	im := &blockingImaginer{entered: make(chan struct{}), release: make(chan struct{})}
	h := startBotWith(t, fs, func(o SocketOpener) SocketOpener { op.open = o; return op }, &fakeReplier{}, im, Options{AckTimeout: waitTimeout})
	time.Sleep(1100 * time.Millisecond)
	fs.SlashCommand("C1", "U1", "/imagine", "a fox")
	waitChan(t, "the loop in Accept", im.entered)
	fs.Disconnect("refresh_requested")
	waitChan(t, "the refresh's dial", op.started)
	h.waitFor(t, "Slack closed the old connection", func() bool { return fs.Connections().Current == 0 })
	close(im.release) // the loop acks now, during the refresh's dial
	h.waitFor(t, "connected again", func() bool { return fs.Connections().Current == 1 })
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if a := fs.Acks(); len(a) == 1 && strings.Contains(string(a[0].Payload), `"text":"ok"`) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("the slash command was never acked (acks %+v): its ack went to the connection being refreshed, after Slack closed it", fs.Acks())
}

// A refresh whose apps.connections.open gets a 429 falls back to a reconnect after the Retry-After
// Slack gave, not at once.
func TestRefreshRateLimitedWaitsRetryAfter(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	h := startBot(t, fs, &fakeReplier{}, nil, Options{})
	time.Sleep(1100 * time.Millisecond)
	fs.RateLimitNext("apps.connections.open", 3*time.Second)
	fs.Disconnect("refresh_requested")
	h.waitFor(t, "connected again", func() bool {
		return len(fs.CallsTo("apps.connections.open")) == 3 && h.bot.State().Connected && fs.Connections().Current == 1
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
	open    SocketOpener
	nth     int32
	delay   time.Duration
	calls   atomic.Int32
	started chan struct{}
}

func (o *slowOpener) StartSocketModeContext(ctx context.Context) (*slack.SocketModeConnection, string, error) {
	if o.calls.Add(1) == o.nth {
		close(o.started)
		if err := sleep(ctx, o.delay); err != nil {
			return nil, "", err
		}
	}
	return o.open.StartSocketModeContext(ctx)
}

// A shutdown while a refresh drains the old connection (the next one is up) leaves the next
// connection for the loop's last acks, not the one Slack asked to refresh and closes soon (the
// fake: 2 s after its disconnect frame): a slash command's ack the loop writes after that still
// arrives (Slack does not resend slash commands).
func TestShutdownDuringARefreshDrainKeepsTheNextConnection(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	im := &firstBlocksImaginer{entered: make(chan struct{}), release: make(chan struct{})}
	h := startBot(t, fs, &fakeReplier{}, im, Options{AckTimeout: waitTimeout, Grace: time.Second})
	time.Sleep(1100 * time.Millisecond) // a refresh, not a young connection's reconnect
	fs.SlashCommand("C1", "U1", "/imagine", "a fox")
	waitChan(t, "the loop in Accept", im.entered)
	fs.Disconnect("refresh_requested")
	asked := time.Now()
	h.waitFor(t, "the next connection up (the old one is drained for 250 ms)", func() bool { return fs.Connections().Total == 2 })
	errc := make(chan error, 1)
	go func() { errc <- h.shutdown(t) }()                      // during the drain
	time.Sleep(time.Until(asked.Add(2300 * time.Millisecond))) // Slack has closed the refreshed connection
	close(im.release)                                          // the loop acks the command now
	waitChan(t, "Run to return", errc)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if a := fs.Acks(); len(a) == 1 && strings.Contains(string(a[0].Payload), `"text":"ok"`) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("the slash command was never acked (acks %+v): at shutdown during the drain, refresh closed the next connection and kept the one Slack was closing", fs.Acks())
}

// connCounter counts what Hooks.Connection reports: connections up, and the connection down.
type connCounter struct {
	mu        sync.Mutex
	ups, down int
}

func (c *connCounter) record(up bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if up {
		c.ups++
	} else {
		c.down++
	}
}

func (c *connCounter) counts() (ups, downs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ups, c.down
}

// A failed apps.connections.open is retried after a backoff; the bot says it is not connected
// meanwhile.
func TestConnectRetriesAfterAnError(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	fs.FailNext("apps.connections.open", "internal_error")
	start := time.Now()
	r := &fakeReplier{}
	h := startBot(t, fs, r, nil, Options{})
	if d := time.Since(start); d < firstBackoff/2 {
		t.Errorf("connected %v after a failure, want a backoff of at least %v", d, firstBackoff/2)
	}
	if n := fs.CallCount("apps.connections.open"); n != 2 {
		t.Errorf("apps.connections.open called %d times, want 2", n)
	}
	fs.PostUserMessage("D1", "U1", "", "hello")
	h.waitFor(t, "the message answered", func() bool { return len(r.requests()) == 1 })
}

// Frames the loop cannot use are dropped without losing the connection: text that is not JSON
// (ignored), an envelope of an unknown type (acked by the socket), a slash command whose
// payload does not decode (acked by the loop, without payload).
func TestUnusableFramesKeepTheConnection(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r := &fakeReplier{}
	h := startBot(t, fs, r, &fakeImaginer{text: "x"}, Options{})
	fs.SendRaw([]byte(`not json`))
	unknown := fs.SendRaw([]byte(`{"envelope_id":"odd-1","type":"something_new","payload":{}}`))
	badCmd := fs.SendRaw([]byte(`{"envelope_id":"cmd-1","type":"slash_commands","accepts_response_payload":true,"payload":{"command":["not","a","string"]}}`))
	fs.PostUserMessage("D1", "U1", "", "hello")
	h.waitFor(t, "the message answered", func() bool { return len(r.requests()) == 1 })
	h.waitFor(t, "the odd envelopes acked", func() bool { return acked(fs, unknown) && acked(fs, badCmd) })
	for _, a := range fs.Acks() {
		if a.EnvelopeID == badCmd && a.Payload != nil {
			t.Errorf("bad command acked with payload %s", a.Payload)
		}
	}
	if c := fs.Connections(); c.Total != 1 {
		t.Errorf("%d connections: an unusable frame cost the connection", c.Total)
	}
}

// Ack refuses what Slack would drop silently, and says so when no connection came before its
// context ended, or the socket is closed.
func TestAckErrors(t *testing.T) {
	s := newSocket(nil, nil, 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Ack(ctx, "e1", nil); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("Ack without a connection: %v", err)
	}
	s.close()
	if err := s.Ack(context.Background(), "e1", nil); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Ack after close: %v", err)
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
	fs := newFakeSlack(t, fakeslack.Config{})
	h := startBot(t, fs, &fakeReplier{}, nil, Options{})
	fs.DropConnections()
	dropped := time.Now()
	h.waitFor(t, "a new connection", func() bool { return fs.Connections().Total == 2 && h.bot.State().Connected })
	if d := time.Since(dropped); d < firstBackoff {
		t.Errorf("a connection dropped at once was replaced after %v, want at least %v", d, firstBackoff)
	}
	fs.Disconnect("refresh_requested")
	h.waitFor(t, "a refreshed connection", func() bool { return fs.Connections().Total == 3 && h.bot.State().Connected })
	if n := fs.CallCount("apps.connections.open"); n != 3 {
		t.Errorf("apps.connections.open called %d times, want 3", n)
	}
}

// A connection that got its hello and stayed up for healthyAfter worked: when it drops, the next
// one is dialled at once, however many dropped before (a flaky network, a proxy that cuts
// connections). Connections that drop at once (Slack refusing them) are replaced after a wait that
// doubles each time, so the bot does not hammer apps.connections.open.
func TestReconnectWaitResetsAfterAHealthyConnection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		upFor   time.Duration // from the bot connected to the drop
		drops   int
		healthy bool
	}{
		{"healthy connections", healthyAfter + 500*time.Millisecond, 3, true},
		{"connections dropped at once", 0, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeSlack(t, fakeslack.Config{})
			h := startBot(t, fs, &fakeReplier{}, nil, Options{})
			for i := range tc.drops {
				time.Sleep(tc.upFor)
				fs.DropConnections()
				dropped := time.Now()
				h.waitFor(t, "a new connection", func() bool { return fs.Connections().Total == i+2 })
				wait := time.Since(dropped)
				switch want := firstBackoff << i; {
				case tc.healthy && wait >= firstBackoff/2:
					t.Errorf("drop %d: replaced after %v, want at once (the connection was healthy)", i+1, wait)
				case !tc.healthy && wait < want:
					t.Errorf("drop %d: replaced after %v, want at least %v (the wait doubles)", i+1, wait, want)
				}
				h.waitFor(t, "connected", func() bool { return h.bot.State().Connected && fs.Connections().Current == 1 })
			}
		})
	}
}

// The connection's state goes down as soon as it drops, not after the wait before the next one
// (readiness and metrics follow it).
func TestStateDownDuringTheWait(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	h := startBot(t, fs, &fakeReplier{}, nil, Options{})
	fs.DropConnections()
	dropped := time.Now()
	h.waitFor(t, "state down", func() bool { return !h.bot.State().Connected })
	if d := time.Since(dropped); d >= firstBackoff/2 {
		t.Errorf("state went down %v after the drop, want before the wait of at least %v ends", d, firstBackoff/2)
	}
	if c := fs.Connections(); c.Total != 1 {
		t.Errorf("connections %+v: the wait should still be running", c)
	}
	h.waitFor(t, "up again", func() bool { return h.bot.State().Connected && fs.Connections().Current == 1 })
}

// A slash command's ack that the loop writes while the socket reconnects waits for the new
// connection (Slack does not resend slash commands).
func TestSlashAckWaitsForTheNextConnection(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	im := &blockingImaginer{entered: make(chan struct{}), release: make(chan struct{})}
	h := startBot(t, fs, &fakeReplier{}, im, Options{AckTimeout: waitTimeout})
	fs.SlashCommand("C1", "U1", "/imagine", "a fox")
	waitChan(t, "the loop in Accept", im.entered)
	fs.DropConnections()
	h.waitFor(t, "the connection gone", func() bool { return fs.Connections().Current == 0 })
	close(im.release) // the loop acks now, most likely between connections (the next one comes after a wait of 0.5-1 s)
	h.waitFor(t, "the command acked on the next connection", func() bool {
		a := fs.Acks()
		return len(a) == 1 && a[0].Conn == 2 && strings.Contains(string(a[0].Payload), `"text":"ok"`)
	})
}
