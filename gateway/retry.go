package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/state"
)

// RetryPolicy is how long a Slack write keeps trying (Writer.Do): 429s are waited out (Slack says
// when to come back, after the write's turn has paused its budget for every answer), and transient
// failures (5xx, network) are retried with backoff. Each is bounded by a count or, when that is 0,
// by a window.
type RetryPolicy struct {
	attempts int // tries in all while the failures are transient (0: bounded by outage)
	// outage is how long transient failures are retried after the first of an outage (see outage).
	outage          time.Duration
	rateLimits      int           // 429s in all; the last is not waited out (0: bounded by rateLimitWindow)
	rateLimitWindow time.Duration // how long 429s are waited out after the first one of the write
}

// Backoff between transient failures, and the wait after a 429 that does not say how long.
const (
	FirstBackoff = 250 * time.Millisecond
	MaxBackoff   = 5 * time.Second
	defaultRetry = 5 * time.Second
)

// The bounds of the policies.
const (
	MaxWriteAttempts = 6
	maxRateLimited   = 30
	// FinalOutage: a short Slack outage as an answer ends must not leave "Thinking…" for good, and a
	// long one must not hold the thread's turn for ever. Once the answer is cancelled its context ends
	// sooner (its closing time).
	FinalOutage = 2 * time.Minute
	// finalRateLimited: a closing write that gives up leaves "Thinking…" or a cut answer for good, so
	// only a limit that never lifts ends it.
	finalRateLimited = 10 * time.Minute
	// repostOutage: the answer's own outage window may have run out on the edits that failed before,
	// and a Slack that is down must not hold the thread's turn twice as long.
	repostOutage = 10 * time.Second
)

var (
	// InterimRetry is for writes that can be done again later or some other way: a placeholder,
	// an interim write, a withdrawal at shutdown.
	InterimRetry = RetryPolicy{attempts: MaxWriteAttempts, rateLimits: maxRateLimited}
	// ClosingRetry is for the writes that close an answer: they must land if Slack lets them.
	ClosingRetry = RetryPolicy{outage: FinalOutage, rateLimitWindow: finalRateLimited}
	// ReplaceRetry is for the post that replaces a message that refused its final edit, and for the
	// deletes that take back a message whose text shows elsewhere.
	ReplaceRetry = RetryPolicy{outage: repostOutage, rateLimitWindow: finalRateLimited}
	// noticeRetry is for a private notice of the rest of the bot (Notices): its caller bounds it in
	// time, 429s are waited out within that, and any other failure ends it (one short note is not
	// worth a retry's wait, and one whose call timed out may have been shown).
	noticeRetry = RetryPolicy{attempts: 1, rateLimitWindow: finalRateLimited}
)

// Outage is when Slack's current run of transient failures began (zero: none), shared by the
// writes that wait it out together: an answer's closing writes, so that an answer of many parts
// waits out one outage, not one per part.
type Outage struct{ since time.Time }

// begin starts the outage at the first failure and returns how long it has lasted.
func (o *Outage) begin() time.Duration {
	if o.since.IsZero() {
		o.since = time.Now()
	}
	return time.Since(o.since)
}

// End records that Slack took a write: a later failure starts a new outage.
func (o *Outage) End() { o.since = time.Time{} }

// retries counts one write's failures against its policy.
type retries struct {
	policy       RetryPolicy
	outage       *Outage
	attempts     int // failed tries so far
	limited      int // 429s so far
	limitedSince time.Time
	backoff      time.Duration // the pause after the next transient failure
}

// waitOut reports whether a 429 is to be waited out.
func (r *retries) waitOut() bool {
	if r.policy.rateLimits > 0 {
		r.limited++
		return r.limited < r.policy.rateLimits
	}
	if r.limitedSince.IsZero() {
		r.limitedSince = time.Now()
	}
	return time.Since(r.limitedSince) < r.policy.rateLimitWindow
}

// retry reports whether a transient failure is to be retried, and after what pause.
func (r *retries) retry() (time.Duration, bool) {
	pause := r.backoff
	r.backoff = min(2*r.backoff, MaxBackoff)
	if r.policy.attempts > 0 {
		r.attempts++
		return pause, r.attempts < r.policy.attempts
	}
	lasted := r.outage.begin()
	return min(pause, r.policy.outage-lasted), lasted < r.policy.outage
}

// RateLimited reports whether err is a Slack 429 (or rate-limit error body) and how long to wait.
func RateLimited(err error) (time.Duration, bool) {
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		if rl.RetryAfter <= 0 {
			return time.Second, true
		}
		return rl.RetryAfter, true
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code == 429 {
		return defaultRetry, true
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) && (se.Err == "ratelimited" || se.Err == "rate_limited") {
		return defaultRetry, true
	}
	return 0, false
}

// Transient reports whether a failed Slack call may succeed if retried: 5xx, Slack's own transient
// errors, and network failures (anything that is not an API answer or a context error), and a
// timed-out call that may be repeated (idempotent). A call that timed out (its own time box,
// WriteCallTimeout, or net/http's header timeout: context.DeadlineExceeded) may have been carried
// out: a post or an append repeated would show its text twice, an edit repeated does no harm.
// Callers check their own context before they ask.
func Transient(err error) bool {
	if errors.As(err, new(idempotentTimeout)) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, state.ErrFenced) {
		return false // ErrFenced: another replica owns the answer now
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) {
		return sc.Code >= 500
	}
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "internal_error", "fatal_error", "service_unavailable", "request_timeout":
			return true
		}
		return false
	}
	return true
}

// idempotentTimeout is the timeout of a call that may be repeated (chat.update): see transient.
type idempotentTimeout struct{ error }

func (e idempotentTimeout) Unwrap() error { return e.error }

// Idempotent marks err, from a call that may be repeated, so that its timeout is transient.
func Idempotent(err error) error {
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return idempotentTimeout{err}
	}
	return err
}

// RefusesStreaming reports whether a chat.startStream error means streaming does not work for this app or
// workspace (remembered for a while), rather than a problem of this channel or a passing failure.
func RefusesStreaming(err error) bool {
	switch SlackErr(err) {
	case "", "not_in_channel", "channel_not_found", "is_archived", "thread_not_found", "message_not_found",
		"internal_error", "fatal_error", "service_unavailable", "request_timeout":
		return false
	}
	return true
}

// RefusesSessions reports whether an agents.sessions.setStatus error means sessions do not work for
// this app (not declared as an agent, the event not subscribed, an older Slack), rather than a
// passing failure.
func RefusesSessions(err error) bool {
	switch SlackErr(err) {
	case "not_authorized", "missing_scope", "unknown_method", "not_allowed", "feature_not_enabled",
		"missing_agent_session_stopped_event_subscription", "invalid_auth":
		return true
	}
	return false
}

// SlackErr returns the error string of a Slack API error answer, or "".
func SlackErr(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return ""
}
