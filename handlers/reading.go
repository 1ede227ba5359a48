package handlers

// Reading, the answer's state after opening (lifecycle.go): the thread (or a DM's recent history) is
// read, the question found in it, the files people shared there read (package attach), and the model's
// request built from them.

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/attach"
	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/notes"
)

// contextRead reads what one answer answers, and builds the model's request from it.
type contextRead struct {
	*answerBase
	// marks get what the read learns for the answer's marks: the question a task's answer names,
	// and that nothing was asked (no Regenerate).
	marks *answerMarks
	// systemPrompt is the channel's (ReplyOptions.ChannelSettings) or the default.
	systemPrompt string
	model        string // the channel's or the default: a long thread's summary is asked of it too
	// leftOut is how many of the thread's older messages its read left out (Thread.Replies): the
	// context's note on omitted messages counts them.
	leftOut int
}

// replaced reads, for a Regenerate, the thread first to find the old answer's messages (old), which
// the new answer is written over; a failed read is read again and told in the reading state. A
// task's answer names the moment it was asked as its question (taskQuestion).
func (a *contextRead) replaced(ctx context.Context, thread []slack.Message) (_ []slack.Message, old []string) {
	if a.req.Replace != "" && thread == nil {
		if t, err := a.readContext(ctx); err == nil {
			thread, old = t, a.oldAnswer(t)
		}
	}
	if a.req.Task != "" {
		a.log = a.log.With(zap.String("task", a.req.Task))
		a.marks.question = a.taskQuestion(thread, old)
	}
	return thread, old
}

// prepare reads the context and builds the model's request. When there is nothing to ask (the
// thread cannot be read, an unknown task, a Regenerate without its question, a bare mention), it
// returns instead how the answer closes at once (early), and the error to report with it.
func (a *contextRead) prepare(ctx context.Context, thread []slack.Message) (res convo.Result, early *closing, err error) {
	if thread == nil && a.startsThread() {
		// Nothing has been said in the thread yet: the question alone is the context, and the
		// conversations.replies call (Tier 3, the scarcest budget) is saved.
		m, _ := a.trigger(nil)
		thread = []slack.Message{m}
	}
	if thread == nil {
		if thread, err = a.readContext(ctx); err != nil {
			end := closing{note: textThreadRead + ": " + notes.Slack(err) + ".", kind: convo.MarkError}
			if n := stopNote(context.Cause(ctx)); n != "" && ctx.Err() != nil {
				end.note, end.kind = n, convo.MarkNotice
			}
			return res, &end, err
		}
	}
	thread, trigger, found, early := a.findQuestion(thread)
	if early != nil {
		a.marks.noRegen = true // nothing was asked: nothing to answer again
		return res, early, nil
	}
	named := thread
	if !found { // the trigger's author and mentions count too
		named = append(slices.Clip(thread), trigger)
	}
	names := a.r.names.Resolve(ctx, a.log, convo.UserIDs(named))
	thread, trigger, files := a.r.opt.Files.Read(ctx, a.log, attach.Thread{Channel: a.req.Channel, Messages: thread, Trigger: trigger, Skip: a.skipsFiles})
	var channelText string // the channel's own instructions, after the operator's prompt
	if f := a.r.opt.ChannelInstructions; f != nil {
		channelText = f(ctx, a.req.Channel)
	}
	opt := convo.Options{
		BotUserID: a.r.opt.BotUserID, BotID: a.r.opt.BotID, BotName: a.r.opt.BotName,
		SystemPrompt: a.systemPrompt, ChannelInstructions: channelText, Now: time.Now(), Budget: a.r.opt.Budget,
		IncludeOtherBots: a.r.opt.OtherBots, Files: files, Asker: a.req.User, Rand: a.r.opt.Rand, LeftOut: a.leftOut,
	}
	res = a.withSummary(ctx, convo.Build(thread, trigger, names, opt), thread, trigger, names, opt)
	if res.FilesLeftOut > 0 {
		a.log.Debug("files left out for the context budget", zap.Int("files", res.FilesLeftOut))
	}
	if res.EmptyMention {
		a.marks.noRegen = true
		return res, &closing{md: emptyMentionHint(a.r.opt.BotName), kind: convo.MarkNotice}, nil
	}
	return res, nil, nil
}

// skipsFiles says whose files the answer does not read: the bot's own (an assistant message carries
// no picture), and other bots' when the context leaves them out.
func (a *contextRead) skipsFiles(m slack.Message) bool {
	return a.r.own(m) || m.BotID != "" && !a.r.opt.OtherBots
}

// findQuestion finds what the answer answers in thread: the triggering message (found: in the thread),
// or a task's instruction, which stands in for it. A task has no ts, so Build takes the whole
// thread as its context: all but the answer being replaced, whose text is still in the read. early
// is how the answer closes when there is no question.
func (a *contextRead) findQuestion(thread []slack.Message) (_ []slack.Message, trigger slack.Message, found bool, early *closing) {
	trigger, found = a.trigger(thread)
	switch {
	case a.req.Task != "":
		instruction, ok := taskInstructions[a.req.Task]
		if !ok {
			return thread, trigger, found, &closing{note: textUnknownTask, kind: convo.MarkNotice}
		}
		if a.req.Replace != "" {
			replaced := a.oldAnswer(thread)
			thread = slices.DeleteFunc(slices.Clone(thread), func(m slack.Message) bool {
				return slices.Contains(replaced, m.Timestamp)
			})
		}
		return thread, a.taskTrigger(instruction), false, nil
	case a.req.Regenerate && !found:
		return thread, trigger, found, &closing{note: textNoQuestion, kind: convo.MarkNotice}
	}
	return thread, trigger, found, nil
}

// oldAnswer is the messages of the answer a Regenerate was pressed on (route.ReplyRequest.Replace), oldest
// first: the pressed message and the other parts of its answer (those that name the same first
// part, Mark.First). nil when the pressed message is not one of the bot's in the thread.
func (a *contextRead) oldAnswer(thread []slack.Message) []string {
	return convo.AnswerParts(thread, a.req.Replace, a.r.own)
}

// startsThread reports whether the mention starts a new thread (a top-level channel message answered
// in its own thread), so nothing but the mention itself can be read there. A Regenerate reads the
// thread all the same: the question is taken from Slack, not from the request; so does a task,
// which works on the whole thread.
func (a *contextRead) startsThread() bool {
	return a.threadTS != "" && a.threadTS == a.req.TS && !a.req.Regenerate && a.req.Task == ""
}

// readContext reads the thread (or, for a top-level DM, the recent history), and notes how many
// of the thread's older messages the read left out (contextRead.leftOut).
func (a *contextRead) readContext(ctx context.Context) ([]slack.Message, error) {
	if a.threadTS == "" {
		return a.r.reads.History(ctx, a.req.Channel, a.r.opt.HistoryLimit, "")
	}
	msgs, leftOut, err := a.r.reads.Replies(ctx, a.req.Channel, a.threadTS)
	if err != nil {
		return nil, err
	}
	a.leftOut = leftOut
	if a.req.ChannelType == "im" && len(msgs) > 0 && msgs[0].Timestamp == a.threadTS && a.r.own(msgs[0]) {
		if first, ok := convo.FirstPart(msgs[0]); ok {
			msgs = a.withAnswerContext(ctx, msgs, first)
		}
	}
	return msgs, nil
}

// dmAnswerSpan is how long after an answer's first message (its placeholder) in a DM its later parts
// may come, a reasoning model's thinking included: the DM history read for a thread under it ends
// that long after it.
const dmAnswerSpan = 15 * time.Minute

// withAnswerContext adds to a DM thread under one of the bot's answers or errors (it answers there
// at the top level) what the thread lacks: the DM's messages before it (the question) and the
// answer's other parts, top-level messages that name its first part, first (Mark.First). One read
// of the history that ends dmAnswerSpan after the thread's parent, and a second that ends at it
// when the DM went on so much meanwhile that the first did not reach back to it; when a read
// fails, the thread goes with what there is.
func (a *contextRead) withAnswerContext(ctx context.Context, thread []slack.Message, first string) []slack.Message {
	history := func(latest string) ([]slack.Message, error) {
		hist, err := a.r.reads.History(ctx, a.req.Channel, a.r.opt.HistoryLimit, latest)
		if err != nil {
			a.log.Debug("conversations.history around a DM thread's answer; going on without it", zap.Error(err))
		}
		return hist, err
	}
	hist, err := history(tsPlus(a.threadTS, dmAnswerSpan))
	if err != nil {
		return thread
	}
	if len(hist) >= a.r.opt.HistoryLimit && !convo.TSBefore(hist[0].Timestamp, first) { // HistoryLimit >= 1
		// The read did not reach back before the answer's first part (the question is before it): one
		// more, up to the thread's parent, for the parts between them and what came before.
		if before, err := history(a.threadTS); err == nil {
			n := 0 // the reads overlap: only what the first did not reach
			for n < len(before) && convo.TSBefore(before[n].Timestamp, hist[0].Timestamp) {
				n++
			}
			hist = append(before[:n:n], hist...)
		}
	}
	out := make([]slack.Message, 0, len(hist)+len(thread))
	for _, m := range hist {
		if m.Timestamp == a.threadTS {
			continue // the thread's parent, which the thread holds
		}
		if convo.TSBefore(m.Timestamp, a.threadTS) || convo.LaterPartOf(m, first) {
			out = append(out, m)
		}
	}
	out = append(out, thread...)
	slices.SortStableFunc(out, func(a, b slack.Message) int { return convo.CompareTS(a.Timestamp, b.Timestamp) })
	return out
}

// tsPlus is Slack timestamp ts moved d later ("" when ts is not one).
func tsPlus(ts string, d time.Duration) string {
	sec, frac, _ := strings.Cut(ts, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return ""
	}
	if frac == "" {
		frac = "000000"
	}
	return strconv.FormatInt(n+int64(d/time.Second), 10) + "." + frac
}

// trigger returns the triggering message from the thread (found), or builds it from the request when
// the thread read does not include it yet. A deleted message is not found: Slack keeps a deleted
// thread parent as a tombstone ("This message was deleted.") at its ts, which is no question.
func (a *contextRead) trigger(thread []slack.Message) (m slack.Message, found bool) {
	for _, m := range thread {
		if m.Timestamp == a.req.TS {
			if m.SubType == msgSubTypeTombstone {
				break
			}
			return m, true
		}
	}
	m.User, m.Text, m.Timestamp, m.ThreadTimestamp = a.req.User, a.req.Text, a.req.TS, a.req.ThreadTS
	m.Files, m.Attachments = a.req.Files, a.req.Attachments
	return m, false
}

// taskTrigger is the message that stands in for the question of a task: its instruction, from
// the person who asked, with no ts (so it comes after the whole thread).
func (a *contextRead) taskTrigger(instruction string) slack.Message {
	var m slack.Message
	m.User, m.Text = a.req.User, instruction
	return m
}

// taskQuestion is what a task's answer names as its question (Mark.Question). Not the message the
// task was asked on: an answer to that message (a mention's) would then be taken for the same
// question's older answer and left out when the thread is replayed. The moment the task was asked
// instead comes where the request stands in the thread. A Regenerate keeps the question of the
// answer it replaces (old: its messages, first first), so that should the new one come below the
// old, the thread replays only the new.
func (a *contextRead) taskQuestion(thread []slack.Message, old []string) string {
	if len(old) > 0 {
		for _, m := range thread {
			if q := convo.QuestionOf(m); m.Timestamp == old[0] && q != "" {
				return q
			}
		}
	}
	return convo.TS(a.start)
}

// msgSubTypeTombstone is the subtype of what Slack keeps of a deleted thread parent.
const msgSubTypeTombstone = "tombstone"
