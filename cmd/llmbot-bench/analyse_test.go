package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmbot/llmbot/convo"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

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
		k, ok := s.shows(tt.text)
		if k != tt.shows || ok != tt.ok {
			t.Errorf("shows(%q) = %d, %v; want %d, %v", tt.text, k, ok, tt.shows, tt.ok)
		}
	}
}

func TestNewScriptTooLong(t *testing.T) {
	long := strings.Repeat("word ", convo.MrkdwnLimit)
	if _, err := newScript([]string{long}); err != errTooLong {
		t.Errorf("err = %v, want errTooLong", err)
	}
}

func TestAnalyse(t *testing.T) {
	hello := []string{"Hello", " world", "."}
	times := []time.Time{at(100), at(200), at(300)}
	post := func(ms int, ts, text string) botWrite { return botWrite{at: at(ms), ts: ts, post: true, text: text} }
	edit := func(ms int, ts, text string) botWrite { return botWrite{at: at(ms), ts: ts, text: text} }
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
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 1},
		},
		{
			name: "one edit shows everything", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(1300, "1", "Hello world.")},
			want: outcome{status: complete, lags: ms(1200, 1100, 1000), firstText: 1200 * time.Millisecond, hasFirst: true,
				finalLag: time.Second, hasFinal: true, messages: 1},
		},
		{
			name: "no reply at all", tokens: hello, times: times,
			want: outcome{status: lost, hidden: 3},
		},
		{
			name: "placeholder never replaced", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…")},
			want:   outcome{status: lost, hidden: 3, messages: 1},
		},
		{
			name: "partial answer with a note", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(250, "1", "Hello world"),
				edit(900, "1", "Hello world\n\n_The answer was cut off._")},
			want: outcome{status: wrong, lags: ms(150, 50), firstText: 150 * time.Millisecond, hasFirst: true,
				hidden: 1, messages: 1, unmatched: 1},
		},
		{
			name: "final text then overwritten", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(350, "1", "Hello world."), edit(500, "1", "Hello")},
			want: outcome{status: wrong, lags: ms(250, 150, 50), firstText: 250 * time.Millisecond, hasFirst: true,
				finalLag: 50 * time.Millisecond, hasFinal: true, messages: 1},
		},
		{
			name: "an answer shown twice is wrong", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), post(60, "2", "Thinking…"), edit(400, "2", "Hello world."),
				edit(450, "1", "Hello world.")},
			want: outcome{status: wrong, lags: ms(300, 200, 100), firstText: 300 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 2, unmatched: 1},
		},
		{
			name: "an answer continued in a second message", tokens: hello, times: times,
			writes: []botWrite{post(150, "1", "Hello"), post(400, "2", "world.")},
			want: outcome{status: complete, lags: ms(50, 200, 100), firstText: 50 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 2},
		},
		{
			name: "writes out of the model's order never go back", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(320, "1", "Hello world."), edit(330, "1", "Hello world.")},
			want: outcome{status: complete, lags: ms(220, 120, 20), firstText: 220 * time.Millisecond, hasFirst: true,
				finalLag: 20 * time.Millisecond, hasFinal: true, messages: 1},
		},
		{
			name: "invisible token counts as shown with the text before it", tokens: []string{"Hi", " ", "there"},
			times:  times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(250, "1", "Hi"), edit(400, "1", "Hi there")},
			want: outcome{status: complete, lags: ms(150, 50, 100), firstText: 150 * time.Millisecond, hasFirst: true,
				finalLag: 100 * time.Millisecond, hasFinal: true, messages: 1},
		},
		{
			name: "a write stamped before the token's record counts as no wait", tokens: hello, times: times,
			writes: []botWrite{post(50, "1", "Thinking…"), edit(99, "1", "Hello"), edit(300, "1", "Hello world.")},
			want: outcome{status: complete, lags: ms(0, 100, 0), firstText: 0, hasFirst: true,
				finalLag: 0, hasFinal: true, messages: 1},
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
