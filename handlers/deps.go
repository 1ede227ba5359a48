// Package handlers holds the bot's use cases, each a type of its own built from the small interfaces
// it uses: Replies answers mentions, DMs and follow-ups by streaming a chat completion into Slack under
// the shared write budget (package pace); Summarize serves /summarize and its thread shortcut;
// Approvals takes the clicks on tool approvals; AgentPane serves the agent pane and the assistant
// statuses; OrphanCloser closes the answers of replicas that died; Imagine makes a picture for
// /imagine and uploads it to the channel; Feedback takes 👍/👎.
//
// The I/O the handlers need is behind the small interfaces below, implemented by bot.SlackAPI over slack-go
// and by in-memory fakes in tests. Slack errors cross them as slack-go's own types (*slack.RateLimitedError,
// slack.SlackErrorResponse, slack.StatusCodeError) wrapped with %w; model errors as *llm.Error.
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
// Buttons (ReplyOptions.Buttons, ImagineOptions.Buttons): Stop while an edited answer is written,
// Regenerate on a finished answer, "Another one" on an /imagine picture. Who may press them and
// what they do is in buttons.go; bot routes the clicks.
package handlers

import (
	"context"
	"errors"
	"iter"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/llm"
)

// Thread reads conversations.
type Thread interface {
	// Replies returns a thread's messages, parent first, with metadata: of a long thread, the
	// parent and the newest messages within a bound on the bytes held, and how many it left out
	// between them (leftOut).
	Replies(ctx context.Context, channel, threadTS string) (msgs []slack.Message, leftOut int, err error)
	// History returns the channel's last limit messages up to latest (a ts, itself included; "":
	// now), oldest first, with metadata.
	History(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error)
}

// Messenger posts and edits messages.
type Messenger interface {
	// Post posts m in channel, in the thread threadTS ("" = top level), and returns its ts.
	Post(ctx context.Context, channel, threadTS string, m Msg) (ts string, err error)
	// Update replaces the text (and metadata) of the message ts.
	Update(ctx context.Context, channel, ts string, m Msg) error
	// Ephemeral shows text to user only.
	Ephemeral(ctx context.Context, channel, user, threadTS, text string) error
	// Delete deletes the bot's message ts (at shutdown, a placeholder no answer text reached).
	Delete(ctx context.Context, channel, ts string) error
}

// Msg is a message the bot writes: mrkdwn text, the mark stored as its metadata, and buttons.
type Msg struct {
	Text string
	Mark convo.Mark
	// Buttons under the text. nil: a plain text message (blocks untouched). Non-nil: the text is
	// shown in section blocks (Text stays the notification fallback) followed by the buttons; an
	// empty slice shows the plain text again, taking earlier buttons off the message.
	Buttons []Button
}

// Streamer is Slack's native streaming (chat.startStream / appendStream / stopStream).
type Streamer interface {
	// StartStream starts a streamed message and returns its ts.
	StartStream(ctx context.Context, s StreamStart) (ts string, err error)
	// AppendStream appends markdown to the streamed message ts.
	AppendStream(ctx context.Context, channel, ts, markdown string) error
	// StopStream ends the streamed message, appending markdown ("" = nothing), storing mark as metadata
	// and showing buttons (nil: none) at the bottom of the message.
	StopStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error
	// FinishStream finishes with chat.update a streamed message Slack has ended by itself (its time
	// limit: chat.appendStream and chat.stopStream then answer message_not_in_streaming_state and
	// the message is stuck until it is rewritten): its whole markdown, mark and buttons (nil: none).
	FinishStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error
	// AppendTasks shows tasks as task cards on the streamed message ts (chat.appendStream chunks).
	AppendTasks(ctx context.Context, channel, ts string, tasks []Task) error
}

// StreamStart is a chat.startStream call.
type StreamStart struct {
	Channel  string
	ThreadTS string // the thread to answer in ("" only for a top-level DM)
	// RecipientUserID and RecipientTeamID are the person asked and their team (required by Slack in channels).
	RecipientUserID string
	RecipientTeamID string
	// Markdown is the first text (markdown_text); empty: none (the stream starts before the first token,
	// to show life at once — the adapter omits markdown_text).
	Markdown string
}

// Uploader uploads files (files v2 flow).
type Uploader interface {
	UploadImage(ctx context.Context, u Upload) error
}

// Upload is one image shared to a channel.
type Upload struct {
	Channel  string
	ThreadTS string // "" = top level
	Filename string // e.g. "image.png"
	Title    string
	Data     []byte
	Comment  string // initial_comment (mrkdwn)
	AltText  string // alt_txt, at most 1000 characters
	// Buttons under the comment (the file is then shared with blocks: Slack ignores blocks when
	// an initial_comment is given, so the comment becomes their first section).
	Buttons []Button
}

// Responder answers a slash command privately through its response_url.
type Responder interface {
	Respond(ctx context.Context, responseURL, text string) error
}

// PrivateResponder shows a person a message with buttons through a response_url (a slash
// command's or a click's): only that person sees it, and it works where the bot is no member.
type PrivateResponder interface {
	RespondPrivate(ctx context.Context, responseURL string, m Private) error
}

// Private is a message only the person a response_url belongs to sees.
type Private struct {
	// Text is mrkdwn. With buttons it is shown in section blocks (at most 3,000 characters
	// each) and stays the notification fallback.
	Text string
	// Buttons under the text; nil: none.
	Buttons []Button
	// ReplaceOriginal replaces the message the response_url came from (a click's: the clicked
	// message) instead of adding one.
	ReplaceOriginal bool
}

// Users resolves user ids to display names (users.info).
type Users interface {
	Name(ctx context.Context, userID string) (string, error)
}

// Chat streams a chat completion (llm.Client).
type Chat interface {
	Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error]
}

// Imager generates images (llm.Client).
type Imager interface {
	Image(ctx context.Context, req llm.ImageRequest) (*llm.Image, error)
}

// ImagineRequest is an /imagine command.
type ImagineRequest struct {
	Channel, User, Team, Text, ResponseURL string
}

// Sentinels. ErrShutdown and ErrStopped are the causes bot passes to a reply's context.CancelCauseFunc;
// Reply returns them (wrapped) when it ended for that reason.
var (
	// ErrIgnored: nothing to answer (not a failure; log at debug).
	ErrIgnored = errors.New("ignored")
	// ErrShutdown: the bot is shutting down; the reply is closed with an "interrupted" note.
	ErrShutdown = errors.New("bot shutting down")
	// ErrStopped: the user stopped the answer; the reply is closed with "Stopped by <name>.".
	ErrStopped = errors.New("stopped by user")
	// ErrUnclosed: the answer's closing write did not land, so Slack may show it unfinished: its
	// journal record must not simply be removed, but handed over for adoption (a replica then closes
	// it with the interrupted note, unless its last message shows it done).
	ErrUnclosed = errors.New("the answer's closing write did not land")
)
