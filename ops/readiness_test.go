package ops_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/ops"
)

// RecheckAuth: a revoked token turns the bot not ready; a network failure or a rate limit changes
// nothing; a good answer makes it ready again. Each check is bounded.
func TestRecheckAuth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = time.Minute
		r := ops.NewReadiness()
		r.Auth(nil)
		r.Connection(true)

		answers := make(chan error) // the next auth.test result, given by the test
		var deadlines []time.Duration
		check := func(ctx context.Context) error {
			d, _ := ctx.Deadline()
			deadlines = append(deadlines, time.Until(d))
			return <-answers
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.RecheckAuth(ctx, every, check)
		}()

		steps := []struct {
			name   string
			answer error
			ready  bool
		}{
			{"token good", nil, true},
			{"token revoked", fmt.Errorf("auth.test: %w", slack.SlackErrorResponse{Err: "token_revoked"}), false},
			{"network down", errors.New("auth.test: dial tcp: connection refused"), false},
			{"Slack's internal error", slack.SlackErrorResponse{Err: "internal_error"}, false},
			{"token good again", nil, true},
			{"rate limited", &slack.RateLimitedError{RetryAfter: time.Second}, true},
			{"invalid_auth", slack.SlackErrorResponse{Err: "invalid_auth"}, false},
		}
		for _, s := range steps {
			time.Sleep(every)
			answers <- s.answer
			synctest.Wait()
			ready, reason := r.Ready()
			if ready != s.ready {
				t.Errorf("%s: ready = %v (%q), want %v", s.name, ready, reason, s.ready)
			}
			if !ready && !strings.Contains(reason, "Slack rejected the bot token") {
				t.Errorf("%s: reason %q, want the token named", s.name, reason)
			}
		}
		cancel()
		<-done
		for i, d := range deadlines {
			if d <= 0 || d > 20*time.Second {
				t.Errorf("check %d had %v left, want a bound of at most 20s", i+1, d)
			}
		}
	})
}

// TestReadyButDegraded: with Redis unreachable the bot answers on with its own state, so /readyz
// stays ready and says why it is degraded; it is plain ready again once Redis is back.
func TestReadyButDegraded(t *testing.T) {
	r := ops.NewReadiness()
	r.Auth(nil)
	r.Connection(true)
	r.Degraded(true)
	if ok, reason := r.Ready(); !ok || !strings.Contains(reason, "Redis") {
		t.Errorf("Ready() = %v, %q; want ready, saying Redis is unreachable", ok, reason)
	}
	r.Degraded(false)
	if ok, reason := r.Ready(); !ok || reason != "" {
		t.Errorf("Ready() = %v, %q; want ready, nothing to say", ok, reason)
	}
}
