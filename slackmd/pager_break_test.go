package slackmd

import (
	"strings"
	"testing"
)

// A part sealed where it is shown keeps exactly that text, and the answer goes on in the next part
// from where the shown text ended; a part that ends where the Pager would not cut is not sealed.
func TestPagerBreak(t *testing.T) {
	for _, tc := range []struct {
		name      string
		shownFrom string // the answer the part was last shown from
		whole     string // the whole answer
		ok        bool
		parts     []string // the parts of the whole answer after the break (refused: the usual ones)
	}{
		{"after a paragraph", "Token buckets refill at a steady rate.\n\n",
			"Token buckets refill at a steady rate.\n\nEach request takes one.", true,
			[]string{"Token buckets refill at a steady rate.", "Each request takes one."}},
		{"after a list", "Steps:\n- fill the bucket\n- take a token\n\n",
			"Steps:\n- fill the bucket\n- take a token\n\nThat is all.", true,
			[]string{"Steps:\n\n• fill the bucket\n• take a token", "That is all."}},
		{"after a sentence", "Token buckets refill. ", "Token buckets refill. Each request takes one.", true,
			[]string{"Token buckets refill.", "Each request takes one."}},
		{"after a word", "Token buckets refill ", "Token buckets refill at a steady rate.", true,
			[]string{"Token buckets refill", "at a steady rate."}},
		{"after a number's point", "Version 3.", "Version 3.5 is out.", false, usual("Version 3.5 is out.")},
		{"inside a word", "Token buckets ref", "Token buckets refill at a steady rate.", false,
			usual("Token buckets refill at a steady rate.")},
		{"after a line of a list item", "Steps:\n- fill the bucket\n", "Steps:\n- fill the bucket\n- take a token\n", true,
			[]string{"Steps:\n\n• fill the bucket", "• take a token"}},
		{"inside a quote", "> Token buckets refill. ", "> Token buckets refill. At a steady rate.", true,
			[]string{"> Token buckets refill.", "> At a steady rate."}},
		{"inside a code block", "```go\nx := 1\n", "```go\nx := 1\ny := 2\n```\n", false,
			usual("```go\nx := 1\ny := 2\n```\n")},
		{"inside a table", "| a | b |\n|---|---|\n| 1 | 2 |\n", "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n", false,
			usual("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n")},
		{"after a heading's marker", "## ", "## Overview\n\nBuckets refill.", false, usual("## Overview\n\nBuckets refill.")},
		{"inside a heading", "## Overview of ", "## Overview of tokens\n\nBuckets refill.", false,
			usual("## Overview of tokens\n\nBuckets refill.")},
		{"after a heading", "## Overview\n", "## Overview\nBuckets refill.", true, []string{"*Overview*", "Buckets refill."}},
		{"after a task's marker", "Steps:\n- [ ] ", "Steps:\n- [ ] fill the bucket\n", false, usual("Steps:\n- [ ] fill the bucket\n")},
		{"after a list item's marker", "Steps:\n- ", "Steps:\n- fill the bucket\n", false, usual("Steps:\n- fill the bucket\n")},
		{"after a quote's marker", "They say:\n\n> ", "They say:\n\n> Token buckets refill.", false, usual("They say:\n\n> Token buckets refill.")},
		{"inside bold", "Token **buckets. ", "Token **buckets. Refill** at a steady rate.", false,
			usual("Token **buckets. Refill** at a steady rate.")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPager(FormatMrkdwn, MrkdwnLimit)
			shown := p.Update(tc.shownFrom, false)
			if got := p.MayBreak(tc.shownFrom); got != tc.ok {
				t.Errorf("MayBreak = %t, want %t", got, tc.ok)
			}
			if got := p.Break(tc.shownFrom, shown[len(shown)-1]); got != tc.ok {
				t.Fatalf("Break = %t, want %t", got, tc.ok)
			}
			if got := p.Update(tc.whole, true); strings.Join(got, "|") != strings.Join(tc.parts, "|") {
				t.Errorf("parts %q\nwant  %q", got, tc.parts)
			}
		})
	}
}

// usual is how md is cut without a break.
func usual(md string) []string { return Split(md, FormatMrkdwn, MrkdwnLimit) }

// Break refuses a part that does not show what its answer renders to.
func TestPagerBreakNeedsTheShownText(t *testing.T) {
	p := NewPager(FormatMrkdwn, MrkdwnLimit)
	p.Update("One.\n", false)
	if p.Break("One.\n", "Something else") {
		t.Error("Break sealed a part that shows other text")
	}
	if got := p.Update("One.\nTwo.", true); len(got) != 1 {
		t.Errorf("parts %q, want one after the refused break", got)
	}
}

func TestSentenceEnd(t *testing.T) {
	for _, tc := range []struct {
		md   string
		want bool
	}{
		{"One.\n", true},
		{"One. ", true},
		{"Really? ", true},
		{"Steps: ", true},
		{"He said \"go.\" ", true},
		{"**Done.** ", true},
		{"One.", false}, // "One.5" may follow
		{"Version 3.", false},
		{"Token buckets ", false},
		{"", false},
	} {
		if got := SentenceEnd(tc.md); got != tc.want {
			t.Errorf("SentenceEnd(%q) = %t, want %t", tc.md, got, tc.want)
		}
	}
}
