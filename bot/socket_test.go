package bot

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmbot/llmbot/imagine"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// The loop's side of the socket (package slacksocket, where the socket's own tests are): what it
// acks, what it hands on at shutdown, and the state it reports.

// blockingImaginer holds the loop in Accept (which the loop calls itself) until release.
type blockingImaginer struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingImaginer) Accept(imagine.Request) (string, bool) {
	b.entered <- struct{}{}
	<-b.release
	return "ok", false
}

func (b *blockingImaginer) Run(context.Context, imagine.Request) error { return nil }

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

// firstBlocksImaginer holds the loop in its first Accept until release; later Accepts return at once.
type firstBlocksImaginer struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (f *firstBlocksImaginer) Accept(imagine.Request) (string, bool) {
	if f.calls.Add(1) == 1 {
		close(f.entered)
		<-f.release
	}
	return "ok", false
}

func (f *firstBlocksImaginer) Run(context.Context, imagine.Request) error { return nil }

// TestShutdownBetweenConnectionsDoesNotWaitPerAck: when shutdown comes while the socket waits
// to connect again, the acks of the slash commands still queued fail at once instead of each
// waiting its AckTimeout (2 s) for a connection that can no longer come: four queued commands
// would make an idle bot take 8 s to stop.
func TestShutdownBetweenConnectionsDoesNotWaitPerAck(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	im := &firstBlocksImaginer{entered: make(chan struct{}), release: make(chan struct{})}
	h := startBot(t, fs, &fakeReplier{}, im, Options{Grace: time.Second}) // AckTimeout: default 2 s
	fs.SlashCommand("C1", "U1", "/imagine", "one")
	waitChan(t, "the loop in Accept", im.entered)
	for range 3 {
		fs.SlashCommand("C1", "U1", "/imagine", "more")
	}
	h.waitFor(t, "the commands sent", func() bool {
		n := 0
		for _, e := range fs.Envelopes() {
			if !e.Sent.IsZero() {
				n++
			}
		}
		return n == 4
	})
	time.Sleep(50 * time.Millisecond) // read and queued by the socket
	fs.DropConnections()
	h.waitFor(t, "the connection gone", func() bool { return fs.Connections().Current == 0 })
	time.Sleep(100 * time.Millisecond) // the socket is in its wait before reconnecting (1 s)
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- h.shutdown(t) }()
	time.Sleep(20 * time.Millisecond)
	close(im.release)
	waitChan(t, "Run to return", errc)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("shutdown took %v with nothing to do (Grace 1 s): the queued commands' acks waited for a connection", took)
	}
}

// The bot's state and Hooks.Connection follow the socket's: a refresh is one more connection up
// and none down (Slack always had one), a dropped connection is down, then up again.
func TestConnectionStateFollowsTheSocket(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	var conns connCounter
	h := startBot(t, fs, &fakeReplier{}, nil, Options{Hooks: Hooks{Connection: conns.record}})
	time.Sleep(1100 * time.Millisecond) // a refresh, not a young connection's reconnect
	fs.Disconnect("refresh_requested")
	h.waitFor(t, "the refresh's connection", func() bool { ups, _ := conns.counts(); return ups == 2 })
	if ups, downs := conns.counts(); downs != 0 || !h.bot.State().Connected || h.bot.State().Reconnects != 1 {
		t.Errorf("after a refresh: %d ups, %d downs, state %+v; want 2 ups, no down, connected, 1 reconnect", ups, downs, h.bot.State())
	}
	fs.DropConnections()
	h.waitFor(t, "down and up again", func() bool { ups, downs := conns.counts(); return ups == 3 && downs == 1 })
	if s := h.bot.State(); !s.Connected || s.Reconnects != 2 {
		t.Errorf("after a drop: state %+v, want connected, 2 reconnects", s)
	}
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
