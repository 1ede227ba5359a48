package handlers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/llm"
)

// What users see. Short and human; never tokens or internal error dumps. Notes are plain text: they are
// appended to an answer with convo.NoteSuffix (which italicises and escapes them).
const (
	textThinking    = "_Thinking…_" // placeholder text (mrkdwn)
	textInterrupted = "Interrupted: the bot is restarting. Mention me again to get a full answer."
	textStopped     = "Stopped."
	// At shutdown, when the reply's own message cannot be edited in time (planClose): a note
	// posted under an answer cut short, and a private word to the asker whose placeholder was deleted.
	textInterruptedAbove = "The answer above was interrupted: the bot restarted. Mention me again to get a full answer."
	// textOrphaned closes an answer whose replica died mid-answer (a crash, a lost node): another
	// replica, or the restarted one, keeps what it showed and adds this.
	textOrphaned = "Interrupted: the bot stopped before finishing this answer. Ask again to get a full answer."
	// textOrphanedNothing is the same for an answer that showed nothing yet.
	textOrphanedNothing = "I was interrupted before I could answer (the bot stopped). Please ask again."
	textNotAnswered     = "I was restarting and could not answer this — please ask again."
	textBusy            = "The model service is busy right now, please try again in a minute."
	textQuota           = "The model service says the bot's account is out of credits or quota — tell the person who runs the bot."
	textAuth            = "The bot's API key was rejected — tell the person who runs the bot."
	textTruncated       = "The answer was cut off (the connection to the model service dropped)."
	textStalled         = "The answer was cut off: the model service stopped sending for too long."
	textTimeout         = "The model service took too long to answer, please try again."
	textLength          = "The answer stopped at the length limit."
	textCapped          = "The answer was cut here: it reached the bot's length limit."
	textPanicked        = "Something went wrong while writing this answer."
	textFilter          = "The model service's content filter stopped the answer."
	textEmpty           = "The model returned an empty answer."
	textEmptyLength     = "The model used its whole length limit before writing an answer (it may have spent it thinking)."
	textInvalid         = "The model service sent an answer the bot could not use, please try again."
	textFailed          = "Something went wrong while answering, please try again."
	textUnfinished      = "Slack did not take the rest of this answer, please ask again."
	textThreadRead      = "I couldn't read this conversation"
	// textReplacesAbove ends a regenerated answer that could not be written over the old one.
	textReplacesAbove = "This answer replaces the one above."
)

// emptyMentionHint is the answer to a mention with no question.
func emptyMentionHint(botName string) string {
	if botName == "" {
		botName = "me"
	} else {
		botName = "@" + botName
	}
	return fmt.Sprintf("Hi! Ask me anything: mention %s with your question, here or in a thread, and I'll answer in the thread. In a DM, just write.", botName)
}

// stopNote is the status line for a reply that ended because its context was cancelled with a known cause,
// or "" when the cause is not one of ours.
func stopNote(cause error) string {
	switch {
	case errors.Is(cause, ErrShutdown):
		return textInterrupted
	case errors.Is(cause, ErrStopped):
		return textStopped
	}
	return ""
}

// llmNote is the status line for a failed model call; partial says whether some answer arrived (a dropped
// connection or a timeout then cut the answer off rather than preventing it).
func llmNote(err error, partial bool) string {
	var le *llm.Error
	if !errors.As(err, &le) {
		if errors.Is(err, errStalled) {
			return textStalled
		}
		return textFailed
	}
	switch {
	case partial && (le.Kind == llm.KindConnection || le.Kind == llm.KindTruncated):
		return textTruncated
	case partial && le.Kind == llm.KindTimeout:
		return textStalled
	}
	switch le.Kind {
	case llm.KindBadRequest:
		if msg := oneLine(le.Message, 300); msg != "" {
			return "The model service refused the request: " + msg
		}
		return "The model service refused the request."
	case llm.KindContentPolicy:
		if msg := oneLine(le.Message, 300); msg != "" {
			return "The model service refused the request: " + msg
		}
		return textFilter
	case llm.KindRateLimit, llm.KindServer, llm.KindConnection:
		return textBusy
	case llm.KindQuota:
		return textQuota
	case llm.KindAuth:
		return textAuth
	case llm.KindTruncated:
		return textTruncated
	case llm.KindTimeout:
		return textTimeout
	case llm.KindInvalid:
		return textInvalid
	}
	return textFailed
}

// finishNote is the status line for a stream that finished for a reason other than "stop".
func finishNote(reason string, empty bool) string {
	switch reason {
	case "length":
		if empty {
			return textEmptyLength
		}
		return textLength
	case "content_filter":
		return textFilter
	case finishCapped:
		return textCapped
	}
	if empty {
		return textEmpty
	}
	return ""
}

// slackReason is a short human reason for a Slack error, for messages about it (e.g. in a response_url).
func slackReason(err error) string {
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

// oneLine flattens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

// escape escapes the three characters Slack's text format reserves.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
