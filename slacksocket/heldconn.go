package slacksocket

import (
	"context"
	"crypto/tls"
	"net"
	"sync"

	"github.com/gorilla/websocket"
)

// heldConn is a Socket Mode connection's TCP connection (under TLS, if any) that can hold
// writes back: the reader's acks wait in memory until the reader next reads from the network
// (or anything else is written), then go out in one write. A burst of envelopes that arrived
// together is read from the buffer frame after frame and acked with one write syscall instead
// of one per envelope; an envelope that arrived alone is acked as soon as the reader has
// handed it over and goes back to reading.
type heldConn struct {
	net.Conn

	mu      sync.Mutex
	holding bool   // Writes are held (only around the reader's acks)
	held    []byte // what they wrote, in order
}

// dialHeld is a websocket.Dialer's NetDialContext that makes heldConns.
func dialHeld(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &heldConn{Conn: c}, nil
}

// heldOf returns ws's heldConn, or nil if it was not dialled with dialHeld.
func heldOf(ws *websocket.Conn) *heldConn {
	c := ws.NetConn()
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	h, _ := c.(*heldConn)
	return h
}

// hold makes the writes until release wait for the next Read or unheld Write.
func (c *heldConn) hold() {
	if c != nil {
		c.mu.Lock()
		c.holding = true
		c.mu.Unlock()
	}
}

func (c *heldConn) release() {
	if c != nil {
		c.mu.Lock()
		c.holding = false
		c.mu.Unlock()
	}
}

// flush writes what is held.
func (c *heldConn) flush() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

func (c *heldConn) flushLocked() error {
	if len(c.held) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	return err
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holding {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// Read sends what is held first: the reader is about to wait for the network.
func (c *heldConn) Read(p []byte) (int, error) {
	if err := c.flush(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}
