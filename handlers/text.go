package handlers

import (
	"errors"
	"fmt"

	"github.com/llmbot/llmbot/notes"
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
	textNotAnswered      = "I was restarting and could not answer this — please ask again."
	textLength           = "The answer stopped at the length limit."
	textCapped           = "The answer was cut here: it reached the bot's length limit."
	textPanicked         = "Something went wrong while writing this answer."
	textEmpty            = "The model returned an empty answer."
	textEmptyLength      = "The model used its whole length limit before writing an answer (it may have spent it thinking)."
	textUnfinished       = "Slack did not take the rest of this answer, please ask again."
	textThreadRead       = "I couldn't read this conversation"
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

// finishNote is the status line for a stream that finished for a reason other than "stop".
func finishNote(reason string, empty bool) string {
	switch reason {
	case "length":
		if empty {
			return textEmptyLength
		}
		return textLength
	case "content_filter":
		return notes.Filter
	case finishCapped:
		return textCapped
	}
	if empty {
		return textEmpty
	}
	return ""
}
