package convo

import (
	"strconv"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/llm"
)

// summaryPrompt asks for the summary that stands for a long thread's oldest messages in later
// requests (Options.Summary).
const summaryPrompt = "You are {bot_name}, an assistant in a Slack workspace. The messages below are the oldest part " +
	"of a long Slack thread; the later part follows them in another request, where this part is too long to " +
	"go in full. Write a summary of them that lets you go on with the thread: what it is about, the questions " +
	"asked, the answers given, the facts, figures, names and decisions that matter. Say who said what where " +
	"it matters. When a note says messages in between are left out, summarise what is shown and do not guess " +
	"at the rest. Write plain text, at most about 300 words, and no preamble.\n\n"

// summaryAsk is the request's last message: the instruction, the bot's own.
const summaryAsk = "Summarise the messages above, as the instructions say."

// SummaryRequest is the model's request for a summary of earlier, the messages a Build left out
// for the budget (Result.Earlier): every one of them fenced as data but the bot's own answers
// (nobody's words are requests here), and the instruction last. Within opt's budget: the beginning
// (up to half of it: what a long thread is about) and the newest that fit; the messages in
// between are left out, and a note in their place counts them with opt.LeftOut (those the thread's
// read left out there).
func SummaryRequest(earlier []slack.Message, names Names, opt Options) []llm.Message {
	gap := opt.LeftOut
	opt.Asker, opt.SystemPrompt, opt.ChannelInstructions, opt.LeftOut, opt.Files = noAsker, summaryPrompt, "", 0, nil
	b := builder{names: names, opt: opt, fence: NewFence(opt.Rand), asker: noAsker}
	h := b.classify(earlier, slack.Message{})
	b.multi = true
	system := b.systemPrompt()
	ask := b.costed(llm.Message{Role: llm.RoleUser, Content: summaryAsk})
	room := b.budget() - EstimateTokens(system) - ask.tokens - EstimateTokens(middleNote(len(earlier)+gap))
	return assemble(system, 0, b.fitEnds(earlier, h.entries, room, gap), ask.msg)
}

// fitEnds is the history of entries within room: the first that fit in half of it, then the
// newest that fit in the rest, and between them a note counting those left out (and gap more).
func (b *builder) fitEnds(thread []slack.Message, entries []entry, room, gap int) []llm.Message {
	var head []llm.Message
	k := 0
	for half := room / 2; k < len(entries); k++ {
		m, ok := b.entryMessage(thread, entries[k], false)
		if !ok {
			continue
		}
		if m.tokens > half {
			break
		}
		half -= m.tokens
		room -= m.tokens
		head = append(head, m.msg)
	}
	tail, cut, _, _ := b.fitHistory(thread, entries[k:], room)
	if left := countWithContent(thread, entries[k:k+cut]) + gap; left > 0 {
		head = append(head, llm.Message{Role: llm.RoleUser, Content: middleNote(left)})
	}
	return append(head, tail...)
}

// middleNote stands for n messages left out between the beginning and the newest.
func middleNote(n int) string {
	if n == 1 {
		return "[1 message in between is left out]"
	}
	return "[" + strconv.Itoa(n) + " messages in between are left out]"
}

// noAsker is the asker of a summary's request: nobody, so that every person's message is data.
const noAsker = "\x00"
