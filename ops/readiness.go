package ops

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// Readiness is the state behind /readyz: ready when Slack accepted the bot token (auth.test)
// and the Socket Mode connection is up. It flips back to not ready while the connection is down
// (a dropped socket; a refresh only when the old connection ends before the next is up) and ready
// again once it is back, and, with RecheckAuth, when
// Slack stops accepting the bot token. Safe for concurrent use.
type Readiness struct {
	mu        sync.Mutex
	authKnown bool
	authOK    bool
	connected bool
	everUp    bool
	since     time.Time // when connected last changed
	degraded  bool      // shared state (Redis) unreachable: ready, but said
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

// Degraded records that the replicas' shared state (Redis) cannot be reached (true) or can again.
// The bot answers on with its own state meanwhile, so it stays ready; /readyz says so.
func (r *Readiness) Degraded(degraded bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.degraded = degraded
}

// Ready reports whether the bot can work and, when it cannot, a short reason (for /readyz). A bot
// that works degraded is ready, with the reason why it is degraded.
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
	case r.degraded:
		return true, "Redis unreachable: answering with this replica's own state"
	}
	return true, ""
}

// authCheckTimeout bounds one RecheckAuth call.
const authCheckTimeout = 20 * time.Second

// rejectedToken are Slack's answers to auth.test that mean the bot token no longer works.
var rejectedToken = map[string]bool{
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true, "token_expired": true,
}

// RecheckAuth calls check (auth.test) every interval until ctx ends, so that /readyz also tells
// when the bot token stops working while the bot runs: when the app is uninstalled, Slack
// revokes the bot token, but Socket Mode (the app-level token) may go on connecting. Only
// Slack's own verdict counts: success marks auth good, an error wrapping a
// slack.SlackErrorResponse that rejects the token (invalid_auth, token_revoked, ...) marks it
// failed, and any other error (network, rate limit, timeout, Slack's internal errors) leaves it
// as it was. Each call is bounded by 20s or interval, whichever is shorter.
func (r *Readiness) RecheckAuth(ctx context.Context, interval time.Duration, check func(context.Context) error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cctx, cancel := context.WithTimeout(ctx, min(interval, authCheckTimeout))
		err := check(cctx)
		cancel()
		var se slack.SlackErrorResponse
		switch {
		case err == nil:
			r.Auth(nil)
		case errors.As(err, &se) && rejectedToken[se.Err]:
			r.Auth(err)
		}
	}
}
