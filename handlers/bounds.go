package handlers

import (
	"fmt"
	"runtime/debug"
	"unicode/utf8"

	"go.uber.org/zap"
)

// maxAnswerBytes bounds what one answer shows. A model that never stops (one repeating itself, or
// one told by text in the thread to flood the channel) would otherwise post message after message
// on the channel's post budget. About a dozen messages of text: far beyond an answer people read.
const maxAnswerBytes = 40000

// finishCapped is the finish reason of a round cut at maxAnswerBytes: the bot's, not the model's.
const finishCapped = "llmbot_answer_limit"

// capAnswer cuts answer, shown after prefix, so that the two stay within maxAnswerBytes (at a rune
// boundary), and reports whether it cut.
func capAnswer(prefix, answer string) (string, bool) {
	room := maxAnswerBytes - len(prefix)
	if len(answer) <= room {
		return answer, false
	}
	room = max(room, 0)
	for room > 0 && !utf8.RuneStart(answer[room]) {
		room--
	}
	return answer[:room], true
}

// panicError is a panic caught in one of an answer's goroutines: its value and stack, for the log.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// fields are the panic's value and stack for the log line that reports it.
func (p *panicError) fields() []zap.Field {
	return []zap.Field{zap.String("panic", fmt.Sprint(p.value)), zap.ByteString("stack", p.stack)}
}

// asPanic is r, recovered, as a *panicError (the stack is the caller's: call it from the deferred
// function itself, while the panicking frames are still on the stack).
func asPanic(r any) *panicError {
	if pe, ok := r.(*panicError); ok {
		return pe
	}
	return &panicError{value: r, stack: debug.Stack()}
}

// caught, deferred in a goroutine of an answer's that handles the model's, a file's or Slack's
// bytes, turns its panic into *err and calls stop (to end the work the goroutine served): one input
// that a renderer or decoder cannot take must not end the process. The goroutine's owner waits for
// it and then raises *err again in its own goroutine, where the answer closes with a short note.
func caught(err *error, stop func()) {
	r := recover()
	if r == nil {
		return
	}
	*err = asPanic(r)
	if stop != nil {
		stop()
	}
}
