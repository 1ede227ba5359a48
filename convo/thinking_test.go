package convo

import (
	"strings"
	"testing"
)

func TestStripThinking(t *testing.T) {
	for _, tc := range []struct{ name, md, want string }{
		{"plain answer", "Hello **there**.", "Hello **there**."},
		{"leading space kept without a block", "\n  Hello", "\n  Hello"},
		{"block, then the answer", "<think>\nThe user greets me.\n</think>\n\nHello!", "Hello!"},
		{"block still open", "<think>\nThe user greets", ""},
		{"opening tag arriving", "<thi", ""},
		{"opening tag after whitespace", "\n\n<think>hmm</think>Hi", "Hi"},
		{"closing tag arriving", "<think>hmm</thi", ""},
		{"only whitespace after the block", "<think>hmm</think>\n\n", ""},
		{"a tag that is not the block", "<thing> is a placeholder", "<thing> is a placeholder"},
		{"a tag later in the answer stays", "Use <think>…</think> tags.", "Use <think>…</think> tags."},
		{"a second block is the answer's", "<think>a</think>Write <think>x</think> to think.", "Write <think>x</think> to think."},
		{"closing tag without the opening one is not hidden", "The user asks.\n</think>\n\nHi", "The user asks.\n</think>\n\nHi"},
		{"nothing", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StripThinking(tc.md); got != tc.want {
				t.Errorf("StripThinking(%q) = %q, want %q", tc.md, got, tc.want)
			}
		})
	}
}

// Stream mode appends what StripThinking returns: fed an answer a byte at a time, each result must
// extend the one before.
func TestStripThinkingOnlyGrows(t *testing.T) {
	for _, answer := range []string{
		"<think>\nLet me see: 2+2.\n</think>\n\nIt is **4**.",
		"  \n<think>a</think> \n b",
		"<thinking aloud> is not a block",
		"Plain text with </think> in it.",
		"\n\nHello",
	} {
		prev := ""
		for i := range len(answer) + 1 {
			got := StripThinking(answer[:i])
			if !strings.HasPrefix(got, prev) {
				t.Fatalf("%q: after %d bytes %q does not extend %q", answer, i, got, prev)
			}
			prev = got
		}
	}
}
