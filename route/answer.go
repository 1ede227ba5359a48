package route

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The buttons on an answer, named once for the use cases that put them on messages, the loop
// that routes their clicks (Stop reaches only the replica writing the answer) and the access rules.
const (
	ActionStop       = "llmbot_stop"
	ActionRegenerate = "llmbot_regenerate"
	// ActionFeedback is the 👍/👎 pair under a final answer: its value is the answer's ReplyRef
	// (package feedback reads the clicks and gives each side its value).
	ActionFeedback = "llmbot_feedback"
)

// LabelRegenerate is what the Regenerate button says, on an answer and on an answer closed by
// another replica after its own died (both use cases build the button; a click is served the same).
const LabelRegenerate = "Regenerate"

// EventSessionStopped is the event Slack sends when a person presses its Stop on an agent session
// (route.Event; bot.SessionStopHandler serves it).
const EventSessionStopped = "agent_session_stopped"

// The statuses of an agent session (agents.sessions.setStatus), which the answers move and the loop
// reads.
const (
	SessionProcessing = "processing" // the bot is answering: Slack shows a spinner and its Stop
	SessionActive     = "active"     // the answer has ended; the person may ask more
	SessionClosed     = "closed"     // the bot will not go on here (it is shutting down mid-answer)
)

// What access rules and metrics call the Stop and Regenerate buttons (Stop also names Slack's
// agent_session_stopped, which stops the answer the same way).
const (
	FeatureStop       = "stop"
	FeatureRegenerate = "regenerate"
)

// TaskSummarize is the task (ReplyRequest.Task, ReplyRef.Task) of summarising a thread in it, as
// an answer: the "Summarize thread" shortcut asks it, and Regenerate on its answer asks it again.
const TaskSummarize = "summarize"

// ReplyRef names the answer a Stop or Regenerate button belongs to. Its JSON is the button's
// value; the channel comes with the click.
type ReplyRef struct {
	ThreadTS string `json:"thread_ts,omitempty"` // as in route.ReplyRequest.ThreadTS ("" = a top-level DM)
	TS       string `json:"ts"`                  // the message that was answered
	// Task is the task the bot did instead of answering TS (route.ReplyRequest.Task), so that
	// Regenerate does it again rather than answer TS as a question.
	Task string `json:"task,omitempty"`
}

// Value is r as a button value.
func (r ReplyRef) Value() string {
	b, _ := json.Marshal(r) // strings only: cannot fail
	return string(b)
}

// ErrBadValue: a button value this bot did not make (or no longer reads).
var ErrBadValue = errors.New("not a button value of this bot")

// ParseReplyRef reads a Stop or Regenerate button's value.
func ParseReplyRef(value string) (ReplyRef, error) {
	var r ReplyRef
	if err := json.Unmarshal([]byte(value), &r); err != nil || r.TS == "" {
		return ReplyRef{}, fmt.Errorf("button value: %w", ErrBadValue)
	}
	return r, nil
}
