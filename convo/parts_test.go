package convo

import (
	"slices"
	"testing"

	"github.com/slack-go/slack"
)

// posted is one of the bot's messages at ts with text, carrying mark (none when its Kind is empty).
func posted(ts, text string, mark Mark) slack.Message {
	m := slack.Message{Msg: slack.Msg{User: "U0BOT", BotID: "B0BOT", Timestamp: ts, Text: text}}
	if mark.Kind != "" {
		m.Metadata = mark.Metadata()
	}
	return m
}

func TestMessageKinds(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		m                           slack.Message
		answerOrUnmarked, isSummary bool
		question                    string
		answersQ1, laterPartOf1     bool
		first                       string
		firstOK                     bool
	}{
		{"unmarked", posted("1.5", "hi", Mark{}), true, false, "", false, false, "", false},
		{"first part", posted("1.5", "hi", Mark{Kind: MarkAnswer, Question: "1.1"}), true, false, "1.1", true, false, "1.5", true},
		{"later part", posted("1.6", "hi", Mark{Kind: MarkAnswer, Question: "1.1", First: "1.5"}), true, false, "1.1", true, false, "1.5", true},
		{"part of the answer at 1", posted("1.6", "hi", Mark{Kind: MarkAnswer, Question: "1.2", First: "1"}), true, false, "1.2", false, true, "1", true},
		{"error", posted("1.5", "no", Mark{Kind: MarkError, Question: "1.1"}), false, false, "1.1", false, false, "1.5", true},
		{"placeholder", posted("1.5", "…", Mark{Kind: MarkPlaceholder, Question: "1.1"}), false, false, "1.1", false, false, "", false},
		{"notice with a first", posted("1.5", "busy", Mark{Kind: MarkNotice, First: "1"}), false, false, "", false, false, "", false},
		{"summary", posted("1.5", "the day", Mark{Kind: MarkSummary}), false, true, "", false, false, "", false},
		{"a person's", personSaid("U01ALICE", "1.1", "hi"), true, false, "", false, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AnswerOrUnmarked(tc.m); got != tc.answerOrUnmarked {
				t.Errorf("AnswerOrUnmarked = %v, want %v", got, tc.answerOrUnmarked)
			}
			if got := IsSummary(tc.m); got != tc.isSummary {
				t.Errorf("IsSummary = %v, want %v", got, tc.isSummary)
			}
			if got := QuestionOf(tc.m); got != tc.question {
				t.Errorf("QuestionOf = %q, want %q", got, tc.question)
			}
			if got := AnswersTo(tc.m, "1.1"); got != tc.answersQ1 {
				t.Errorf("AnswersTo(1.1) = %v, want %v", got, tc.answersQ1)
			}
			if got := LaterPartOf(tc.m, "1"); got != tc.laterPartOf1 {
				t.Errorf("LaterPartOf(1) = %v, want %v", got, tc.laterPartOf1)
			}
			if first, ok := FirstPart(tc.m); first != tc.first || ok != tc.firstOK {
				t.Errorf("FirstPart = %q, %v, want %q, %v", first, ok, tc.first, tc.firstOK)
			}
		})
	}
}

func TestStrayParts(t *testing.T) {
	msgs := []slack.Message{
		personSaid("U01ALICE", "1.1", "question"),
		posted("1.2", "part 1", Mark{Kind: MarkAnswer, Question: "1.1"}),
		posted("1.3", "part 2", Mark{Kind: MarkAnswer, Question: "1.1", First: "1.2"}),
		posted("1.4", "part 3", Mark{Kind: MarkAnswer, Question: "1.1", First: "1.2"}),
		posted("1.5", "another answer's", Mark{Kind: MarkAnswer, Question: "1.1", First: "1.9"}),
		posted("1.6", "to another question", Mark{Kind: MarkAnswer, Question: "1.0", First: "1.2"}),
		posted("1.7", "unmarked", Mark{}),
	}
	for _, tc := range []struct {
		name            string
		question, first string
		known           []string
		want            []string
	}{
		{"later parts not known", "1.1", "1.2", []string{"1.2", "1.3"}, []string{"1.4"}},
		{"all known", "1.1", "1.2", []string{"1.2", "1.3", "1.4"}, nil},
		{"first parts", "1.1", "", nil, []string{"1.2"}},
		{"no answer to the question", "2.0", "1.2", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StrayParts(msgs, tc.question, tc.first, tc.known); !slices.Equal(got, tc.want) {
				t.Errorf("StrayParts = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAnswerParts(t *testing.T) {
	thread := []slack.Message{
		personSaid("U01ALICE", "1.1", "question"),
		posted("1.2", "part 1", Mark{Kind: MarkAnswer, Question: "1.1"}),
		posted("1.3", "part 2", Mark{Kind: MarkAnswer, Question: "1.1", First: "1.2"}),
		{Msg: slack.Msg{User: "U0OTHER", BotID: "B0OTHER", Timestamp: "1.4", Text: "a copy",
			Metadata: Mark{Kind: MarkAnswer, First: "1.2"}.Metadata()}},
		posted("1.5", "part 3", Mark{Kind: MarkAnswer, Question: "1.1", First: "1.2"}),
		posted("1.6", "unmarked", Mark{}),
	}
	own := func(m slack.Message) bool { return m.User == "U0BOT" }
	for _, tc := range []struct {
		name, pressed string
		want          []string
	}{
		{"the first part", "1.2", []string{"1.2", "1.3", "1.5"}},
		{"a later part", "1.3", []string{"1.2", "1.3", "1.5"}},
		{"an unmarked message", "1.6", []string{"1.6"}},
		{"another's message", "1.4", nil},
		{"a person's message", "1.1", nil},
		{"not in the thread", "9.9", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AnswerParts(thread, tc.pressed, own); !slices.Equal(got, tc.want) {
				t.Errorf("AnswerParts = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClosingMark(t *testing.T) {
	for _, tc := range []struct {
		name       string
		shown      []slack.Message
		want       Mark
		wantAnswer bool
	}{
		{"marked part keeps its mark", []slack.Message{
			posted("1.2", "part 1", Mark{Kind: MarkAnswer, Question: "1.1"}),
			posted("1.3", "part 2", Mark{Kind: MarkAnswer, Question: "1.1", First: "1.2"}),
		}, Mark{Kind: MarkAnswer, Question: "1.1", First: "1.2", Note: "cut", Done: true}, true},
		{"unmarked stream alone", []slack.Message{posted("1.2", "streamed", Mark{})},
			Mark{Kind: MarkAnswer, Question: "1.1", Note: "cut", Done: true}, true},
		{"unmarked stream after a first part", []slack.Message{
			posted("1.2", "part 1", Mark{Kind: MarkAnswer, Question: "1.1"}), posted("1.3", "streamed", Mark{}),
		}, Mark{Kind: MarkAnswer, Question: "1.1", First: "1.2", Note: "cut", Done: true}, true},
		{"placeholder", []slack.Message{posted("1.2", "…", Mark{Kind: MarkPlaceholder, Question: "1.1"})}, Mark{}, false},
		{"notice", []slack.Message{posted("1.2", "busy", Mark{Kind: MarkNotice})}, Mark{}, false},
		{"stream that showed nothing", []slack.Message{posted("1.2", "", Mark{})}, Mark{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, answer := ClosingMark(tc.shown, "1.1", "cut")
			if got != tc.want || answer != tc.wantAnswer {
				t.Errorf("ClosingMark = %+v, %v, want %+v, %v", got, answer, tc.want, tc.wantAnswer)
			}
		})
	}
}

func TestShowsClosed(t *testing.T) {
	open := posted("1.2", "part 1", Mark{Kind: MarkAnswer, Question: "1.1"})
	for _, tc := range []struct {
		name  string
		shown []slack.Message
		want  bool
	}{
		{"nothing shown", nil, false},
		{"interim write", []slack.Message{open}, false},
		{"closing write", []slack.Message{open, posted("1.3", "end", Mark{Kind: MarkAnswer, Question: "1.1", Done: true})}, true},
		{"note from before Done existed", []slack.Message{posted("1.3", "end", Mark{Kind: MarkAnswer, Note: "stopped"})}, true},
		{"closed first part, open last", []slack.Message{posted("1.2", "p", Mark{Kind: MarkAnswer, Done: true}), open}, false},
		{"unmarked", []slack.Message{posted("1.3", "streamed", Mark{})}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ShowsClosed(tc.shown); got != tc.want {
				t.Errorf("ShowsClosed = %v, want %v", got, tc.want)
			}
		})
	}
}

// The bot's messages are known by its user id or its bot id, whichever the message carries; an
// identity without ids knows nothing as its own.
func TestBotPosted(t *testing.T) {
	for _, tc := range []struct {
		name        string
		bot         Bot
		user, botID string // the message's
		want        bool
	}{
		{"by user id", Bot{UserID: "U0BOT", BotID: "B0BOT"}, "U0BOT", "", true},
		{"by bot id", Bot{UserID: "U0BOT", BotID: "B0BOT"}, "", "B0BOT", true},
		{"a person", Bot{UserID: "U0BOT", BotID: "B0BOT"}, "U1", "", false},
		{"another app", Bot{UserID: "U0BOT", BotID: "B0BOT"}, "U9", "B9", false},
		{"no ids known", Bot{}, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := slack.Message{Msg: slack.Msg{User: tc.user, BotID: tc.botID}}
			if got := tc.bot.Posted(m); got != tc.want {
				t.Errorf("Posted = %v, want %v", got, tc.want)
			}
		})
	}
}
