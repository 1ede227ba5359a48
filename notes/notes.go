// Package notes is what people are told when a model call or a Slack call fails: the short human
// notes that end an answer, a summary or a picture, shared by the use cases so that each failure
// reads the same wherever it happens. Notes are plain text, never tokens or internal error dumps:
// the caller escapes or italicises them for where they are shown.
package notes

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/llm"
)

// The notes on a model call that failed.
const (
	Busy      = "The model service is busy right now, please try again in a minute."
	Quota     = "The model service says the bot's account is out of credits or quota — tell the person who runs the bot."
	Auth      = "The bot's API key was rejected — tell the person who runs the bot."
	Truncated = "The answer was cut off (the connection to the model service dropped)."
	Stalled   = "The answer was cut off: the model service stopped sending for too long."
	Timeout   = "The model service took too long to answer, please try again."
	Filter    = "The model service's content filter stopped the answer."
	Invalid   = "The model service sent an answer the bot could not use, please try again."
	Failed    = "Something went wrong while answering, please try again."
)

// ErrStalled is the cause an answer's watchdog gives its model stream when the model stopped
// sending for too long (the client's own timeouts missed it): its note is Stalled.
var ErrStalled = errors.New("model stream stalled")

// Model is the status line for a failed model call; partial says whether some answer arrived (a dropped
// connection or a timeout then cut the answer off rather than preventing it).
func Model(err error, partial bool) string {
	var le *llm.Error
	if !errors.As(err, &le) {
		if errors.Is(err, ErrStalled) {
			return Stalled
		}
		return Failed
	}
	switch {
	case partial && (le.Kind == llm.KindConnection || le.Kind == llm.KindTruncated):
		return Truncated
	case partial && le.Kind == llm.KindTimeout:
		return Stalled
	}
	switch le.Kind {
	case llm.KindBadRequest:
		if msg := OneLine(le.Message, 300); msg != "" {
			return "The model service refused the request: " + msg
		}
		return "The model service refused the request."
	case llm.KindContentPolicy:
		if msg := OneLine(le.Message, 300); msg != "" {
			return "The model service refused the request: " + msg
		}
		return Filter
	case llm.KindRateLimit, llm.KindServer, llm.KindConnection:
		return Busy
	case llm.KindQuota:
		return Quota
	case llm.KindAuth:
		return Auth
	case llm.KindTruncated:
		return Truncated
	case llm.KindTimeout:
		return Timeout
	case llm.KindInvalid:
		return Invalid
	}
	return Failed
}

// Slack is a short human reason for a Slack error, for messages about it (e.g. in a response_url).
func Slack(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "not_in_channel", "channel_not_found":
			return "I'm not a member of this channel"
		case "missing_scope":
			return "the bot is missing a Slack permission (" + se.Needed + ")"
		case "is_archived":
			return "the channel is archived"
		case "ratelimited", "rate_limited":
			return "Slack is rate limiting the bot"
		}
		return "Slack said " + se.Err
	}
	if _, ok := gateway.RateLimited(err); ok {
		return "Slack is rate limiting the bot"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "Slack did not answer in time"
	}
	var sc slack.StatusCodeError
	if errors.As(err, &sc) && sc.Code >= 500 {
		return "Slack is having trouble (HTTP " + strconv.Itoa(sc.Code) + ")"
	}
	return "Slack could not be reached"
}

// OneLine flattens s to one line of at most n runes.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
