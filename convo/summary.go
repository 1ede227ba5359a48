package convo

import (
	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/llm"
)

// summaryPrompt asks for the summary that stands for a long thread's oldest messages in later
// requests (Options.Summary).
const summaryPrompt = "You are {bot_name}, an assistant in a Slack workspace. The messages below are the oldest part " +
	"of a long Slack thread; the later part follows them in another request, where this part is too long to " +
	"go in full. Write a summary of them that lets you go on with the thread: what it is about, the questions " +
	"asked, the answers given, the facts, figures, names and decisions that matter. Say who said what where " +
	"it matters. Write plain text, at most about 300 words, and no preamble.\n\n"

// summaryAsk is the request's last message: the instruction, the bot's own.
const summaryAsk = "Summarise the messages above, as the instructions say."

// SummaryRequest is the model's request for a summary of earlier, the messages a Build left out
// for the budget (Result.Earlier): every one of them fenced as data but the bot's own answers
// (nobody's words are requests here), within opt's budget (the newest kept first, the others
// noted as omitted), and the instruction last.
func SummaryRequest(earlier []slack.Message, names Names, opt Options) []llm.Message {
	opt.Asker, opt.SystemPrompt, opt.ChannelInstructions, opt.LeftOut, opt.Files = noAsker, summaryPrompt, "", 0, nil
	b := builder{names: names, opt: opt, fence: NewFence(opt.Rand), asker: noAsker}
	h := b.classify(earlier, slack.Message{})
	b.multi = true
	system := b.systemPrompt()
	ask := b.costed(llm.Message{Role: llm.RoleUser, Content: summaryAsk})
	room := b.budget() - EstimateTokens(system) - ask.tokens - EstimateTokens(omittedNote(len(earlier)))
	history, cut, _, _ := b.fitHistory(earlier, h.entries, room)
	return assemble(system, countWithContent(earlier, h.entries[:cut]), history, ask.msg)
}

// noAsker is the asker of a summary's request: nobody, so that every person's message is data.
const noAsker = "\x00"
