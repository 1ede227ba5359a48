package ops

import (
	"sync"
	"time"
)

// Readiness is the state behind /readyz: ready when Slack accepted the bot token (auth.test)
// and the Socket Mode connection is up. It flips back to not ready while the connection is down
// (a refresh, a dropped socket) and ready again once it is back. Safe for concurrent use.
type Readiness struct {
	mu        sync.Mutex
	authKnown bool
	authOK    bool
	connected bool
	everUp    bool
	since     time.Time // when connected last changed
}

// NewReadiness returns a Readiness that is not ready: auth not checked, not connected.
func NewReadiness() *Readiness { return &Readiness{since: time.Now()} }

// Auth records the result of auth.test (nil: the token is good). The error itself is never
// shown (the logs have it); /readyz only says that Slack auth failed.
func (r *Readiness) Auth(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.authKnown, r.authOK = true, err == nil
}

// Connection records that the Socket Mode connection went up or down. Its signature is that of
// bot.Hooks.Connection.
func (r *Readiness) Connection(up bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if up != r.connected {
		r.connected, r.since = up, time.Now()
	}
	if up {
		r.everUp = true
	}
}

// Ready reports whether the bot can work and, when it cannot, a short reason (for /readyz).
func (r *Readiness) Ready() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.authKnown:
		return false, "Slack auth not checked yet"
	case !r.authOK:
		return false, "Slack rejected the bot token (see the logs)"
	case !r.everUp:
		return false, "Socket Mode not connected yet"
	case !r.connected:
		return false, "Socket Mode disconnected for " + time.Since(r.since).Round(time.Second).String()
	}
	return true, ""
}
