package convo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmbot/llmbot/llm"
	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/internal/golden"
)

// nameBook is a hand-written Names.
type nameBook map[string]string

func (n nameBook) Name(id string) (string, bool) {
	name, ok := n[id]
	return name, ok
}

var testNames = nameBook{"U01ALICE": "Alice", "U01BOB": "Bob", "U01CAROL": "Carol", "U0BOT": "Ada"}

var testNow = time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)

func testOptions() Options {
	return Options{BotUserID: "U0BOT", BotID: "B0BOT", BotName: "Ada", Now: testNow, Rand: sameBytes(0x5a)}
}

// sameBytes is a source of "randomness" that always gives the same byte: the fence's boundary in
// the tests is 5a5a5a5a5a5a5a5a.
type sameBytes byte

func (b sameBytes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// testBoundary is the boundary testOptions' fences draw.
const testBoundary = "5a5a5a5a5a5a5a5a"

// fenced is text as Build fences data from source in the tests.
func fenced(source, text string) string {
	return "<<<" + testBoundary + " data from " + source + ">>>\n" + text + "\n<<<" + testBoundary + " end>>>"
}

// loadReplies decodes a conversations.replies response from testdata.
func loadReplies(tb testing.TB, name string) []slack.Message {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	var resp struct {
		OK       bool            `json:"ok"`
		Messages []slack.Message `json:"messages"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		tb.Fatalf("decode %s: %v", name, err)
	}
	if !resp.OK || len(resp.Messages) == 0 {
		tb.Fatalf("%s: not a conversations.replies response with messages", name)
	}
	return resp.Messages
}

// dump shows a Result for golden files.
func dump(r Result) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "omitted=%d trigger_cut=%t empty_mention=%t foreign=%q\n", r.Omitted, r.TriggerCut, r.EmptyMention, r.Foreign)
	for _, m := range r.Messages {
		fmt.Fprintf(&sb, "\n--- %s\n%s\n", m.Role, m.Content)
	}
	return sb.String()
}

func TestBuildGolden(t *testing.T) {
	withBots := testOptions()
	withBots.IncludeOtherBots = true
	custom := testOptions()
	custom.SystemPrompt = "You are {bot_name} for Acme. Date: {date}."
	tests := []struct {
		golden  string
		fixture string
		trigger string // ts of the triggering message in the fixture
		opt     Options
	}{
		{"build_multi_person", "replies_multi_person.json", "1763700500.000800", testOptions()},
		{"build_multi_person_first", "replies_multi_person.json", "1763700000.000100", testOptions()},
		{"build_bot_marks", "replies_bot_marks.json", "1763800200.000700", testOptions()},
		{"build_own_unmarked", "replies_own_unmarked.json", "1764300180.000800", testOptions()},
		{"build_other_bots_left_out", "replies_other_bots.json", "1763900100.000400", testOptions()},
		{"build_other_bots_included", "replies_other_bots.json", "1763900100.000400", withBots},
		{"build_files", "replies_files.json", "1764000100.000500", testOptions()},
		{"build_markup", "replies_markup.json", "1764100030.000400", custom},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			thread := loadReplies(t, tt.fixture)
			trigger := findTS(t, thread, tt.trigger)
			golden.Check(t, tt.golden, dump(Build(thread, trigger, testNames, tt.opt)))
		})
	}
}

func findTS(tb testing.TB, thread []slack.Message, ts string) slack.Message {
	tb.Helper()
	for _, m := range thread {
		if m.Timestamp == ts {
			return m
		}
	}
	tb.Fatalf("no message with ts %s", ts)
	return slack.Message{}
}

// hugeThread is a thread of n messages by three people and the bot, with long texts.
func hugeThread(n int) []slack.Message {
	thread := make([]slack.Message, 0, n)
	users := []string{"U01ALICE", "U01BOB", "U01CAROL"}
	for i := range n {
		ts := fmt.Sprintf("%d.%06d", 1764200000+i, i)
		m := slack.Message{Msg: slack.Msg{Type: "message", Timestamp: ts, ThreadTimestamp: "1764200000.000000"}}
		switch {
		case i%4 == 3:
			m.User, m.BotID = "U0BOT", "B0BOT"
			m.Text = fmt.Sprintf("Answer %d: *yes*, because the numbers in <https://example.com/r/%d|report %d> agree. %s", i, i, i,
				strings.Repeat("More detail follows here. ", 6))
			m.Metadata = Mark{Kind: MarkAnswer}.Metadata()
		default:
			m.User = users[i%3]
			m.Text = fmt.Sprintf("Message %d from <@%s>: what about &lt;item %d&gt; and <#C0GENERAL|general>? %s", i, users[(i+1)%3], i,
				strings.Repeat("Some context. ", i%7))
		}
		thread = append(thread, m)
	}
	return thread
}

func TestBuildHugeThreadGolden(t *testing.T) {
	thread := hugeThread(10000)
	trigger := thread[len(thread)-2]
	opt := testOptions()
	opt.Budget = 1200
	r := Build(thread, trigger, testNames, opt)
	if r.Omitted == 0 {
		t.Fatalf("nothing omitted from a 10,000 message thread with budget %d", opt.Budget)
	}
	golden.Check(t, "build_huge_thread", dump(r))
}

func TestBuildBudget(t *testing.T) {
	long := strings.Repeat("word ", 20000) // 100,000 bytes, about 25,000 tokens
	tests := []struct {
		name        string
		history     int
		leftOut     int // older messages the thread's read left out
		budget      int
		trigger     string
		wantOmitted int
		wantKept    int // history messages kept
		wantCut     bool
	}{
		{"everything fits", 10, 0, 12000, "question", 0, 10, false},
		{"default budget when zero", 10, 0, 0, "question", 0, 10, false},
		// The budgets are beyond the fence's rules, which every system prompt ends with. With the
		// system prompt "You are Ada." (7 tokens), history messages of 14 tokens, the trigger of 6
		// and 12 kept for the omission note: 100-7-6-12 = 75 = 5*14 + 5.
		{"oldest dropped first", 10, 0, 100, "question", 5, 5, false},
		{"only the trigger fits", 10, 0, 25, "question", 10, 0, false},
		{"trigger alone over budget is cut", 10, 0, 2000, long, 10, 0, true},
		{"left out by the read", 10, 40, 12000, "question", 40, 10, false},
		{"left out by the read and for the budget", 10, 40, 100, "question", 45, 5, false},
		{"trigger cut keeps some text even when the system prompt uses the budget", 3, 0, 10, long, 3, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			thread := make([]slack.Message, 0, tt.history+1)
			for i := range tt.history {
				thread = append(thread, slack.Message{Msg: slack.Msg{
					User: "U01ALICE", Timestamp: fmt.Sprintf("1764300000.%06d", i),
					Text: fmt.Sprintf("message number %d with some words in it", i),
				}})
			}
			trigger := slack.Message{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1764300999.000000", Text: "<@U0BOT> " + tt.trigger}}
			thread = append(thread, trigger)
			opt := testOptions()
			opt.Budget = tt.budget
			if tt.budget != 0 {
				opt.Budget += EstimateTokens("You are Ada.\n\n"+NewFence(opt.Rand).Rules()) - EstimateTokens("You are Ada.")
			}
			opt.LeftOut = tt.leftOut
			opt.SystemPrompt = "You are {bot_name}."
			r := Build(thread, trigger, testNames, opt)
			if r.Omitted != tt.wantOmitted {
				t.Errorf("Omitted = %d, want %d", r.Omitted, tt.wantOmitted)
			}
			if r.TriggerCut != tt.wantCut {
				t.Errorf("TriggerCut = %t, want %t", r.TriggerCut, tt.wantCut)
			}
			kept := len(r.Messages) - 2 // system, trigger
			if r.Omitted > 0 {
				kept-- // the note
				if got, want := r.Messages[1].Content, fmt.Sprintf("[%d earlier messages omitted]", tt.wantOmitted); tt.wantOmitted > 1 && got != want {
					t.Errorf("note = %q, want %q", got, want)
				}
			}
			if kept != tt.wantKept {
				t.Errorf("kept %d history messages, want %d", kept, tt.wantKept)
			}
			last := r.Messages[len(r.Messages)-1]
			if last.Role != llm.RoleUser || !strings.HasPrefix(last.Content, strings.TrimSpace(tt.trigger)[:min(20, len(tt.trigger))]) {
				t.Errorf("last message = %s %.40q, want the trigger", last.Role, last.Content)
			}
			if tt.wantCut && !strings.Contains(last.Content, "was too long and was cut:") {
				t.Errorf("cut trigger does not say so: ...%q", last.Content[max(0, len(last.Content)-120):])
			}
			budget := opt.Budget
			if budget == 0 {
				budget = DefaultBudget
			}
			total := 0
			for _, m := range r.Messages {
				total += EstimateTokens(m.Content)
			}
			if total > budget && !(tt.wantCut && tt.budget < 100) {
				t.Errorf("estimated %d tokens, over the budget %d", total, budget)
			}
		})
	}
}

func TestBuildEmptyMention(t *testing.T) {
	tests := []struct {
		text        string
		files       []slack.File
		attachments []slack.Attachment
		want        bool
	}{
		{"<@U0BOT>", nil, nil, true},
		{"  <@U0BOT>  ", nil, nil, true},
		{"<@U0BOT> ?", nil, nil, true},
		{"<@U0BOT>!!! …", nil, nil, true},
		{"hey <@U0BOT>", nil, nil, false},
		{"<@U0BOT> hi", nil, nil, false},
		{"<@U0BOT> :wave:", nil, nil, false},
		{"<@U0BOT> <@U01BOB>", nil, nil, false},
		{"<@U0BOT>", []slack.File{{Name: "a.png", Mimetype: "image/png"}}, nil, false},
		{"<@U0BOT>", nil, []slack.Attachment{{IsShare: true, AuthorName: "Bob", Text: "deploy failed"}}, false},
		{"<@U0BOT>", nil, []slack.Attachment{{Title: "an unfurled link", Text: "a page"}}, true},
		{"<@U0BOT|ada>", nil, nil, true},
	}
	for _, tt := range tests {
		trigger := slack.Message{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000001", Text: tt.text, Files: tt.files, Attachments: tt.attachments}}
		r := Build(nil, trigger, testNames, testOptions())
		if r.EmptyMention != tt.want {
			t.Errorf("Build(%q, %d files, %d attachments).EmptyMention = %t, want %t", tt.text, len(tt.files), len(tt.attachments), r.EmptyMention, tt.want)
		}
	}
}

func TestUserIDs(t *testing.T) {
	thread := loadReplies(t, "replies_multi_person.json")
	got := strings.Join(UserIDs(thread), ",")
	want := "U01ALICE,U0BOT,U01CAROL,U01BOB"
	if got != want {
		t.Errorf("UserIDs = %s, want %s", got, want)
	}
	// One person's thread: her own name is never shown (no labels), only the people mentioned are
	// needed, here in the bot's answer and inside a forwarded message.
	if got, want := strings.Join(UserIDs(loadReplies(t, "replies_files.json")), ","), "U0BOT,U01ALICE,U01CAROL"; got != want {
		t.Errorf("UserIDs with a forwarded message = %s, want %s", got, want)
	}
	// A mention that starts its thread needs no look-up at all (the bot names itself).
	alone := []slack.Message{{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000001", Text: "<@U0BOT> hi"}}}
	if got := UserIDs(alone); len(got) != 1 || got[0] != "U0BOT" {
		t.Errorf("UserIDs of a new mention = %v, want [U0BOT]", got)
	}
	// An edited message counts under its author; the second person makes labels (and names) needed.
	two := append(alone, slack.Message{Msg: slack.Msg{SubType: slack.MsgSubTypeMessageChanged, Timestamp: "1.000002"},
		SubMessage: &slack.Msg{User: "U01BOB", Timestamp: "1.000002", Text: "me too"}})
	if got, want := strings.Join(UserIDs(two), ","), "U01ALICE,U0BOT,U01BOB"; got != want {
		t.Errorf("UserIDs of a two-person thread = %s, want %s", got, want)
	}
}

func TestSystemPrompt(t *testing.T) {
	tests := []struct {
		prompt, name string
		want         string
	}{
		{"", "Ada", "You are Ada, a helpful assistant in a Slack workspace. Today is Saturday, 21 November 2026."},
		{"I am {bot_name}; today is {date}; {bot_name} again.", "Ada", "I am Ada; today is Saturday, 21 November 2026; Ada again."},
		{"", "", "You are an assistant, a helpful"},
	}
	for _, tt := range tests {
		opt := testOptions()
		opt.SystemPrompt, opt.BotName = tt.prompt, tt.name
		r := Build(nil, slack.Message{Msg: slack.Msg{User: "U01ALICE", Text: "hi"}}, nil, opt)
		if got := r.Messages[0]; got.Role != llm.RoleSystem || !strings.HasPrefix(got.Content, tt.want) {
			t.Errorf("system prompt for %q = %s %q, want prefix %q", tt.prompt, got.Role, got.Content, tt.want)
		}
	}
}

func TestTSOrder(t *testing.T) {
	tests := []struct {
		a, b    string
		before  bool
		compare int
	}{
		{"1763700000.000100", "1763700000.000200", true, -1},
		{"1763700000.000200", "1763700000.000100", false, 1},
		{"999999999.000100", "1000000000.000000", true, -1},
		{"1763700000.1", "1763700000.000200", false, 1},
		{"1763700000.000100", "1763700000.000100", false, 0},
		{"1763700000.1", "1763700000.100000", false, 0},
	}
	for _, tt := range tests {
		if got := TSBefore(tt.a, tt.b); got != tt.before {
			t.Errorf("TSBefore(%s, %s) = %t, want %t", tt.a, tt.b, got, tt.before)
		}
		if got := CompareTS(tt.a, tt.b); got != tt.compare {
			t.Errorf("CompareTS(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.compare)
		}
	}
}

func TestBuildUsesLatestVersionOfChangedMessages(t *testing.T) {
	// A message_changed event (as the Events API delivers edits) carries the new message.
	changed := slack.Message{
		Msg:             slack.Msg{SubType: slack.MsgSubTypeMessageChanged, Hidden: true, Timestamp: "1.000009"},
		SubMessage:      &slack.Msg{User: "U01BOB", Timestamp: "1.000002", Text: "the new text", Edited: &slack.Edited{User: "U01BOB", Timestamp: "1.000009"}},
		PreviousMessage: &slack.Msg{User: "U01BOB", Timestamp: "1.000002", Text: "the old text"},
	}
	thread := []slack.Message{
		{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000001", Text: "question"}},
		changed,
		{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000003", Text: "<@U0BOT> well?"}},
	}
	r := Build(thread, thread[2], testNames, testOptions())
	if got, want := r.Messages[2].Content, fenced(`a message by "Bob" (another person)`, "the new text"); got != want {
		t.Errorf("changed message = %q, want %q", got, want)
	}
}

func TestBuildMentionOfTheBotMidText(t *testing.T) {
	opt := testOptions()
	opt.BotName = "" // falls back to the name Names gives the bot's user id
	trigger := slack.Message{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000001", Text: "<@U0BOT>: ask <@U0BOT> nicely <@U0BOT>"}}
	r := Build(nil, trigger, testNames, opt)
	if got, want := r.Messages[1].Content, "ask @Ada nicely"; got != want {
		t.Errorf("trigger = %q, want %q", got, want)
	}
}

func TestBuildSlackbotIsABot(t *testing.T) {
	opt := testOptions()
	opt.IncludeOtherBots = true
	thread := []slack.Message{
		{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000001", Text: "standup?"}},
		{Msg: slack.Msg{User: "USLACKBOT", Timestamp: "1.000002", Text: "Reminder: standup at 10."}},
		{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000003", Text: "<@U0BOT> when is standup?"}},
	}
	r := Build(thread, thread[2], testNames, opt)
	if got, want := r.Messages[2].Content, fenced(`a message by the app "Slackbot"`, "Reminder: standup at 10."); got != want {
		t.Errorf("Slackbot message = %q, want %q", got, want)
	}
	if got, want := r.Messages[3].Content, "when is standup?"; got != want {
		t.Errorf("trigger = %q, want %q (one person: no label)", got, want)
	}
}

func TestBuildTriggerPlacement(t *testing.T) {
	history := []slack.Message{
		{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000001", Text: "first"}},
		{Msg: slack.Msg{User: "U0BOT", BotID: "B0BOT", Timestamp: "1.000002", Text: "an answer", Metadata: Mark{Kind: MarkAnswer}.Metadata()}},
		{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000003", Text: "the question"}},
		{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000004", Text: "written after the question"}},
	}
	tests := []struct {
		name    string
		thread  []slack.Message
		trigger slack.Message
		want    string // contents after the system prompt, joined with " | "
	}{
		{"trigger in the thread: later messages are left out", history, history[2],
			"first | an answer | the question"},
		{"trigger not in the thread (a DM's recent history): appended last", history[:2],
			slack.Message{Msg: slack.Msg{User: "U01ALICE", Timestamp: "1.000003", Text: "the question"}},
			"first | an answer | the question"},
		{"no thread", nil, history[0], "first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Build(tt.thread, tt.trigger, testNames, testOptions())
			var got []string
			for _, m := range r.Messages[1:] {
				got = append(got, m.Content)
			}
			if strings.Join(got, " | ") != tt.want {
				t.Errorf("messages = %q, want %q", strings.Join(got, " | "), tt.want)
			}
		})
	}
}

// A user writes "@Ada :wave: can you help?" or pastes code with aligned columns after the
// mention: removing the mention must not eat the emoji's colon or the code's double spaces.
func TestPlainKeepsTextAfterTheMention(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"emoji after mention", "<@U0BOT> :wave: can you help?", ":wave: can you help?"},
		{"emoji only", "<@U0BOT> :+1:", ":+1:"},
		{"emoji right after mention", "<@U0BOT>:wave: hi", ":wave: hi"},
		{"colon after mention", "<@U0BOT>: hi", "hi"},
		{"comma after mention", "<@U0BOT>, hi", "hi"},
		{"mention at the end", "hi  <@U0BOT>", "hi"},
		{"spaces in pasted code", "<@U0BOT> why does this fail?\n```\nassert s == \"a  b\"\nx  = 1\n```",
			"why does this fail?\n```\nassert s == \"a  b\"\nx  = 1\n```"},
		{"spaces in inline code", "<@U0BOT>   what is `a  b`?", "what is `a  b`?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := builder{names: testNames, opt: testOptions()}
			if got := b.plain(slack.Message{Msg: slack.Msg{Text: tt.text}}); got != tt.want {
				t.Errorf("plain(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

// A Slack timestamp reads as its time (UTC, to the microsecond; a short fraction is tenths, not
// units), and a time writes as the timestamp that reads back as it.
func TestTSTime(t *testing.T) {
	for _, tc := range []struct {
		ts   string
		want time.Time
	}{
		{"1700000000.000100", time.Unix(1700000000, 100_000).UTC()},
		{"1700000000.5", time.Unix(1700000000, 500_000_000).UTC()},
		{"1700000000", time.Unix(1700000000, 0).UTC()},
	} {
		got := TSTime(tc.ts)
		if !got.Equal(tc.want) || got.Location() != time.UTC {
			t.Errorf("TSTime(%q) = %v, want %v", tc.ts, got, tc.want)
		}
		if back := TSTime(TS(got)); !back.Equal(got) {
			t.Errorf("TSTime(TS(%v)) = %v", got, back)
		}
	}
	if got := TS(time.Unix(1700000000, 100_000)); got != "1700000000.000100" {
		t.Errorf("TS = %q, want 1700000000.000100", got)
	}
}
