package convo

import (
	"cmp"
	"slices"

	"github.com/slack-go/slack"
)

// Which of the bot's messages belong to one answer is read from their marks, here only: the
// handlers ask these functions and never read a mark themselves. An answer's messages name its
// question (Mark.Question) and, on its later parts, its first part (Mark.First); the last message
// of its closing write is Done.

// AnswerOrUnmarked reports whether m, one of the bot's messages, is marked as (a part of) an answer
// or carries no mark at all (an older version's, a script's): everything but its placeholders,
// notices, errors and summaries.
func AnswerOrUnmarked(m slack.Message) bool {
	mark, ok := ReadMark(m)
	return !ok || mark.Kind == MarkAnswer
}

// IsSummary reports whether m is marked as a /summarize post, which is never a part of an answer.
func IsSummary(m slack.Message) bool {
	mark, _ := ReadMark(m)
	return mark.Kind == MarkSummary
}

// QuestionOf is the question m's mark names (Mark.Question): "" on an unmarked message and on
// marks written before it existed.
func QuestionOf(m slack.Message) string {
	mark, _ := ReadMark(m)
	return mark.Question
}

// AnswersTo reports whether m is marked as (a part of) an answer to the message at question.
func AnswersTo(m slack.Message, question string) bool {
	mark, ok := ReadMark(m)
	return ok && mark.Kind == MarkAnswer && mark.Question == question
}

// FirstPart is the ts of the first message of the answer (or error) m is a message of: m's own
// for a first part. ok is false when m is marked as neither, or not marked.
func FirstPart(m slack.Message) (first string, ok bool) {
	mark, marked := ReadMark(m)
	if !marked || mark.Kind != MarkAnswer && mark.Kind != MarkError {
		return "", false
	}
	return cmp.Or(mark.First, m.Timestamp), true
}

// LaterPartOf reports whether m is marked as a later part of the answer whose first message is at
// first.
func LaterPartOf(m slack.Message, first string) bool {
	mark, ok := ReadMark(m)
	return ok && mark.Kind == MarkAnswer && mark.First == first
}

// StrayParts are the ts of the messages of msgs marked as parts of the answer to question whose
// first part is first (empty: the first part itself) that known does not list: parts whose post
// landed although it reported an error.
func StrayParts(msgs []slack.Message, question, first string, known []string) []string {
	var strays []string
	for _, m := range msgs {
		mark, marked := ReadMark(m)
		if marked && mark.Question == question && mark.First == first && !slices.Contains(known, m.Timestamp) {
			strays = append(strays, m.Timestamp)
		}
	}
	return strays
}

// AnswerParts is the ts of the messages of the answer the message at pressed belongs to, oldest
// first as thread has them: pressed, its answer's first part and the parts that name that first
// part (Mark.First), of those own says the bot posted. nil when pressed is not one of the bot's
// messages in thread.
func AnswerParts(thread []slack.Message, pressed string, own func(slack.Message) bool) []string {
	i := slices.IndexFunc(thread, func(m slack.Message) bool { return m.Timestamp == pressed })
	if i < 0 || !own(thread[i]) {
		return nil
	}
	mark, _ := ReadMark(thread[i])
	first := cmp.Or(mark.First, pressed)
	var out []string
	for _, m := range thread {
		mk, _ := ReadMark(m)
		if own(m) && (m.Timestamp == first || m.Timestamp == pressed || mk.First == first) {
			out = append(out, m.Timestamp)
		}
	}
	return out
}

// ClosingMark is the mark that closes, with note, an answer Slack shows as shown (its messages,
// oldest first, at least one): its last message's mark with the note and Done, or for an unmarked
// last message (a native stream gets its mark only when it stops) an answer's mark for question
// that names shown[0] as its first part. answer is false when the last message shows no part of
// an answer (a placeholder, a notice, or an unmarked empty message: a stream that showed nothing).
func ClosingMark(shown []slack.Message, question, note string) (mark Mark, answer bool) {
	m := shown[len(shown)-1]
	mark, marked := ReadMark(m)
	if marked && mark.Kind != MarkAnswer || !marked && m.Text == "" {
		return Mark{}, false
	}
	if !marked {
		mark = Mark{Kind: MarkAnswer, Question: question}
		if m.Timestamp != shown[0].Timestamp {
			mark.First = shown[0].Timestamp
		}
	}
	mark.Note, mark.Done = note, true
	return mark, true
}

// ShowsClosed reports whether the last of an answer's messages (shown, oldest first) shows it
// closed: the mark of a closing write (Done), or, on messages written before that mark existed, a
// note.
func ShowsClosed(shown []slack.Message) bool {
	if len(shown) == 0 {
		return false
	}
	mark, marked := ReadMark(shown[len(shown)-1])
	return marked && (mark.Done || mark.Note != "")
}

// Bot is who the bot is in Slack (auth.test): the ids its own messages carry.
type Bot struct{ UserID, BotID string }

// Posted reports whether the bot posted m.
func (b Bot) Posted(m slack.Message) bool {
	return b.UserID != "" && m.User == b.UserID || b.BotID != "" && m.BotID == b.BotID
}
