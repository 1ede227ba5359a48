package slackmd

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/golden"
)

// feedAll streams md in the given chunk sizes and returns every non-empty output.
func feedAll(md string, sizes func() int) []string {
	s := NewMarkdownStream()
	var outs []string
	for len(md) > 0 {
		n := min(len(md), sizes())
		if out := s.Feed(md[:n]); out != "" {
			outs = append(outs, out)
		}
		md = md[n:]
	}
	if out := s.Flush(); out != "" {
		outs = append(outs, out)
	}
	return outs
}

func TestMarkdownStreamGolden(t *testing.T) {
	md := readTestdata(t, "stream_answer.md")
	// Deltas of 7 bytes, as a model's tokens arrive (cutting words, tokens and table rows).
	outs := feedAll(md, func() int { return 7 })
	var sb strings.Builder
	for i, o := range outs {
		fmt.Fprintf(&sb, "--- append %d\n%s\n", i+1, o)
	}
	golden.Check(t, "stream_answer", sb.String())
}

func TestMarkdownStreamChunkingDoesNotMatter(t *testing.T) {
	docs := []string{
		readTestdata(t, "stream_answer.md"),
		// Fences on list item lines: the line must wait while its marker is unfinished.
		"  - ~~~\n  **code**\n  ~~~\nafter\n",
		"1. ```bash\n   echo hi\n   ```\n",
		"12) ~~~\nx | y\n~~~",
		"> * ```\n> code | more\n",
		"+ 3. ~~~~\ncode",
		// Pipes after a word: the word may go out before the pipe arrives.
		"Name | Value\n---|---\nx | 1\n",
		"- a | b\n  -|-\n",
		"- a|b\n  -|-\n  c|d\n",
		"> Quoted tables:\n> | x | y |\n> |---|---|\n",
		" 00000A|\n|",
		"Name|Value\n---|---\nx | 1\n",
		// Closing fences after other white space than spaces.
		"0) ```0000\n \t  ```\nafter\n",
		"```\n\u00a0``` \nafter | x\n",
		"~~~\n \u2000~~~ \t\nafter\n",
	}
	for seed := range rounds(20) {
		rng := rand.New(rand.NewPCG(uint64(seed), 3))
		docs = append(docs, genMarkdown(rng, 1+rng.IntN(20)))
	}
	for i, md := range docs {
		want := strings.Join(feedAll(md, func() int { return len(md) }), "")
		if got := strings.Join(feedAll(md, func() int { return 1 }), ""); got != want {
			t.Fatalf("doc %d, fed a byte at a time: output depends on how the answer was chunked\ngot  %q\nwant %q", i, got, want)
		}
		for seed := range 5 {
			rng := rand.New(rand.NewPCG(uint64(seed), 4))
			got := strings.Join(feedAll(md, func() int { return 1 + rng.IntN(12) }), "")
			if got != want {
				t.Fatalf("doc %d, chunking seed %d: output depends on how the answer was chunked\ngot  %q\nwant %q", i, seed, got, want)
			}
		}
	}
}

func TestMarkdownStream(t *testing.T) {
	tests := []struct {
		name   string
		deltas []string
		want   []string // output of each Feed, then of Flush
	}{
		{"complete lines go out at once", []string{"Hello world.\nSecond"},
			[]string{"Hello world.\n", "Second"}},
		{"words of a growing line go out", []string{"Hello wor", "ld and more", "\n"},
			[]string{"Hello ", "world and ", "more\n", ""}},
		{"a mention split across deltas is neutralised", []string{"ping <!he", "re> and @every", "one now\n"},
			[]string{"ping ", "<\u2060!here> and ", "@\u2060everyone now\n", ""}},
		{"a table is held until it ends", []string{"| a | b |\n", "|---|---|\n", "| 1 | 2 |\n", "after\n"},
			[]string{"", "", "", "```\na | b\n--+--\n1 | 2\n```\nafter\n", ""}},
		{"a table at the end comes out at Flush", []string{"| a | b |\n|---|---|\n| 1 | 2 |"},
			[]string{"", "```\na | b\n--+--\n1 | 2\n```"}},
		{"a pipe line without a delimiter row is plain text", []string{"a|b\n", "c\n"},
			[]string{"", "a|b\nc\n", ""}},
		{"a header row whose first pipe comes after a word and a space is plain text (its first word may have gone out)",
			[]string{"Name | Value\n", "---|---\n", "x | 1\n"},
			[]string{"Name | Value\n", "", "---|---\nx | 1\n", ""}},
		{"a header row whose first cell is one word is held", []string{"Name| Value\n", "---|---\n", "x | 1\n", "\n"},
			[]string{"", "", "", "```\nName | Value\n-----+------\nx    | 1\n```\n\n", ""}},
		{"pipes in code are not tables", []string{"```\n", "| a | b |\n", "|---|---|\n", "```\n"},
			[]string{"```\n", "| a | b |\n", "|---|---|\n", "```\n", ""}},
		{"an unclosed fence is closed at Flush", []string{"```go\nfmt.Println(1)"},
			[]string{"```go\n", "fmt.Println(1)\n```\n"}},
		{"a growing line that may become a fence waits", []string{"``", "`\n"},
			[]string{"", "```\n", "```\n"}},
		{"an indented closing fence growing word by word still closes", []string{"```\ncode\n", "   ", "```\n", "| a | b |\n|---|---|\n| 1 | 2 |\n\n"},
			[]string{"```\ncode\n", "", "   ```\n", "```\na | b\n--+--\n1 | 2\n```\n\n", ""}},
		{"nothing in, nothing out", []string{""},
			[]string{"", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewMarkdownStream()
			var got []string
			for _, d := range tt.deltas {
				got = append(got, s.Feed(d))
			}
			got = append(got, s.Flush())
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("outputs = %q\nwant      %q", got, tt.want)
			}
		})
	}
}

// A model often puts a command's code block on a numbered step's line ("1. ```bash"): the
// fence was not seen, so its closing "```" opened a block that swallowed the table after it
// and got a stray closing fence at the end. The Pager's preview counts fences the same way.
func TestMarkdownStreamFenceOnAListItemLine(t *testing.T) {
	table := "| a | b |\n|---|---|\n| 1 | 2 |\n"
	aligned := "```\na | b\n--+--\n1 | 2\n```\n"
	tests := []struct {
		name   string
		deltas []string
		want   string
	}{
		{"whole lines", []string{"1. ```bash\n", "   echo hi\n", "   ```\n", "\n", table, "\nend\n"},
			"1. ```bash\n   echo hi\n   ```\n\n" + aligned + "\nend\n"},
		{"fence line streamed in pieces", []string{"1", ". ", "``", "`ba", "sh\n   echo", " hi\n   ```\n\n", table, "\nend\n"},
			"1. ```bash\n   echo hi\n   ```\n\n" + aligned + "\nend\n"},
		{"bullet item", []string{"- ```bash\n", "  echo hi\n", "  ```\n", "\n", table, "\nend\n"},
			"- ```bash\n  echo hi\n  ```\n\n" + aligned + "\nend\n"},
		{"indented bullet item a character at a time", append(strings.Split("  - ~~~\n  echo **hi**\n  ~~~\n\n", ""), table, "\nend\n"),
			"  - ~~~\n  echo **hi**\n  ~~~\n\n" + aligned + "\nend\n"},
		{"indented numbered item a character at a time", append(strings.Split(" 10. ```\n    echo hi\n    ```\n\n", ""), table, "\nend\n"),
			" 10. ```\n    echo hi\n    ```\n\n" + aligned + "\nend\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := feedDeltas(tt.deltas...); got != tt.want {
				t.Errorf("streamed =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	// Inside the list item's code block, "**" is code, not a bold span to close.
	md := "1. ```bash\n   echo **hi"
	if got, want := closeDangling(md), md; got != want {
		t.Errorf("closeDangling(%q) = %q, want it unchanged", md, got)
	}
}

func feedDeltas(deltas ...string) string {
	s := NewMarkdownStream()
	var sb strings.Builder
	for _, d := range deltas {
		sb.WriteString(s.Feed(d))
	}
	sb.WriteString(s.Flush())
	return sb.String()
}
