package convo

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/slackmd"
	"github.com/slack-go/slack"
)

// Names resolves a Slack user id to a display name. The caller resolves (users.info) and
// caches; ok is false when the name is unknown, and Build then falls back to the id.
type Names interface {
	Name(userID string) (string, bool)
}

// Options configure Build.
type Options struct {
	BotUserID, BotID string // from auth.test
	BotName          string
	// SystemPrompt may contain {bot_name} and {date}; empty: DefaultSystemPrompt.
	SystemPrompt string
	// ChannelInstructions are the standing instructions the people of the channel set ("/llmbot
	// instructions"): added after SystemPrompt as theirs, not the operator's (see ChannelBlock).
	ChannelInstructions string
	Now                 time.Time // for {date}; zero: time.Now()
	// Budget is the maximum estimated tokens for the whole request (see EstimateTokens);
	// 0: DefaultBudget.
	Budget int
	// IncludeOtherBots replays other bots' messages as user messages labelled "[bot] Name: ";
	// when false they are left out.
	IncludeOtherBots bool
	// Files is what the caller read of the files people shared, by file id: their text, their
	// pictures, or why not. A file not in it is only noted, as is every file when it is nil.
	Files map[string]FileContent
	// Asker is the person whose words are requests: the one who asked (empty: the trigger's
	// author). Everything else the request holds is fenced as data (see Fence).
	Asker string
	// Rand is what the fence's boundary is drawn from; nil: crypto/rand (tests pass a fixed one).
	Rand io.Reader
	// LeftOut is how many messages the thread's read left out already (a long thread is read as
	// its parent and its newest messages): they count in Result.Omitted and its note.
	LeftOut int
	// TeamID is the bot's workspace: a message whose team (a message's `team`, its author's
	// workspace in a channel shared with another) is another is named as one of another workspace
	// ("": none is).
	TeamID string
	// Summary, when its Text is set, stands for the thread's oldest messages: those through its
	// Through (a ts). It is what the model made of an earlier Build's Result.Earlier
	// (SummaryRequest), and goes in their place, fenced as data, when it fits.
	Summary Summary
}

// Summary is the model's summary of a thread's oldest messages (Options.Summary).
type Summary struct {
	Text    string
	Through string // the ts of the newest message it summarises
}

// Result is what Build produces.
type Result struct {
	Messages []llm.Message
	// Omitted is how many older messages were left out for the budget, by Build or before it by
	// the thread's read (Options.LeftOut); a note "[N earlier messages omitted]" is put in their
	// place.
	Omitted int
	// TriggerCut is true when the triggering message alone was over budget and was cut
	// (its text then says so).
	TriggerCut bool
	// EmptyMention is true when the trigger has no text (only whitespace or punctuation)
	// beyond the bot's mention, no files and no forwarded message.
	EmptyMention bool
	// FilesLeftOut counts the files whose contents were read but left out for the budget (the
	// messages they came with say so); the newest are kept first.
	FilesLeftOut int
	// Fence is the request's fence: its data is between its lines, and the system prompt says so.
	// The answer's tool results go in it too.
	Fence Fence
	// Foreign says what the request holds besides the asker's own words and the bot's own answers
	// ("" when nothing): another person's message, an app's, a file's contents, a forwarded message,
	// a question someone else asked. While it holds any, no tool call runs without the asker's click.
	Foreign string
	// Earlier are the thread's messages this Build left out for the budget, oldest first (every
	// message of the entries left out, with content or not): what a summary could stand for
	// (SummaryRequest). Messages a summary stands for are not among them.
	Earlier []slack.Message
	// Summarised is true when the request carries Options.Summary.
	Summarised bool
}

// What makes a request not the asker's alone (Result.Foreign).
const (
	ForeignPerson   = "another person's message"
	ForeignApp      = "a message of an app or a bot"
	ForeignFile     = "a file's contents"
	ForeignForward  = "a forwarded message"
	ForeignQuestion = "a question someone else asked"
	ForeignSummary  = "a summary of earlier messages"
)

// DefaultBudget is the token budget when Options.Budget is 0.
const DefaultBudget = 12000

// DefaultSystemPrompt is the system prompt when Options.SystemPrompt is empty.
const DefaultSystemPrompt = "You are {bot_name}, a helpful assistant in a Slack workspace. Today is {date}.\n" +
	"You are reading a Slack thread. When several people take part, the messages of the person asking " +
	"start with their name and a colon (\"Alice: ...\"). Shared files are noted in square brackets. " +
	"Do not start your answer with a name.\n" +
	"Write your answer in Markdown. Be concise and helpful."

// emptyMentionText stands for the trigger's text when it is only the bot's mention.
const emptyMentionText = "[mentioned you without saying anything else]"

// Token estimate: about 4 bytes of text per token (a slight overestimate for English, close
// for code, an underestimate for CJK — the budget keeps a margin), plus a fixed overhead per
// message for the role and separators of the chat format.
const (
	bytesPerToken   = 4
	messageOverhead = 4
	// minTriggerBytes is kept of the trigger even when the system prompt alone uses the budget.
	minTriggerBytes = 400
)

// EstimateTokens is Build's token estimate for one message with content s: len(s)/4 rounded
// up, plus 4 for the message's framing.
func EstimateTokens(s string) int {
	return (len(s)+bytesPerToken-1)/bytesPerToken + messageOverhead
}

// keptSubtypes are the message subtypes that carry content; every other subtype (joins,
// leaves, topic, purpose, channel_*, deleted tombstones, ...) is skipped.
var keptSubtypes = map[string]bool{
	"":                              true,
	slack.MsgSubTypeFileShare:       true,
	slack.MsgSubTypeThreadBroadcast: true,
	slack.MsgSubTypeBotMessage:      true,
	slack.MsgSubTypeMeMessage:       true,
}

type speaker int

const (
	speakerPerson   speaker = iota
	speakerBot              // another bot
	speakerSelf             // our answer
	speakerSelfFile         // our unmarked file share (/imagine): only a note
)

// entry is one future llm.Message: one Slack message, or the parts of one answer.
type entry struct {
	who speaker
	idx []int // into the thread: the message, or the answer's parts in order
	// Of an answer: the question it answers (Mark.Question; for an answer whose marks predate it,
	// the person's message before it) and the ts of its first part (which its later parts name in
	// Mark.First).
	question, firstTS string
	legacy            bool // an answer whose marks name no question
}

// Build maps a thread (conversations.replies messages, oldest first, with metadata) and the
// triggering message to chat messages: the system prompt, the conversation up to the
// trigger within the budget, and the trigger last. Messages after the trigger are left out,
// but for the bot's answers to earlier questions (two questions asked before the first answer
// was posted). The trigger may or may not be part of thread. names may be nil.
func Build(thread []slack.Message, trigger slack.Message, names Names, opt Options) Result {
	b := builder{names: names, opt: opt, fence: NewFence(opt.Rand), asker: opt.Asker}
	trigger = latest(trigger)
	if b.asker == "" && !isBot(&trigger) {
		b.asker = trigger.User
	}

	h := b.classify(thread, trigger)
	if !isBot(&trigger) {
		h.people[trigger.User] = true
	}
	b.multi = len(h.people) > 1

	res := Result{Fence: b.fence}
	system := b.systemPrompt()
	triggerContent, foreign, empty := b.triggerContent(trigger)
	res.EmptyMention = empty
	tm := b.withFiles(llm.Message{Role: llm.RoleUser, Content: triggerContent}, trigger, true)
	tm.foreign = cmp.Or(foreign, tm.foreign)

	// The trigger is always kept; its files' contents are left out when they do not fit, and its
	// text is cut only when it alone does not fit. The history's room keeps space for the widest
	// note on omitted messages there could be.
	room := b.budget() - EstimateTokens(system)
	if len(h.entries) > 0 || opt.LeftOut > 0 {
		room -= EstimateTokens(omittedNote(len(thread) + 1 + opt.LeftOut))
	}
	if tm.tokens > room && len(tm.msg.Parts) > 0 {
		res.FilesLeftOut += tm.files
		tm = b.withFiles(llm.Message{Role: llm.RoleUser, Content: triggerContent}, trigger, false)
		tm.foreign = foreign
	}
	if tm.tokens > room {
		res.TriggerCut = true
		tm.msg.Content = cutTrigger(tm.msg.Content, room-(tm.tokens-EstimateTokens(tm.msg.Content)))
		tm.tokens = b.cost(tm.msg, 0)
	}
	room -= tm.tokens

	entries, summary := b.summarised(thread, h.entries, room)
	var sumForeign string // the summary stands for messages that may be anyone's
	if res.Summarised = summary.msg.Content != ""; res.Summarised {
		room -= summary.tokens
		sumForeign = ForeignSummary
	}
	history, cut, left, histForeign := b.fitHistory(thread, entries, room)
	res.Omitted = countWithContent(thread, entries[:cut]) + opt.LeftOut
	res.Earlier = messagesOf(thread, entries[:cut])
	res.FilesLeftOut += left
	res.Foreign = cmp.Or(tm.foreign, sumForeign, histForeign)
	if res.Summarised {
		history = append([]llm.Message{summary.msg}, history...)
	}
	res.Messages = assemble(system, res.Omitted, history, tm.msg)
	return res
}

// summarised returns the entries the request replays in full and, when Options.Summary is set and
// fits in room, the message that stands for the older ones (empty otherwise: every entry then).
func (b *builder) summarised(thread []slack.Message, entries []entry, room int) ([]entry, costed) {
	s := b.opt.Summary
	if strings.TrimSpace(s.Text) == "" || s.Through == "" {
		return entries, costed{}
	}
	k := 0
	for k < len(entries) && !slices.ContainsFunc(entries[k].idx, func(i int) bool { return TSBefore(s.Through, thread[i].Timestamp) }) {
		k++
	}
	if k == 0 {
		return entries, costed{}
	}
	m := b.costed(llm.Message{Role: llm.RoleUser, Content: b.fence.Wrap(summarySource, s.Text)})
	if m.tokens > room {
		return entries, costed{}
	}
	return entries[k:], m
}

// summarySource is where the summary's block says it comes from: the model is told it stands for
// the earlier messages, which it does not see in full.
const summarySource = "a summary of the earlier messages of this thread, which are not shown in full (made by you from them)"

// messagesOf returns the messages of entries, in the thread's order.
func messagesOf(thread []slack.Message, entries []entry) []slack.Message {
	var idx []int
	for _, e := range entries {
		idx = append(idx, e.idx...)
	}
	slices.Sort(idx)
	out := make([]slack.Message, 0, len(idx))
	for _, i := range idx {
		out = append(out, thread[i])
	}
	return out
}

// history is the classification of a thread's messages into entries, before any text is
// converted: which messages the model sees, as whose words, and which answer parts go together.
type history struct {
	b        *builder
	trigger  string          // the trigger's ts; empty when unknown (then no message is after it)
	replaced map[string]bool // the bot's parts posted again below (Mark.Replaces)
	entries  []entry
	people   map[string]bool // the people who wrote in the thread
	// asked is what an answer whose marks predate Mark.Question is taken to answer: the last
	// person's message since the previous answer that mentions the bot (mentioned), else the
	// last person's message.
	asked, mentioned string
}

func (b *builder) classify(thread []slack.Message, trigger slack.Message) *history {
	h := &history{b: b, trigger: trigger.Timestamp, replaced: b.replaced(thread), people: map[string]bool{}}
	for i := range thread {
		h.add(i, latestRef(&thread[i]))
	}
	return h
}

// after reports whether m is the trigger or later than it.
func (h *history) after(m *slack.Message) bool {
	return h.trigger != "" && (m.Timestamp == h.trigger || TSBefore(h.trigger, m.Timestamp))
}

// add classifies message i of the thread, m. Messages from the trigger on are the future of the
// conversation the model answers: only the bot's answers to earlier questions are kept of them.
func (h *history) add(i int, m *slack.Message) {
	if !keptSubtypes[m.SubType] {
		return
	}
	switch after := h.after(m); {
	case h.b.own(m):
		h.addOwn(i, m, after)
	case after:
	case isBot(m):
		if h.b.opt.IncludeOtherBots {
			h.entries = append(h.entries, entry{who: speakerBot, idx: []int{i}})
		}
	default:
		h.addPerson(i, m)
	}
}

func (h *history) addPerson(i int, m *slack.Message) {
	h.people[m.User] = true
	h.entries = append(h.entries, entry{who: speakerPerson, idx: []int{i}})
	if h.b.opt.BotUserID != "" && strings.Contains(m.Text, "<@"+h.b.opt.BotUserID+">") {
		h.mentioned = m.Timestamp
	}
	h.asked = cmp.Or(h.mentioned, m.Timestamp)
}

// addOwn classifies one of the bot's own messages: a part of an answer, or a file it shared.
func (h *history) addOwn(i int, m *slack.Message, after bool) {
	mark, answer := answerMark(m)
	switch {
	case answer:
		if h.answersEarlier(m, mark, after) {
			h.entries = addAnswer(h.entries, i, m.Timestamp, mark, h.asked)
			h.mentioned = "" // a mention before an answer is answered: later ones count from here
		}
	case mark.Kind == "" && len(m.Files) > 0 && !after:
		h.entries = append(h.entries, entry{who: speakerSelfFile, idx: []int{i}})
	}
}

// answersEarlier reports whether answer part m belongs in the history: not an answer to the
// trigger itself (Regenerate) or to a later question, and not a part posted again below.
func (h *history) answersEarlier(m *slack.Message, mark Mark, after bool) bool {
	if after && (mark.Question == "" || !TSBefore(mark.Question, h.trigger)) {
		return false
	}
	return !h.replaced[m.Timestamp]
}

func (b *builder) budget() int {
	if b.opt.Budget <= 0 {
		return DefaultBudget
	}
	return b.opt.Budget
}

// triggerContent is the trigger as the model sees it: the question, never fenced (foreign says
// when it is not the asker's own, or holds a forwarded message); empty reports a trigger that
// says nothing beyond the bot's mention, which then stands in for its text.
func (b *builder) triggerContent(trigger slack.Message) (content, foreign string, empty bool) {
	text := b.plain(trigger)
	empty = len(trigger.Files) == 0 && isEmptyText(text) && !slices.ContainsFunc(trigger.Attachments, isShared)
	if empty {
		text = emptyMentionText
	}
	who := speakerOf(trigger)
	content, foreign = b.askerContent(who, trigger, text)
	switch {
	case who == speakerBot:
		foreign = ForeignApp
	case trigger.User != b.asker:
		foreign = ForeignQuestion
	}
	return content, foreign, empty
}

// fitHistory converts entries newest first while they fit in room tokens and returns them
// oldest first. At the first that does not fit, it and every older entry with content are left
// out: cut is how many entries that is.
// A message whose files' contents do not fit goes without them (and says so); left counts those
// files.
// foreign says what the kept messages hold besides the asker's words and the bot's answers.
func (b *builder) fitHistory(thread []slack.Message, entries []entry, room int) (kept []llm.Message, cut, left int, foreign string) {
	for k := len(entries) - 1; k >= 0; k-- {
		m, ok := b.entryMessage(thread, entries[k], true)
		if !ok {
			continue
		}
		if m.tokens > room && len(m.msg.Parts) > 0 {
			left += m.files
			m, _ = b.entryMessage(thread, entries[k], false)
		}
		if m.tokens > room {
			cut = k + 1
			break
		}
		room -= m.tokens
		kept = append(kept, m.msg)
		foreign = cmp.Or(foreign, m.foreign)
	}
	slices.Reverse(kept)
	return kept, cut, left, foreign
}

// assemble puts the request together: the system prompt, the note on omitted messages, the
// history (oldest first) and the trigger last.
func assemble(system string, omitted int, history []llm.Message, trigger llm.Message) []llm.Message {
	msgs := make([]llm.Message, 0, len(history)+3)
	msgs = append(msgs, llm.Message{Role: llm.RoleSystem, Content: system})
	if omitted > 0 {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: omittedNote(omitted)})
	}
	msgs = append(msgs, history...)
	return append(msgs, trigger)
}

// addAnswer adds the bot's answer message i (ts, mark) to entries; asked is the question an answer
// whose marks predate Mark.Question is taken to answer. A later part joins the entry of its first
// part, or stands for it when the first is not an answer (deleted, or left a placeholder by a failed
// edit). An answer to a question an earlier answer answered too (Regenerate) takes that answer's
// place: the model sees the newest answer, where the old one was. Answers whose marks predate
// Mark.Question join an answer of theirs right before them, as the parts of one answer, which may
// really be several answers (two questions asked before the first answer): such a merged entry is
// never replaced, so no answer is lost, at the cost of an old answer replayed next to its
// regeneration in threads from before Mark.Question.
func addAnswer(entries []entry, i int, ts string, mark Mark, asked string) []entry {
	e := entry{who: speakerSelf, idx: []int{i}, question: mark.Question, firstTS: ts, legacy: mark.Question == ""}
	switch {
	case mark.First != "":
		for k := len(entries) - 1; k >= 0; k-- {
			if entries[k].who == speakerSelf && entries[k].firstTS == mark.First {
				entries[k].idx = append(entries[k].idx, i)
				return entries
			}
		}
		e.firstTS = mark.First // the first part is not an answer: this part stands for it
	case e.legacy:
		if n := len(entries); n > 0 && entries[n-1].who == speakerSelf && entries[n-1].legacy {
			entries[n-1].idx = append(entries[n-1].idx, i)
			return entries
		}
		e.question = asked
	}
	if e.question != "" {
		for k := range entries {
			if entries[k].who == speakerSelf && entries[k].question == e.question && !(entries[k].legacy && len(entries[k].idx) > 1) {
				entries[k] = e
				return entries
			}
		}
	}
	return append(entries, e)
}

// UserIDs lists the user ids whose names Build may need, in order of first appearance:
// the users mentioned with <@U…> (also in forwarded messages) and, when more than one person
// wrote in the thread (Build then labels their messages), the authors. A thread one person
// started needs no look-up of its author. The caller resolves them before calling Build
// (users.info, cached).
func UserIDs(thread []slack.Message) []string {
	labelled := countAuthors(thread) > 1
	var ids idList
	for i := range thread {
		m := latestRef(&thread[i])
		if labelled && !isBot(m) {
			ids.add(m.User)
		}
		ids.addMentions(m.Text)
		if strings.TrimSpace(m.Text) == "" {
			ids.addMentions(blocksText(m.Blocks))
		}
		for _, a := range m.Attachments {
			if isShared(a) {
				ids.addMentions(a.Text)
			}
		}
	}
	return ids.ids
}

// countAuthors counts the people (not bots) who wrote in the thread.
func countAuthors(thread []slack.Message) int {
	authors := map[string]bool{}
	for i := range thread {
		if m := latestRef(&thread[i]); !isBot(m) && m.User != "" {
			authors[m.User] = true
		}
	}
	return len(authors)
}

// idList is a list of user ids in order of first appearance, without repeats.
type idList struct {
	seen map[string]bool
	ids  []string
}

func (l *idList) add(id string) {
	if id == "" || l.seen[id] {
		return
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	l.seen[id] = true
	l.ids = append(l.ids, id)
}

// addMentions adds the users mentioned in Slack text: <@U123> and <@U123|name>.
func (l *idList) addMentions(s string) {
	for {
		_, rest, found := strings.Cut(s, "<@")
		if !found {
			return
		}
		end := strings.IndexAny(rest, "|>")
		if end < 0 {
			return
		}
		l.add(rest[:end])
		s = rest[end:]
	}
}

type builder struct {
	names Names
	opt   Options
	multi bool // more than one person in the thread: label people's messages
	fence Fence
	asker string // whose words are requests (Options.Asker, else the trigger's author)
}

func (b *builder) own(m *slack.Message) bool {
	return (b.opt.BotUserID != "" && m.User == b.opt.BotUserID) || (b.opt.BotID != "" && m.BotID == b.opt.BotID)
}

func speakerOf(m slack.Message) speaker {
	if isBot(&m) {
		return speakerBot
	}
	return speakerPerson
}

// slackbot is the user id of Slackbot (reminders, auto-responses), a bot without a bot id.
const slackbot = "USLACKBOT"

// isBot reports messages by bots other than a person: integrations, apps, Slackbot.
func isBot(m *slack.Message) bool {
	return m.BotID != "" || m.SubType == slack.MsgSubTypeBotMessage || m.User == slackbot
}

func (b *builder) systemPrompt() string {
	p := b.opt.SystemPrompt
	if p == "" {
		p = DefaultSystemPrompt
	}
	name := b.opt.BotName
	if name == "" {
		name = "an assistant"
	}
	now := b.opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	p = strings.NewReplacer("{bot_name}", name, "{date}", now.Format("Monday, 2 January 2006")).Replace(p)
	p = strings.TrimRight(p, "\n") + "\n\n"
	if c := strings.TrimSpace(b.opt.ChannelInstructions); c != "" {
		p += ChannelBlock(b.fence, c) + "\n\n"
	}
	return p + b.fence.Rules()
}

// answerMark reads the mark of one of the bot's own messages; answer says whether the message is
// (a part of) an answer. An unmarked message of its own is an answer too: one posted by an older
// version of the bot, by a script or workflow with the same token, or whose metadata Slack did not
// return. Its text is what the model heard the bot say, and a follow-up such as "and shorter?"
// means nothing without it. An unmarked message that shares files (an /imagine picture and its
// credit) is not: it is noted as a file (mark.Kind is then empty); nor is one with no text yet (a
// native stream just started, whose mark Slack stores only when it stops).
func answerMark(m *slack.Message) (mark Mark, answer bool) {
	mark, marked := ReadMark(*m)
	switch {
	case marked:
		return mark, mark.Kind == MarkAnswer
	case len(m.Files) > 0 || strings.TrimSpace(m.Text) == "" && len(m.Blocks.BlockSet) == 0:
		return Mark{}, false
	}
	return Mark{Kind: MarkAnswer}, true
}

// replaced is the set of the bot's messages that later ones of its own name in Mark.Replaces.
func (b *builder) replaced(thread []slack.Message) map[string]bool {
	var out map[string]bool
	for i := range thread {
		m := latest(thread[i])
		if !b.own(&m) {
			continue
		}
		if mark, ok := ReadMark(m); ok && mark.Replaces != "" {
			if out == nil {
				out = map[string]bool{}
			}
			out[mark.Replaces] = true
		}
	}
	return out
}

// entryMessage converts one entry, with what was read of its files when files is true; ok is
// false when it has nothing to say.
func (b *builder) entryMessage(thread []slack.Message, e entry, files bool) (costed, bool) {
	switch e.who {
	case speakerSelf:
		var parts []string
		for _, i := range e.idx {
			m := latest(thread[i])
			mark, answer := answerMark(&m)
			if !answer || !b.own(&m) {
				continue
			}
			t := strings.TrimSpace(b.plain(m))
			t = stripNote(t, mark.Note)
			if f := filesNote(m.Files); f != "" {
				t = joinNonEmpty(t, f)
			}
			if t != "" {
				parts = append(parts, t)
			}
		}
		if len(parts) == 0 {
			return costed{}, false
		}
		return b.costed(llm.Message{Role: llm.RoleAssistant, Content: strings.Join(parts, "\n")}), true
	case speakerSelfFile:
		f := filesNote(latest(thread[e.idx[0]]).Files)
		return b.costed(llm.Message{Role: llm.RoleAssistant, Content: f}), f != ""
	default:
		m := latest(thread[e.idx[0]])
		var c, foreign string
		if e.who == speakerPerson && m.User == b.asker {
			c, foreign = b.askerContent(e.who, m, b.plain(m))
		} else {
			c, foreign = b.dataContent(e.who, m, b.plain(m))
		}
		cm := b.withFiles(llm.Message{Role: llm.RoleUser, Content: c}, m, files)
		cm.foreign = cmp.Or(foreign, cm.foreign)
		return cm, c != ""
	}
}

// askerContent is a message of the asker's (or the question) as the model sees it: its label,
// its text, forwarded messages fenced, files noted. foreign is ForeignForward when it forwards one.
func (b *builder) askerContent(who speaker, m slack.Message, text string) (content, foreign string) {
	text = meText(m, text)
	if shared := b.sharedNote(m, true); shared != "" {
		text, foreign = joinNonEmpty(text, shared), ForeignForward
	}
	text = joinNonEmpty(text, filesNote(m.Files))
	if text == "" {
		return "", ""
	}
	switch {
	case who == speakerBot:
		return "[bot] " + b.botName(m) + ": " + text, foreign
	case b.multi:
		return b.userName(m.User) + ": " + text, foreign
	}
	return text, foreign
}

// dataContent is someone else's message (another person's, an app's) as the model sees it: all of
// it fenced as data from them.
func (b *builder) dataContent(who speaker, m slack.Message, text string) (content, foreign string) {
	text = joinNonEmpty(meText(m, text), b.sharedNote(m, false))
	text = joinNonEmpty(text, filesNote(m.Files))
	if text == "" {
		return "", ""
	}
	if who == speakerBot {
		return b.fence.Wrap("a message by the app "+quote(b.botName(m)), text), ForeignApp
	}
	return b.fence.Wrap("a message by "+quote(b.userName(m.User))+" ("+b.person(m)+")", text), ForeignPerson
}

// person says who wrote m, a message of someone but the asker: another person, or one of another
// workspace (a Slack Connect channel's outsider, whom the model should not take for a colleague).
func (b *builder) person(m slack.Message) string {
	if b.opt.TeamID != "" && m.Team != "" && m.Team != b.opt.TeamID {
		return "another person, of another workspace"
	}
	return "another person"
}

// sharer names who shared m's files, in a fence's source.
func (b *builder) sharer(m slack.Message) string {
	switch {
	case isBot(&m):
		return "the app " + quote(b.botName(m))
	case m.User == b.asker:
		return "the person asking"
	}
	return quote(b.userName(m.User))
}

// meText is a message's text, "/me " first for a me_message.
func meText(m slack.Message, text string) string {
	text = strings.TrimSpace(text)
	if m.SubType == slack.MsgSubTypeMeMessage && text != "" {
		text = "/me " + text
	}
	return text
}

func (b *builder) userName(id string) string {
	if b.names != nil {
		if n, ok := b.names.Name(id); ok && n != "" {
			return n
		}
	}
	if id == "" {
		return "someone"
	}
	return id
}

func (b *builder) botName(m slack.Message) string {
	switch {
	case m.BotProfile != nil && m.BotProfile.Name != "":
		return m.BotProfile.Name
	case m.Username != "":
		return m.Username
	case m.User == slackbot:
		return "Slackbot"
	case m.User != "":
		return b.userName(m.User)
	case m.BotID != "":
		return m.BotID
	}
	return "bot"
}

// latest is the message's current version: for a message_changed event, the new message.
// (conversations.replies already returns the latest text of edited messages in Text.)
func latest(m slack.Message) slack.Message {
	return *latestRef(&m)
}

// latestRef is latest without copying a message that is its own latest version.
func latestRef(m *slack.Message) *slack.Message {
	if m.SubType == slack.MsgSubTypeMessageChanged && m.SubMessage != nil {
		return &slack.Message{Msg: *m.SubMessage}
	}
	return m
}

// countWithContent counts the entries whose messages say anything at all.
func countWithContent(thread []slack.Message, entries []entry) int {
	n := 0
	for _, e := range entries {
		if hasContent(thread, e) {
			n++
		}
	}
	return n
}

func hasContent(thread []slack.Message, e entry) bool {
	for _, i := range e.idx {
		m := &thread[i]
		if strings.TrimSpace(m.Text) != "" || len(m.Files) > 0 || len(m.Attachments) > 0 || len(m.Blocks.BlockSet) > 0 {
			return true
		}
	}
	return false
}

func omittedNote(n int) string {
	if n == 1 {
		return "[1 earlier message omitted]"
	}
	return "[" + strconv.Itoa(n) + " earlier messages omitted]"
}

// cutTrigger cuts content to fit room tokens (keeping at least minTriggerBytes) and says so. It
// keeps the beginning (two thirds) and the end: people paste a log or a file and ask about it
// after it, so the question is often the last line.
func cutTrigger(content string, room int) string {
	total := utf8.RuneCountInString(content)
	note := func(cut int) string {
		return "\n\n[This message was too long and was cut: " + strconv.Itoa(cut) + " of its " +
			strconv.Itoa(total) + " characters are left out here.]\n\n"
	}
	maxBytes := (room-messageOverhead)*bytesPerToken - len(note(total))
	maxBytes = max(maxBytes, minTriggerBytes)
	if maxBytes >= len(content) {
		return content
	}
	headEnd := maxBytes * 2 / 3
	for headEnd > 0 && !utf8.RuneStart(content[headEnd]) {
		headEnd--
	}
	if sp := strings.LastIndexAny(content[:headEnd], " \n"); sp > headEnd*9/10 { // end at a space when one is near
		headEnd = sp
	}
	tailStart := len(content) - (maxBytes - maxBytes*2/3)
	for tailStart < len(content) && !utf8.RuneStart(content[tailStart]) {
		tailStart++
	}
	if nl := strings.IndexByte(content[tailStart:], '\n'); nl >= 0 && nl < (len(content)-tailStart)/10 { // start at a line
		tailStart += nl + 1
	}
	head, tail := strings.TrimSpace(content[:headEnd]), strings.TrimSpace(content[tailStart:])
	cut := total - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	return head + note(cut) + tail
}

func isEmptyText(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) && !unicode.IsPunct(r) {
			return false
		}
	}
	return true
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n" + b
}

// stripNote removes an answer's note (see NoteSuffix) from the end of its replayed text.
func stripNote(text, note string) string {
	note = slackmd.Neutralise(note) // as NoteSuffix writes it
	if note == "" {
		return text
	}
	if t := strings.TrimRight(text, " \n"); strings.HasSuffix(t, "_"+note+"_") { // as NoteSuffix writes it
		return strings.TrimRight(t[:len(t)-len(note)-2], " \n")
	}
	// Any other shape (an older one): the note with the markers and brackets around it.
	t := strings.TrimRight(text, " _*)\n")
	if !strings.HasSuffix(t, note) {
		return text
	}
	return strings.TrimRight(t[:len(t)-len(note)], " _*(\n")
}

// CompareTS orders Slack timestamps numerically: -1 when a is earlier than b, 1 when later, 0 when
// the same (for slices.SortFunc).
func CompareTS(a, b string) int {
	switch {
	case TSBefore(a, b):
		return -1
	case TSBefore(b, a):
		return 1
	}
	return 0
}

// TSTime is the time of a Slack timestamp ("1700000000.000100"), in UTC.
func TSTime(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, _ := strconv.ParseInt(sec, 10, 64)
	frac = (frac + "000000")[:6]
	us, _ := strconv.ParseInt(frac, 10, 64)
	return time.Unix(s, us*1000).UTC()
}

// TS is t as a Slack message timestamp (TSTime's inverse, to the microsecond).
func TS(t time.Time) string {
	us := t.UnixMicro()
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

// TSBefore reports whether Slack timestamp a ("1700000000.000100") is earlier than b, compared
// numerically.
func TSBefore(a, b string) bool {
	ai, af, _ := strings.Cut(a, ".")
	bi, bf, _ := strings.Cut(b, ".")
	if len(ai) != len(bi) {
		return len(ai) < len(bi)
	}
	if ai != bi {
		return ai < bi
	}
	for len(af) < len(bf) {
		af += "0"
	}
	for len(bf) < len(af) {
		bf += "0"
	}
	return af < bf
}
