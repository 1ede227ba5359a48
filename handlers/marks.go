package handlers

import (
	"cmp"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
)

// answerMarks are what an answer's messages carry besides its text: the mark that names its question
// and first message (convo.Mark, which replays the answer wherever its messages sit), and its buttons.
type answerMarks struct {
	*answerBase
	// question is what the answer's marks name as its question (Mark.Question, questionTS): "" for
	// the message TS; for a task, the moment it was asked (taskQuestion).
	question string
	// noRegen: the final message gets no Regenerate button (nothing was asked).
	noRegen bool
}

// placeholder is the message an answer in edit mode starts as.
func (a *answerMarks) placeholder() gateway.Msg {
	return gateway.Msg{Text: textThinking, Mark: convo.Mark{Kind: convo.MarkPlaceholder}, Buttons: a.buttons(false)}
}

// buttons are what the answer's last message carries: Stop while it is written, Regenerate once
// it is final (unless noRegen). nil when buttons are off; an empty slice when there are none.
func (a *answerMarks) buttons(final bool) []gateway.Button {
	switch {
	case !a.r.opt.Buttons:
		return nil
	case !final:
		return []gateway.Button{stopButton(a.ref())}
	case a.noRegen:
		return []gateway.Button{}
	case a.r.opt.Feedback:
		return []gateway.Button{regenerateButton(a.ref()), feedbackButton(a.ref())}
	}
	return []gateway.Button{regenerateButton(a.ref())}
}

// ref names this answer for its buttons.
func (a *answerMarks) ref() route.ReplyRef {
	return route.ReplyRef{ThreadTS: a.req.ThreadTS, TS: a.req.TS, Task: a.req.Task}
}

// questionTS is the question the answer's marks name (Mark.Question).
func (a *answerMarks) questionTS() string { return cmp.Or(a.question, a.req.TS) }

// mark is the Mark of message part (0 for the first) of this answer: kind and note, the
// question it answers, and on a later part the ts of the first (convo.Build replays an answer by
// them wherever its messages sit in the thread).
func (a *answerMarks) mark(kind convo.MarkKind, note string, part int, first string) convo.Mark {
	m := convo.Mark{Kind: kind, Note: note, Question: a.questionTS()}
	if part > 0 {
		m.First = first
	}
	return m
}
