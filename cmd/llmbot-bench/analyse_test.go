package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/slackmd"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// The writes of the analysis' tests: for a post or an edit the message's whole text, for a stream's
// start, append and stop the Markdown the call adds.
func post(ms int, ts, text string) botWrite {
	return botWrite{at: at(ms), kind: fakeslack.WritePost, ts: ts, text: text}
}
func edit(ms int, ts, text string) botWrite {
	return botWrite{at: at(ms), kind: fakeslack.WriteUpdate, ts: ts, text: text}
}
func start(ms int, ts, md string) botWrite {
	return botWrite{at: at(ms), kind: fakeslack.WriteStart, ts: ts, text: md}
}
func appendMD(ms int, ts, md string) botWrite {
	return botWrite{at: at(ms), kind: fakeslack.WriteAppend, ts: ts, text: md}
}
func stop(ms int, ts, md string) botWrite {
	return botWrite{at: at(ms), kind: fakeslack.WriteStop, ts: ts, text: md}
}
func del(ms int, ts string) botWrite {
	return botWrite{at: at(ms), kind: fakeslack.WriteDelete, ts: ts}
}

func mustScript(t *testing.T, tokens ...string) *script {
	t.Helper()
	s, err := newScript(tokens)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewScript(t *testing.T) {
	s := mustScript(t, "Some ", "**bold", "** text", ".")
	if want := "Some *bold* text."; s.final != want {
		t.Errorf("final = %q, want %q", s.final, want)
	}
	tests := []struct {
		text  string
		shows int
		ok    bool
	}{
		{"Some", 1, true},
		{"Some *bold*", 2, true}, // the open span is closed in the preview
		{"Some *bold* text", 3, true},
		{"Some *bold* text.", 4, true},
		{"Thinking…", 0, false},
		{"Some *bold* text.\n\n_The answer was cut off._", 0, false},
	}
	for _, tt := range tests {
		k, ok := s.shows(view{text: tt.text})
		if k != tt.shows || ok != tt.ok {
			t.Errorf("shows(%q) = %d, %v; want %d, %v", tt.text, k, ok, tt.shows, tt.ok)
		}
	}
}

func TestNewScriptTooLong(t *testing.T) {
	long := strings.Repeat("word ", slackmd.MrkdwnLimit)
	if _, err := newScript([]string{long}); err != errTooLong {
		t.Errorf("err = %v, want errTooLong", err)
	}
}

func TestAnalyse(t *testing.T) {
	hello := []string{"Hello", " world", "."}
	times := []time.Time{at(100), at(200), at(300)}
	tests := []struct {
		name   string
		tokens []string
		times  []time.Time
		writes []botWrite
		want   outcome
	}{
		{
			name: "complete", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(250, "1", "Hello"), edit(400, "1", "Hello world.")},
			want: outcome{status: complete, lags: ms(150, 200, 100), firstText: 150 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 1, posted: true},
		},
		{
			name: "one edit shows everything", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(1300, "1", "Hello world.")},
			want: outcome{status: complete, lags: ms(1200, 1100, 1000), firstText: 1200 * time.Millisecond, hasFirst: true,
				finalLag: time.Second, hasFinal: true, messages: 1, posted: true},
		},
		{
			name: "no reply at all", tokens: hello, times: times,
			want: outcome{status: lost, hidden: 3},
		},
		{
			name: "placeholder never replaced", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…")},
			want:   outcome{status: lost, hidden: 3, messages: 1, posted: true},
		},
		{
			name: "partial answer with a note", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(250, "1", "Hello world"),
				edit(900, "1", "Hello world\n\n_The answer was cut off._")},
			want: outcome{status: wrong, lags: ms(150, 50), firstText: 150 * time.Millisecond, hasFirst: true,
				hidden: 1, messages: 1, posted: true, unmatched: 1},
		},
		{
			name: "final text then overwritten", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(350, "1", "Hello world."), edit(500, "1", "Hello")},
			want: outcome{status: wrong, lags: ms(250, 150, 50), firstText: 250 * time.Millisecond, hasFirst: true,
				finalLag: 50 * time.Millisecond, hasFinal: true, messages: 1, posted: true},
		},
		{
			name: "an answer shown twice is wrong", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), post(60, "2", "Thinking…"), edit(400, "2", "Hello world."),
				edit(450, "1", "Hello world.")},
			want: outcome{status: wrong, lags: ms(300, 200, 100), firstText: 300 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 2, posted: true, unmatched: 1},
		},
		{
			name: "an answer continued in a second message", tokens: hello, times: times,
			writes: []botWrite{post(150, "1", "Hello"), post(400, "2", "world.")},
			want: outcome{status: complete, lags: ms(50, 200, 100), firstText: 50 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 2, posted: true},
		},
		{
			name: "writes out of the model's order never go back", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(320, "1", "Hello world."), edit(330, "1", "Hello world.")},
			want: outcome{status: complete, lags: ms(220, 120, 20), firstText: 220 * time.Millisecond, hasFirst: true,
				finalLag: 20 * time.Millisecond, hasFinal: true, messages: 1, posted: true},
		},
		{
			name: "invisible token counts as shown with the text before it", tokens: []string{"Hi", " ", "there"},
			times:  times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(250, "1", "Hi"), edit(400, "1", "Hi there")},
			want: outcome{status: complete, lags: ms(150, 50, 100), firstText: 150 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 1, posted: true},
		},
		{
			name: "a write stamped before the token's record counts as no wait", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(99, "1", "Hello"), edit(300, "1", "Hello world.")},
			want: outcome{status: complete, lags: ms(0, 100, 0), firstText: 0, hasFirst: true,
				finalLag: 0, hasFinal: true, messages: 1, posted: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := analyse(mustScript(t, tt.tokens...), tt.times, tt.writes)
			if !slices.Equal(got.lags, tt.want.lags) {
				t.Errorf("lags = %v, want %v", got.lags, tt.want.lags)
			}
			got.lags, tt.want.lags = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("outcome = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

// TestNewScriptStream: a streamed message shows MarkdownStream's output, which only grows and holds
// the last word of a line back until it is whole; a token counts as shown once its text is out.
func TestNewScriptStream(t *testing.T) {
	tests := []struct {
		name   string
		tokens []string
		stream string // the whole output: Feed of every token, then Flush
		text   string
		shows  int
		ok     bool
	}{
		{"nothing yet", []string{"Hello", " world", "."}, "Hello world.", "", 0, true},
		{"a word is out with the space after it", []string{"Hello", " world", "."}, "Hello world.", "Hello ", 1, true},
		{"the rest comes with stopStream", []string{"Hello", " world", "."}, "Hello world.", "Hello world.", 3, true},
		{"Markdown, not mrkdwn", []string{"Some ", "**bold", "** text", "."}, "Some **bold** text.", "Some **bold** ", 2, true},
		{"mrkdwn is no streamed text", []string{"Some ", "**bold", "** text", "."}, "Some **bold** text.", "Some *bold* ", 0, false},
		{"no prefix of the output", []string{"Hello", " world", "."}, "Hello world.", "Hello world.\n\n_The answer was cut off._", 0, false},
		{"a code line is out whole", []string{"Code:\n", "```go\n", "x := 1\n", "y", " := 2\n", "```"},
			"Code:\n```go\nx := 1\ny := 2\n```", "Code:\n```go\nx := 1\n", 3, true},
		{"list items", []string{"- item", " 1: ", "one", ".\n", "- two"}, "- item 1: one.\n- two", "- item 1: one.\n", 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustScript(t, tt.tokens...)
			if s.stream != tt.stream {
				t.Errorf("stream = %q, want %q", s.stream, tt.stream)
			}
			k, ok := s.shows(view{text: tt.text, stream: true})
			if k != tt.shows || ok != tt.ok {
				t.Errorf("shows(%q) = %d, %v; want %d, %v", tt.text, k, ok, tt.shows, tt.ok)
			}
		})
	}
}

// TestAnalyseStream: answers written with native streaming, rebuilt from their start, append and stop
// writes (what MarkdownStream sends for "Hello", " world", ".": nothing, "Hello ", then "world." at the
// end), and answers written by editing in the same run.
func TestAnalyseStream(t *testing.T) {
	hello := []string{"Hello", " world", "."}
	times := []time.Time{at(100), at(200), at(300)}
	tests := []struct {
		name   string
		writes []botWrite
		want   outcome
	}{
		{
			name:   "streamed",
			writes: []botWrite{start(50, "1", ""), appendMD(250, "1", "Hello "), stop(400, "1", "world.")},
			want: outcome{status: complete, lags: ms(150, 200, 100), firstText: 150 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 1, streamed: true},
		},
		{
			name:   "the stream started with the first text",
			writes: []botWrite{start(250, "1", "Hello "), stop(400, "1", "world.")},
			want: outcome{status: complete, lags: ms(150, 200, 100), firstText: 150 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 1, streamed: true},
		},
		{
			name:   "edited after the stream stopped",
			writes: []botWrite{start(50, "1", ""), appendMD(250, "1", "Hello "), stop(400, "1", "world."), edit(500, "1", "Hello world.")},
			want: outcome{status: complete, lags: ms(150, 200, 100), firstText: 150 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 1, streamed: true},
		},
		{
			name:   "edited instead: the stream budget was used up",
			writes: []botWrite{post(250, "1", "Hello"), edit(400, "1", "Hello world.")},
			want: outcome{status: complete, lags: ms(150, 200, 100), firstText: 150 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 1, posted: true},
		},
		{
			name:   "stream started, nothing written",
			writes: []botWrite{start(50, "1", "")},
			want:   outcome{status: lost, hidden: 3, messages: 1, streamed: true},
		},
		{
			name:   "stopped with a note instead of the rest",
			writes: []botWrite{start(50, "1", ""), appendMD(250, "1", "Hello "), stop(900, "1", "world\n\n_The answer was cut off._")},
			want: outcome{status: wrong, lags: ms(150), firstText: 150 * time.Millisecond, hasFirst: true,
				hidden: 2, messages: 1, unmatched: 1, streamed: true},
		},
		{
			name:   "stopped without the rest",
			writes: []botWrite{start(50, "1", ""), appendMD(250, "1", "Hello "), stop(400, "1", "")},
			want: outcome{status: wrong, lags: ms(150), firstText: 150 * time.Millisecond, hasFirst: true,
				hidden: 2, messages: 1, streamed: true},
		},
		{
			name:   "text appended twice",
			writes: []botWrite{start(50, "1", ""), appendMD(250, "1", "Hello "), appendMD(260, "1", "Hello "), stop(400, "1", "world.")},
			want: outcome{status: wrong, lags: ms(150), firstText: 150 * time.Millisecond, hasFirst: true,
				hidden: 2, messages: 1, unmatched: 2, streamed: true},
		},
		{
			name: "a stream that could not be finished, replaced by a post",
			writes: []botWrite{start(50, "1", ""), appendMD(250, "1", "Hello "), post(600, "2", "Hello world."),
				del(650, "1")},
			want: outcome{status: complete, lags: ms(150, 450, 350), firstText: 150 * time.Millisecond, hasFirst: true,
				finalLag: 350 * time.Millisecond, hasFinal: true, messages: 1, streamed: true, posted: true},
		},
		{
			name:   "writes to a message never started are ignored",
			writes: []botWrite{appendMD(250, "9", "Hello "), stop(400, "9", "world.")},
			want:   outcome{status: lost, hidden: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := analyse(mustScript(t, hello...), times, tt.writes)
			if !slices.Equal(got.lags, tt.want.lags) {
				t.Errorf("lags = %v, want %v", got.lags, tt.want.lags)
			}
			got.lags, tt.want.lags = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("outcome = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

// TestScriptLengths: without a spread every answer has -tokens tokens; with one, the lengths differ,
// stay within tokens·(1 ± spread), and average about tokens over any first N conversations.
func TestScriptLengths(t *testing.T) {
	same := &scripts{tokens: 400}
	for i := range 10 {
		if got := same.length(i); got != 400 {
			t.Errorf("no spread: length(%d) = %d, want 400", i, got)
		}
	}
	spread := &scripts{tokens: 400, spread: 0.5, m: map[int]*script{}}
	for _, n := range []int{10, 50, 200} {
		sum, seen := 0, map[int]bool{}
		for i := range n {
			l := spread.length(i)
			if l < 200 || l > 600 {
				t.Errorf("spread 0.5: length(%d) = %d, want 200 to 600", i, l)
			}
			sum += l
			seen[l] = true
		}
		if mean := float64(sum) / float64(n); mean < 380 || mean > 420 {
			t.Errorf("N=%d: mean length %.1f, want about 400", n, mean)
		}
		if len(seen) < n*9/10 {
			t.Errorf("N=%d: only %d different lengths", n, len(seen))
		}
	}
	s, err := spread.get(1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(s.tokens), spread.length(1); got != want {
		t.Errorf("conversation 1's answer has %d tokens, want %d", got, want)
	}
}

// TestTrouble: a conversation not answered exactly once is described with its replica, its model
// requests, its writes from the questions on, and what its messages show.
func TestTrouble(t *testing.T) {
	s := mustScript(t, "Hello", " world.")
	writes := []botWrite{post(1000, "1.1", "Hello"), post(2500, "1.2", "Hello world.")}
	o := analyse(s, []time.Time{at(900), at(950)}, writes)
	got := trouble(3, 2, o, 2, s, writes, t0, "9.9", "C0000")
	want := `q3 (C0000 thread 9.9, its events to replica 2): wrong, 2 model requests, 2 bot messages; ` +
		`writes: post 1.1 at 1.00s, post 1.2 at 2.50s; shows: 1.1 "Hello" | 1.2 "Hello world."`
	if got != want {
		t.Errorf("trouble =\n%s\nwant\n%s", got, want)
	}
}
