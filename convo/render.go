package convo

import "strings"

// Format is the Slack text dialect an answer is rendered to.
type Format int

const (
	// FormatMrkdwn is Slack mrkdwn, for the `text` of chat.postMessage / chat.update. It
	// works in every workspace and client; chat.update accepts 4,000 characters.
	FormatMrkdwn Format = iota
	// FormatMarkdown is Slack's standard-Markdown dialect, for `markdown_text` (native
	// streaming) and the `markdown` block; 12,000 characters, no tables.
	FormatMarkdown
)

// Per-message part limits (in UTF-16 code units, see Pager), with margin below Slack's
// hard limits (chat.update text 4,000; markdown_text 12,000).
const (
	MrkdwnLimit   = 3500
	MarkdownLimit = 11000
)

// Render converts the model's Markdown answer to format f, with mention safety and escaping.
func Render(md string, f Format) string {
	if f == FormatMrkdwn {
		return neutralise(escapeMrkdwn(md))
	}
	return neutralise(md)
}

func escapeMrkdwn(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func neutralise(s string) string {
	return strings.NewReplacer("@here", "@\u2060here", "@channel", "@\u2060channel", "@everyone", "@\u2060everyone").Replace(s)
}
