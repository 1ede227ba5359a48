package bot

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// firstBlocksImaginer holds the loop in its first Accept until release; later Accepts return at once.
type firstBlocksImaginer struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (f *firstBlocksImaginer) Accept(handlers.ImagineRequest) (string, bool) {
	if f.calls.Add(1) == 1 {
		close(f.entered)
		<-f.release
	}
	return "ok", false
}

func (f *firstBlocksImaginer) Run(context.Context, handlers.ImagineRequest) error { return nil }

// TestShutdownBetweenConnectionsDoesNotWaitPerAck: when shutdown comes while the socket waits
// to connect again, the acks of the slash commands still queued fail at once instead of each
// waiting its AckTimeout (2 s) for a connection that can no longer come (found by review: four
// queued commands made an idle bot take 8 s to stop).
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

// stalledOpener answers apps.connections.open with the URL of a server that accepts the
// connection but never answers the WebSocket upgrade (a hung proxy or applink host).
type stalledOpener struct{ url string }

func (o stalledOpener) StartSocketModeContext(context.Context) (*slack.SocketModeConnection, string, error) {
	return &slack.SocketModeConnection{URL: o.url}, o.url, nil
}

// TestShutdownDuringStalledHandshake: shutdown does not wait for a WebSocket upgrade that never
// gets an answer (gorilla bounds that read by its 30 s handshake timeout only, not by the context).
func TestShutdownDuringStalledHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- c // read nothing, answer nothing
		}
	}()
	b := newBot(stalledOpener{url: "ws://" + ln.Addr().String() + "/link"}, Identity{UserID: "UBOT"}, &fakeReplier{}, nil, nil,
		zaptest.NewLogger(t), Options{Grace: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Run(ctx) }()
	c := waitChan(t, "the dial", accepted)
	defer c.Close()
	time.Sleep(100 * time.Millisecond) // the upgrade request is written; its answer never comes
	start := time.Now()
	cancel()
	select {
	case <-errc:
	case <-time.After(5 * time.Second):
		t.Errorf("Run still running 5 s after cancel (Grace 1 s): the socket waits out its %v handshake timeout", handshakeTimeout)
		<-errc
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Logf("Run returned %v after cancel", took)
	}
}

// TestShutdownJustAfterTheDialConnects: a shutdown that comes as the TCP connection of a dial
// completes (before the handshake, whose deadline gorilla sets itself) still ends the dial at
// once (found by review: it waited out the handshake timeout).
func TestShutdownJustAfterTheDialConnects(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // never answers the upgrade
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	s := newSocket(stalledOpener{url: "ws://" + ln.Addr().String() + "/link"}, zaptest.NewLogger(t), 0, nil)
	s.dialer.HandshakeTimeout = 5 * time.Second
	s.dialer.NetDialContext = func(dctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialHeld(dctx, network, addr)
		cancel()                          // shutdown, just as the connect completes
		time.Sleep(50 * time.Millisecond) // the AfterFunc runs before dial's wrapper sees c
		return c, err
	}
	start := time.Now()
	_, err = s.dial(ctx)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("dial returned %v after %v: shutdown waited out the handshake timeout", err, took)
	}
}
