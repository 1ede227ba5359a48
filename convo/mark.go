package convo

import (
	"strings"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/slackmd"
)

// MetadataEventType is the Slack message metadata event_type of everything the bot posts.
const MetadataEventType = "llmbot_message"

// MarkKind says what a message posted by the bot is.
type MarkKind string

// The kinds of bot messages. Only answers are replayed to the model.
const (
	MarkAnswer      MarkKind = "answer"      // (a part of) an answer
	MarkPlaceholder MarkKind = "placeholder" // "thinking…" before the first text arrives
	MarkNotice      MarkKind = "notice"      // busy, /imagine notices, help for an empty mention
	MarkError       MarkKind = "error"       // a short human reason why there is no answer
	MarkSummary     MarkKind = "summary"     // a /summarize post to a channel, never a part of an answer
)

// Mark is what the bot attaches to a message it posts (as Slack message metadata) so that
// Build can tell its answers from its placeholders and notices.
type Mark struct {
	Kind MarkKind
	// Note is a status line appended to an answer's text (e.g. "stopped", "cut off"). Build
	// strips it from the text before replaying the answer; see NoteSuffix.
	Note string
	// Question is the ts of the message an answer answers. With it Build replays an answer posted
	// after a later question to that later question too, and of several answers to one question
	// (Regenerate) only the newest. Empty in marks written before it existed.
	Question string
	// First is the ts of an answer's first message, on its later parts (a long answer goes on in new
	// messages): Build joins exactly those. Empty on a first part.
	First string
	// Replaces is the ts of a message of the same answer that this one was posted in place of (it
	// refused its final edit, and could not be deleted): Build skips that one.
	Replaces string
	// Done is on the last message of an answer's closing write only, never on an interim write: Slack
	// shows the answer as it ends (its whole text, or its note). A replica that closes the answers of
	// one that died leaves such an answer as it is. False in marks written before it existed.
	Done bool
}

// Metadata is the Slack message metadata for m: event_type MetadataEventType and
// event_payload {"kind": ..., "note": ..., "q": ..., "first": ..., "replaces": ..., "done": true} (all
// but "kind" only when set).
func (m Mark) Metadata() slack.SlackMetadata {
	payload := map[string]any{"kind": string(m.Kind)}
	for k, v := range map[string]string{"note": m.Note, "q": m.Question, "first": m.First, "replaces": m.Replaces} {
		if v != "" {
			payload[k] = v
		}
	}
	if m.Done {
		payload["done"] = true
	}
	return slack.SlackMetadata{EventType: MetadataEventType, EventPayload: payload}
}

// ReadMark reads a Mark back from a message's metadata (conversations.replies returns it
// with include_all_metadata=true). ok is false when the message carries no mark of ours.
func ReadMark(msg slack.Message) (Mark, bool) {
	md := msg.Metadata
	if md.EventType != MetadataEventType || md.EventPayload == nil {
		return Mark{}, false
	}
	kind, _ := md.EventPayload["kind"].(string)
	if kind == "" {
		return Mark{}, false
	}
	note, _ := md.EventPayload["note"].(string)
	q, _ := md.EventPayload["q"].(string)
	first, _ := md.EventPayload["first"].(string)
	replaces, _ := md.EventPayload["replaces"].(string)
	done, _ := md.EventPayload["done"].(bool)
	return Mark{Kind: MarkKind(kind), Note: note, Question: q, First: first, Replaces: replaces, Done: done}, true
}

// NoteSuffix is how an answer's Mark.Note is appended to its text in format f: a blank line
// and the note in italics. Build recognises and strips it when replaying the answer.
func NoteSuffix(note string, f slackmd.Format) string {
	note = slackmd.Neutralise(note) // a provider's error message may carry controls, or a mention
	if note == "" {
		return ""
	}
	if f == slackmd.FormatMrkdwn {
		note = slackmd.EscapeMrkdwn(note)
	}
	return "\n\n_" + note + "_"
}

// NoteAlone is note as a message of its own: NoteSuffix without the blank line that parts it from
// the text above.
func NoteAlone(note string, f slackmd.Format) string {
	return strings.TrimPrefix(NoteSuffix(note, f), "\n\n")
}
