package slacksocket

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/zap"
)

// countingConn counts the writes that reach the network.
type countingConn struct {
	net.Conn
	writes atomic.Int32
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// Held writes wait for the next Read and then go out as one write, before anything written
// after them; unheld writes go out at once.
func TestHeldConn(t *testing.T) {
	near, far := net.Pipe() // synchronous: a Write returns once the far side has read it
	defer far.Close()
	counted := &countingConn{Conn: near}
	c := &heldConn{Conn: counted}
	defer c.Close()

	c.hold()
	for _, s := range []string{"ack1", "ack2", "ack3"} {
		if n, err := c.Write([]byte(s)); n != 4 || err != nil {
			t.Fatalf("held Write = %d, %v", n, err)
		}
	}
	c.release()
	if n := counted.writes.Load(); n != 0 {
		t.Fatalf("%d writes reached the network while held", n)
	}

	// The next Read sends them, in one write, and then reads.
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 16)
		n, err := c.Read(buf)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(buf[:n])
	}()
	buf := make([]byte, 64)
	_ = far.SetReadDeadline(time.Now().Add(waitTimeout))
	n, err := far.Read(buf)
	if err != nil || string(buf[:n]) != "ack1ack2ack3" {
		t.Fatalf("far side read %q, %v; want the three held writes together", buf[:n], err)
	}
	if _, err := far.Write([]byte("frame")); err != nil {
		t.Fatal(err)
	}
	if s := waitChan(t, "Read", got); s != "frame" {
		t.Fatalf("Read = %q", s)
	}
	if n := counted.writes.Load(); n != 1 {
		t.Errorf("%d writes for three held acks, want 1", n)
	}

	// Held, then unheld: the held bytes go first.
	c.hold()
	_, _ = c.Write([]byte("ack4"))
	c.release()
	done := make(chan error, 1)
	go func() { _, err := c.Write([]byte("pong")); done <- err }()
	var all []byte
	for len(all) < 8 {
		n, err := far.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, buf[:n]...)
	}
	if string(all) != "ack4pong" {
		t.Errorf("far side read %q, want the held ack before the pong", all)
	}
	if err := waitChan(t, "unheld Write", done); err != nil {
		t.Fatal(err)
	}
}

// A flush that fails fails the Read, so the reader drops the connection (Slack redelivers).
func TestHeldConnFlushErrorFailsTheRead(t *testing.T) {
	near, far := net.Pipe()
	far.Close()
	c := &heldConn{Conn: near}
	defer c.Close()
	c.hold()
	_, _ = c.Write([]byte("ack"))
	c.release()
	if _, err := c.Read(make([]byte, 8)); err == nil || (!errors.Is(err, io.ErrClosedPipe) && !errors.Is(err, os.ErrDeadlineExceeded)) {
		t.Errorf("Read after a failed flush: %v, want the write's error", err)
	}
	var nilConn *heldConn // not dialled with dialHeld: holding is a no-op
	nilConn.hold()
	nilConn.release()
	if err := nilConn.flush(); err != nil {
		t.Error(err)
	}
}

// Over TLS (wss://, as Slack is) the held writes are found under the TLS connection and the acks
// arrive, then a clean close.
func TestHeldAcksOverTLS(t *testing.T) {
	got := make(chan string, 10) // the acks and the close, at most 4
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for i := range 3 {
			_ = c.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"envelope_id":"e%d","type":"events_api","payload":{}}`, i))
		}
		for {
			_, m, err := c.ReadMessage()
			if err != nil {
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					got <- fmt.Sprintf("close %d", ce.Code)
				}
				return
			}
			got <- string(m)
		}
	}))
	defer srv.Close()
	s := New(nil, zap.NewNop(), Options{PingTimeout: time.Minute})
	s.dialer.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} // httptest's certificate
	conn, _, err := s.dialer.DialContext(t.Context(), "wss"+strings.TrimPrefix(srv.URL, "https"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if heldOf(conn) == nil {
		t.Fatal("no heldConn under the TLS connection")
	}
	s.conn = conn
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := s.read(ctx, conn); done <- err }()
	for i := range 3 {
		if a := waitChan(t, "ack", got); a != fmt.Sprintf(`{"envelope_id":"e%d"}`, i) {
			t.Errorf("ack %d = %s", i, a)
		}
		if f := waitChan(t, "frame for the consumer", s.Frames()); f.EnvelopeID != fmt.Sprintf("e%d", i) || !f.Acked {
			t.Errorf("frame %d handed over as %+v", i, f)
		}
	}
	cancel()
	waitChan(t, "the reader to stop", done)
	s.Close()
	if c := waitChan(t, "close frame", got); c != "close 1000" {
		t.Errorf("got %q, want a normal close", c)
	}
}
