// Package summarize is the /summarize use case: the slash command, the "Post to channel" button
// under a private summary, and the "Summarize thread" message shortcut.
//
// /summarize reads the channel's recent messages (conversations.history, a page per read of the
// workspace's read budget, shared with the answers) and the replies of its busiest threads
// (conversations.replies), summarises them (in parts when they exceed the context budget, then
// the parts' summaries together) and shows the summary only to the person who asked, through the
// command's response_url, with a button that posts it to the channel (kept meanwhile by the
// Summarizer: a summary does not fit in a button's value). The shortcut summarises one thread in
// that thread, as an answer (route.TaskSummarize, handed to an Answerer), so Stop and Regenerate
// work on it as on any answer. Summary gives the same channel summary as text, to post publicly
// (a scheduled summary: the wiring hands it to package schedule).
//
// It owns the command's and the button's route names, the spans people may ask for, the
// transcript the model reads (fenced as data), the kept summaries, and what people are told. It
// takes Slack through package gateway (paced reads and writes, Names) and the model through the
// small Chat interface it declares; it imports no other use case.
package summarize
