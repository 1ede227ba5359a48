package handlers

import (
	"strings"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
)

// Buttons (Block Kit, ReplyOptions.Buttons). The answers put them on the messages they write; bot
// routes the clicks (block_actions over Socket Mode) by action id.
//
// The rules:
//   - Stop is on an answer's last message while it is being written (post-and-edit mode; native
//     streaming has Slack's own stop). Only the person who asked may stop it: anyone else gets a
//     short private explanation. Stopping cancels the model request and keeps the text so far,
//     with the note "Stopped by <name>.".
//   - Regenerate is on a finished answer's last message (also after an error, a stop or a
//     restart). Anyone the access policy allows in the channel may press it: it counts as that
//     person asking again, through the same access check, concurrency bound and one-answer-at-a-
//     time-per-thread order as a mention. The new answer is written in place of the old one (the
//     pressed message's answer: its first message is rewritten, its other parts deleted), built
//     from the thread up to the question (so the old answer is never replayed to the model); when
//     the old message refuses the edit, the new answer comes at the end of the thread and says it
//     replaces the one above. The person who pressed Regenerate may stop it.
//   - 👍/👎 (route.ActionFeedback, with ReplyOptions.Feedback) is beside Regenerate: package
//     feedback takes the clicks.
//
// A button's value carries everything its click needs (no state is kept, so Regenerate works after
// a restart and on any replica; Stop only reaches the replica writing the answer). Values hold
// message timestamps, never secrets, and stay within Slack's 2,000 characters.

// MaxButtonValue is Slack's limit on a button's value, in characters.
const MaxButtonValue = gateway.MaxButtonValue

// buttonPartLimit is the Pager limit of an answer's messages when they carry buttons: Slack shows
// a message's blocks instead of its text, and a section block holds at most 3,000 characters, so
// each part (bytes, at least as many as characters) plus a status note must fit in one section.
const buttonPartLimit = 2600

// Labels and what a person is told about buttons.
const (
	labelStop     = "Stop"
	labelFeedback = "Good answer/Bad answer"
	// TextNotAsker is told privately to someone who presses Stop on another person's answer.
	TextNotAsker = "Only the person who asked can stop this answer."
	// TextNotRunning is told privately when Stop is pressed on an answer that has already ended.
	TextNotRunning = "That answer has already finished."
	// TextStopFailed is told privately when Stop cannot reach the replica writing the answer.
	TextStopFailed = "I couldn't stop that answer just now — please press Stop again."
	textNoQuestion = "I can't find the question any more (was it deleted?), so I can't answer it again."
)

func stopButton(ref route.ReplyRef) gateway.Button {
	return gateway.Button{ActionID: route.ActionStop, Text: labelStop, Value: ref.Value(), Style: "danger"}
}

// feedbackButton is the 👍/👎 pair of the answer ref: one Button with route.ActionFeedback, whose
// Value is the route.ReplyRef; the Slack adapter shows it as a feedback_buttons element with
// package feedback's labels and values, so its Text is only what a plain button would say.
func feedbackButton(ref route.ReplyRef) gateway.Button {
	return gateway.Button{ActionID: route.ActionFeedback, Text: labelFeedback, Value: ref.Value()}
}

func regenerateButton(ref route.ReplyRef) gateway.Button {
	return gateway.Button{ActionID: route.ActionRegenerate, Text: route.LabelRegenerate, Value: ref.Value()}
}

// buttonKey identifies a set of buttons, to tell whether a message shows the wanted ones.
func buttonKey(bs []gateway.Button) string {
	ids := make([]string, len(bs))
	for i, b := range bs {
		ids[i] = b.ActionID
	}
	return strings.Join(ids, ",")
}
