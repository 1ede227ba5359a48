// Package slackmd writes a model's Markdown answer as Slack text that reads well: Markdown for
// Slack. It owns the two Slack dialects an answer is written in, cutting an answer into
// messages, and keeping model text from pinging anyone or passing control characters to Slack.
// Everything here is a pure function of its arguments: no I/O, no logging, no clock.
//
// Render parses the Markdown with goldmark (GFM tables, strikethrough, autolinks, task
// lists) and writes either Slack mrkdwn (FormatMrkdwn, for chat.postMessage / chat.update
// text) or Slack's standard-Markdown dialect (FormatMarkdown, for markdown_text and
// chat.*Stream). Tables become aligned code blocks in both. Model text can never ping
// anyone, and its control characters never reach Slack (see Render); StripControls does the
// latter for model text written outside the renderers, EscapeMrkdwn escapes text for mrkdwn.
//
// Pager cuts an answer into parts that fit a message, while it streams: parts other than
// the last are sealed and never change. Split does the same for a whole answer.
// MarkdownStream feeds chat.appendStream, which only appends: it returns complete,
// mention-safe text and holds table rows back until the table can be written as a block.
//
// slackmd knows nothing of threads, models or what the bot posts: package convo, which turns
// a thread into a chat request and marks the bot's messages, imports it, never the reverse.
package slackmd
