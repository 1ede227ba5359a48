package slacksocket

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// When Run ends while the client waits to connect again, no connection will come: acks fail at
// once instead of each waiting out its context for one (a bot with four slash commands queued
// would take their timeouts, one after the other, to stop).
func TestAckFailsAtOnceWhenRunEndsBetweenConnections(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	a := startApp(t, fs, nil, Options{})
	id := a.slashCommand(t, fs)
	fs.DropConnections()
	eventually(t, "the connection gone", func() bool { return fs.Connections().Current == 0 })
	time.Sleep(100 * time.Millisecond) // the client is in its wait before reconnecting (1 s)
	a.shutdown(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	err := a.c.Ack(ctx, id, answer)
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("Ack after Run ended between connections: %v, want shutting down", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Ack took %v to fail: it waited for a connection that cannot come", took)
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
	t.Parallel()
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
	c := New(stalledOpener{url: "ws://" + ln.Addr().String() + "/link"}, zaptest.NewLogger(t), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	conn := waitChan(t, "the dial", accepted)
	defer conn.Close()
	time.Sleep(100 * time.Millisecond) // the upgrade request is written; its answer never comes
	start := time.Now()
	cancel()
	select {
	case <-errc:
	case <-time.After(5 * time.Second):
		t.Errorf("Run still running 5 s after cancel: it waits out its %v handshake timeout", handshakeTimeout)
		<-errc
	}
	if took := time.Since(start); took > time.Second {
		t.Logf("Run returned %v after cancel", took)
	}
	c.Close()
}

// TestShutdownJustAfterTheDialConnects: a shutdown that comes as the TCP connection of a dial
// completes (before the handshake, whose deadline gorilla sets itself) still ends the dial at
// once, instead of waiting out the handshake timeout.
func TestShutdownJustAfterTheDialConnects(t *testing.T) {
	t.Parallel()
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
	s := New(stalledOpener{url: "ws://" + ln.Addr().String() + "/link"}, zaptest.NewLogger(t), Options{})
	s.dialer.HandshakeTimeout = 5 * time.Second
	s.dialer.NetDialContext = func(dctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(dctx, network, addr)
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
