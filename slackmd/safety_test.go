package slackmd

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestControlsStripped checks that no path from the model's text to Slack passes on a control
// character: Render in both formats, Split (the parts of post-and-edit replies) and a
// MarkdownStream fed whole or byte by byte (native streaming). Tab, newline and U+FFFD stay.
func TestControlsStripped(t *testing.T) {
	tests := []struct {
		name     string
		md       string
		mrkdwn   string
		markdown string
		stream   string
	}{
		{
			name:     "C0 controls and DEL",
			md:       "\x02Hello\x19 world\x7f!\x00\x1b",
			mrkdwn:   "Hello world!",
			markdown: "Hello world!",
			stream:   "Hello world!",
		},
		{
			name:     "C1 controls",
			md:       "caf\u0085e \u0080ok\u009f",
			mrkdwn:   "cafe ok",
			markdown: "cafe ok",
			stream:   "cafe ok",
		},
		{
			name:     "carriage returns",
			md:       "one\r\ntwo\rthree\r\n",
			mrkdwn:   "one\ntwothree",
			markdown: "one\ntwothree",
			stream:   "one\ntwothree\n",
		},
		{
			name:     "tab, newline and U+FFFD kept",
			md:       "a\tb \uFFFD\nc",
			mrkdwn:   "a\tb \uFFFD\nc",
			markdown: "a\tb \uFFFD\nc",
			stream:   "a\tb \uFFFD\nc",
		},
		{
			name:     "a control cannot hide a mention",
			md:       "<\x02@U123> and @\u0085here",
			mrkdwn:   "&lt;\u2060@U123&gt; and @\u2060here",
			markdown: "<\u2060@U123> and @\u2060here",
			stream:   "<\u2060@U123> and @\u2060here",
		},
		{
			name:     "character references of controls",
			md:       "x&#2;y&#x85;z&#13;",
			mrkdwn:   "xyz",
			markdown: "x&#2;y&#x85;z&#13;",
			stream:   "x&#2;y&#x85;z&#13;",
		},
		{
			name:     "code block",
			md:       "```\nred\x1b[31m\r\n```\n",
			mrkdwn:   "```\nred[31m\n```",
			markdown: "```\nred[31m\n```",
			stream:   "```\nred[31m\n```\n",
		},
		{
			name:     "control before a fence",
			md:       "\x02```\ncode\n",
			mrkdwn:   "```\ncode\n```",
			markdown: "```\ncode\n```",
			stream:   "```\ncode\n```\n",
		},
		{
			// Fed byte by byte, the stream sees "- \xc2" before the rest of U+0085 arrives.
			name:     "C1 control cut between deltas before a fence",
			md:       "- \u0085```\n  code\n",
			mrkdwn:   "• ```\n    code\n    ```",
			markdown: "- ```\n  code\n  ```",
			stream:   "- ```\n  code\n```\n",
		},
		{
			name:     "table cells",
			md:       "| a\x02 | b |\n|---|---|\n| &#1;c | d\u0085 |\n",
			mrkdwn:   "```\na | b\n--+--\nc | d\n```",
			markdown: "```\na | b\n--+--\nc | d\n```",
			stream:   "```\na | b\n--+--\nc | d\n```\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Render(tt.md, FormatMrkdwn); got != tt.mrkdwn {
				t.Errorf("Render mrkdwn = %q, want %q", got, tt.mrkdwn)
			}
			if got := Render(tt.md, FormatMarkdown); got != tt.markdown {
				t.Errorf("Render markdown = %q, want %q", got, tt.markdown)
			}
			if got, want := Split(tt.md, FormatMrkdwn, MrkdwnLimit), []string{tt.mrkdwn}; !slices.Equal(got, want) {
				t.Errorf("Split mrkdwn = %q, want %q", got, want)
			}
			for _, size := range []int{len(tt.md), 1} {
				if got := strings.Join(feedAll(tt.md, func() int { return size }), ""); got != tt.stream {
					t.Errorf("MarkdownStream in deltas of %d bytes = %q, want %q", size, got, tt.stream)
				}
			}
		})
	}
}

// TestPagerStreamingIgnoresControls streams answers full of controls (CRLF line ends, a
// control starting every line, C1 and DEL after sentences) into a Pager, and the same answers
// without them into another: both must show the same parts at every step. The Pager keeps an
// offset into the answer past its sealed parts, which must skip the removed bytes exactly, or
// text would be lost or repeated.
func TestPagerStreamingIgnoresControls(t *testing.T) {
	dirty := strings.NewReplacer("\n", "\r\n\x02", ". ", ".\x7f\u0085 ")
	for _, name := range []string{"render_constructs.md", "render_lists.md", "render_tables.md", "render_safety.md", "stream_answer.md"} {
		plain := readTestdata(t, name)
		md := dirty.Replace(plain)
		for _, f := range []Format{FormatMrkdwn, FormatMarkdown} {
			p, q := NewPager(f, 120), NewPager(f, 120)
			for n, step := 0, 0; n < len(md); step++ {
				n = min(len(md), n+1+step*37%100)
				for n < len(md) && !utf8.RuneStart(md[n]) {
					n++
				}
				final := n == len(md)
				clean, _ := stripControls(md[:n])
				if got, want := p.Update(md[:n], final), q.Update(clean, final); !slices.Equal(got, want) {
					t.Fatalf("%s, format %d, %d bytes in: parts differ from those of the answer without controls\ngot  %q\nwant %q", name, f, n, got, want)
				}
			}
		}
	}
}

func TestStripControlsDoesNotAllocateForCleanText(t *testing.T) {
	s := strings.Repeat("Plain text, *Markdown*, tabs\tand newlines\n, emoji 🙂, U+FFFD \uFFFD, é. ", 100)
	if n := testing.AllocsPerRun(100, func() { stripControls(s) }); n != 0 {
		t.Errorf("stripControls allocated %v times for text without controls", n)
	}
}
