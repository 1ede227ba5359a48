package gateway

import (
	"context"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
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
	// Blocks, when set, show the text in their place (Text stays the notification fallback), the
	// buttons' blocks after them: an answer's text with a native table (package tables).
	Blocks []slack.Block
	// Markdown is the answer's Markdown Text was rendered from, given on an answer's final write:
	// a table in it may be shown as Slack's table block (package tables). "": none.
	Markdown string
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

// MaxButtonValue is Slack's limit on a button's value, in characters.
const MaxButtonValue = 2000

// Button is a Block Kit button under a message's text.
type Button struct {
	ActionID string
	Text     string // the label
	Value    string // what the click carries back (at most MaxButtonValue characters)
	Style    string // "", "primary" or "danger"
}

// Task is a task card of a streamed message.
type Task struct {
	ID, Title, Status, Details string
}

// The statuses of a task card.
const (
	TaskInProgress = "in_progress"
	TaskComplete   = "complete"
	TaskError      = "error"
)

// Modal is a modal with a text, one text input and a submit button (views.open): what the feedback
// and ask_user use cases open.
type Modal struct {
	CallbackID, Title, Text, Submit string
	InputLabel, InputActionID       string
	Metadata                        string // private_metadata (route.ViewPlace)
}
