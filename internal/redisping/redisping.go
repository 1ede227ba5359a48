// Package redisping tells when a redis-server started by the tests or the load tool answers: PING
// over a new connection, as an inline command, so that neither needs a client library for it.
package redisping

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// every is how often Wait asks.
const every = 20 * time.Millisecond

// Ping sends PING to addr and wants +PONG, or -NOAUTH from a server started with a password:
// either way it answers.
func Ping(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Wait pings addr until it answers, the server exits (exited is closed) or timeout passes.
func Wait(ctx context.Context, addr string, exited <-chan struct{}, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if Ping(ctx, addr) == nil {
			return nil
		}
		select {
		case <-exited:
			return errors.New("redis-server exited before answering")
		case <-ctx.Done():
			return fmt.Errorf("no answer to PING within %v", timeout)
		case <-tick.C:
		}
	}
}
