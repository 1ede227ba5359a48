// Package convo turns a Slack thread into the messages of a chat request, and a model's
// Markdown answer into Slack messages that read well.
//
// Everything here is a pure function of its arguments: no I/O, no logging, no clock
// (except Options.Now falling back to time.Now when unset).
//
// Thread -> messages: Build maps conversations.replies messages to llm.Message values (roles,
// speaker labels, Slack markup to plain text, the bot's own placeholders and notices left
// out, a token budget). Answer -> Slack: Render converts Markdown to Slack mrkdwn or to
// Slack's markdown_text dialect, Pager and Split cut it into parts that fit a message, and
// MarkdownStream produces append-only text for chat.appendStream. Model text can never ping
// anyone: see Render.
package convo
