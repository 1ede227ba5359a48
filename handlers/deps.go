// Package handlers holds the bot's use cases, each a type of its own built from the small interfaces
// it uses: Replies answers mentions, DMs and follow-ups by streaming a chat completion into Slack under
// the shared write budget (package pace), asking an Approver (package approvals) before the tool
// calls that need a click. /summarize (package summarize), /imagine (package imagine), 👍/👎
// (package feedback), the agent pane (package pane) and the closing of answers a dead replica left
// open (package orphans) are use cases of their own, which handlers does not import: the answers see
// the pane through Pane, and write the journal the orphans are read from.
//
// Slack is behind package gateway (its messages, interfaces, budgets and paced writer), implemented by
// bot.SlackAPI over slack-go and in tests by gatewaytest's in-memory Slack; the model is behind the
// small interface below (Chat). Slack errors cross as slack-go's own types wrapped with %w;
// model errors as *llm.Error.
//
// Errors: a handler shows the user-visible side itself (a short, human note in Slack) and returns the error
// for the caller (bot) to log once. ErrIgnored is not a failure.
//
// An answer's states are drawn at the top of lifecycle.go, and how it is closed is decided by planClose
// (closing.go). A reply, in the caller's goroutine: check a follow-up (thread cache, one conversations.replies on a miss),
// show life (a "_Thinking…_" placeholder, or chat.startStream in stream mode), read the context, build the
// request (convo.Build), then pull the model's stream. One writer goroutine, started and waited for inside
// Reply, owns the Slack message(s) while the answer streams: it is fed by a size-1 mailbox that keeps only
// the latest snapshot, waits for its Lane in the shared budget (pace), and writes only what changed. When
// the stream ends the writer is stopped and joined, and Reply writes the final text (all parts, with a status
// note when something went wrong) at Final priority, retried on 429 and transient errors, on a context that
// outlives cancellation by ReplyOptions.FinalTimeout (ShutdownTimeout at shutdown). At shutdown every
// reply closes at once and the edit budget serves only a few: a reply showing no text yet is deleted
// and its asker told privately, and one whose final edit gets no slot in time is followed by a note
// in its thread (planClose). Handlers start no other goroutine.
//
// Buttons (ReplyOptions.Buttons): Stop while an edited answer is written, Regenerate (and 👍/👎)
// on a finished answer. Who may press them and what they do is in buttons.go; bot routes the clicks.
package handlers

import (
	"context"
	"errors"
	"iter"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/route"
)

// Chat streams a chat completion (llm.Client).
type Chat interface {
	Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error]
}

// Sentinels. ErrShutdown and ErrStopped are the causes bot passes to a reply's context.CancelCauseFunc;
// Reply returns them (wrapped) when it ended for that reason.
var (
	// ErrIgnored: nothing to answer (not a failure; log at debug); route's, which every use case returns.
	ErrIgnored = route.ErrIgnored
	// ErrShutdown: the bot is shutting down; the reply is closed with an "interrupted" note (route's,
	// which every use case reads).
	ErrShutdown = route.ErrShutdown
	// ErrStopped: the user stopped the answer; the reply is closed with "Stopped by <name>.".
	ErrStopped = errors.New("stopped by user")
	// ErrUnclosed: the answer's closing write did not land, so Slack may show it unfinished: its
	// journal record must not simply be removed, but handed over for adoption (a replica then closes
	// it with the interrupted note, unless its last message shows it done).
	ErrUnclosed = errors.New("the answer's closing write did not land")
)
