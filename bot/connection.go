package bot

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/slacksocket"
	"github.com/llmbot/llmbot/threads"
)

// connection is the Socket Mode connection's state as the bot follows it, for readiness checks.
type connection struct {
	log  *zap.Logger
	hook func(connected bool) // Hooks.Connection; nil: none
	// threads is made stale when a connection comes up after none was (nil: no cache).
	threads *threads.Cache

	mu    sync.Mutex
	state State
}

// get returns the connection state. Safe for concurrent use.
func (c *connection) get() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// follow follows the connection's state (slacksocket.Options.State).
func (c *connection) follow(st slacksocket.State) {
	switch {
	case st.Connected:
		c.mu.Lock()
		c.state.Reconnects = st.Connection
		c.mu.Unlock()
		c.setConnected(true)
		c.log.Info("socket mode connected", zap.Int("reconnects", st.Connection))
	case st.Err != nil:
		c.log.Warn("socket mode connection failed", zap.Int("attempt", st.Attempt), zap.Duration("backoff", st.Backoff), zap.Error(st.Err))
	default:
		c.setConnected(false)
		c.log.Debug("socket mode connecting")
	}
}

// setConnected records the connection going up (a new connection, maybe replacing another: every
// one is reported) or down (reported once).
func (c *connection) setConnected(up bool) {
	c.mu.Lock()
	changed := c.state.Connected != up
	if changed {
		c.state.Connected = up
		c.state.Since = time.Now()
	}
	c.mu.Unlock()
	if changed && up {
		// Events Slack sent while no connection was up reached nobody (this is the first
		// connection too): every entry of the thread cache is read again. Made here, in the
		// socket's goroutine, before the new connection's first frame is read.
		if err := c.threads.Gap(context.Background()); err != nil {
			c.log.Warn("thread cache: a gap in the connection could not be recorded", zap.Error(err))
		}
	}
	if (changed || up) && c.hook != nil {
		c.hook(up)
	}
}
