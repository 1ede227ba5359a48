// Package convo turns a Slack thread into the messages of a chat request: the conversation as
// the model sees it. Writing the model's Markdown answer as Slack text is package slackmd's
// (convo uses its Format and escaping for an answer's note). Everything here is a pure
// function of its arguments: no I/O, no logging (the one clock read is Options.Now falling
// back to time.Now when unset).
//
// # Thread -> messages
//
// Build maps conversations.replies messages (with include_all_metadata) to llm.Message
// values: the system prompt first, then the thread up to the triggering message, then the
// trigger.
//
//   - Roles: the bot's own messages become assistant messages (consecutive parts of one
//     split answer merge into one, without the answer's note) unless their mark (see Mark)
//     says they are no answer: placeholders, notices and errors are left out. An unmarked
//     message of its own is an answer (an older version of the bot's, a script's with the
//     same token), but for one that shares files, which is only noted (`[shared an image:
//     "cat.png" (PNG)]`).
//     The asker's messages (Options.Asker, else the trigger's author) become user messages,
//     prefixed "Name: " when more than one person takes part.
//   - Provenance: only the asker's words are requests. Everything else is data, fenced with a
//     boundary drawn at random for each request (Fence): other people's messages (named),
//     other bots' and apps' (or left out), forwarded messages, files' contents; the answer's
//     tool results go in the same fence. The system prompt ends with the fence's rules, and
//     Result.Foreign says what, if anything, the request holds besides the asker's words and
//     the bot's answers (the handlers then run no tool call without the asker's click).
//   - Text: Slack markup becomes plain text (the bot's mention at the start or end removed,
//     <@U…> -> @name, <#C…|name> -> #name, <url|label> -> label (url), <!here> -> @here,
//     <!subteam^…|@team> -> @team, <!date^…|fallback> -> fallback), then &amp; &lt; &gt;
//     are unescaped. Joins, leaves, topic changes and other non-content subtypes are
//     skipped; file_share, thread_broadcast, bot_message and me_message are kept. Files are
//     noted by name (quoted) and type: `[shared a file: "report.pdf" (PDF)]`; forwarded messages
//     by author and text, fenced.
//   - Budget: tokens are estimated (EstimateTokens: bytes/4 plus 4 per message). The system
//     prompt and the trigger are always kept (the trigger is cut, saying so, only when it
//     alone does not fit); older messages are dropped first and replaced by one note
//     "[N earlier messages omitted]". Only the messages that fit are converted, so a
//     10,000-message thread takes about a millisecond. Result.Earlier are the messages dropped:
//     the caller may have the model summarise them (SummaryRequest) and build again with the
//     summary (Options.Summary), which then stands in their place, fenced as data, before the
//     recent messages in full.
//   - Result.EmptyMention reports a trigger with nothing beyond the mention, so the caller
//     can answer with help instead of sending an empty prompt.
//
// # What comes back, and what the bot posts
//
// ThinkFilter finds the answer in a model's content as it streams, without the reasoning some
// servers leave in it as a leading <think>…</think> block.
//
// What the bot posts is marked with Slack message metadata (Mark.Metadata, ReadMark) so the
// next Build can tell its answers from its placeholders and notices; an answer's status note
// is appended with NoteSuffix, and Build strips it again when replaying the answer. Which
// messages belong to one answer (its parts, its stray parts, the old answer a Regenerate
// replaces, whether it shows closed, the question it answers) is read from those marks here
// (parts.go): the handlers ask, and read no mark themselves.
package convo
