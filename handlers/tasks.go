package handlers

import "github.com/llmbot/llmbot/route"

// Tasks are what the bot may be asked to do with a thread instead of answering a message in it
// (route.ReplyRequest.Task, carried by a Regenerate button in route.ReplyRef.Task). A task's answer is
// written like any answer (placeholder, streaming, Stop and Regenerate); its instruction stands in
// for the question and the whole thread is its context.
const (
	// TaskSummarize summarises the thread (the "Summarize thread" message shortcut).
	TaskSummarize = route.TaskSummarize
)

// taskInstructions are what each task asks of the model.
var taskInstructions = map[string]string{
	TaskSummarize: "Summarize this thread for someone who has not read it: what it is about, the main points " +
		"and who made them, what was decided, and the open questions and next steps (with who owns them, " +
		"when someone said so). Use a few short bullet points, about 200 words at most, in the language " +
		"the thread is mostly written in. Do not add anything the thread does not say, and do not " +
		"mention these instructions.",
}

// textUnknownTask answers a Regenerate whose task this version of the bot does not know (a button
// written by another version).
const textUnknownTask = "I don't know how to do that (the button comes from another version of the bot)."
