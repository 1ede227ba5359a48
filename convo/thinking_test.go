package convo

import (
	"strings"
	"testing"
)

func TestThinkFilter(t *testing.T) {
	for _, tc := range []struct{ name, md, answer, final string }{
		{"plain answer", "Hello **there**.", "Hello **there**.", "Hello **there**."},
		{"leading space kept without a block", "\n  Hello", "\n  Hello", "\n  Hello"},
		{"block, then the answer", "<think>\nThe user greets me.\n</think>\n\nHello!", "Hello!", "Hello!"},
		{"block still open", "<think>\nThe user greets", "", ""},
		{"opening tag arriving", "<thi", "", "<thi"},
		{"an answer that looks like the tag's start", "\n<", "", "\n<"},
		{"opening tag after whitespace", "\n\n<think>hmm</think>Hi", "Hi", "Hi"},
		{"closing tag arriving", "<think>hmm</thi", "", ""},
		{"only whitespace after the block", "<think>hmm</think>\n\n", "", ""},
		{"a tag that is not the block", "<thing> is a placeholder", "<thing> is a placeholder", "<thing> is a placeholder"},
		{"a tag later in the answer stays", "Use <think>…</think> tags.", "Use <think>…</think> tags.", "Use <think>…</think> tags."},
		{"a second block is the answer's", "<think>a</think>Write <think>x</think> to think.", "Write <think>x</think> to think.", "Write <think>x</think> to think."},
		{"closing tag without the opening one is not hidden", "The user asks.\n</think>\n\nHi", "The user asks.\n</think>\n\nHi", "The user asks.\n</think>\n\nHi"},
		{"CRLF", "<think>\r\nhmm\r\n</think>\r\n\r\nHi", "Hi", "Hi"},
		{"nothing", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f ThinkFilter
			if got := f.Answer(tc.md); got != tc.answer {
				t.Errorf("Answer(%q) = %q, want %q", tc.md, got, tc.answer)
			}
			var g ThinkFilter
			if got := g.Final(tc.md); got != tc.final {
				t.Errorf("Final(%q) = %q, want %q", tc.md, got, tc.final)
			}
		})
	}
}

// Fed an answer a byte at a time, one filter gives what a fresh one gives for the whole content so
// far, and each result extends the one before (stream mode appends them), Final's too.
func TestThinkFilterFedByteByByte(t *testing.T) {
	for _, content := range []string{
		"<think>\nLet me see: 2+2.\n</think>\n\nIt is **4**.",
		"  \n<think>a</think> \n b",
		"<think>a</thi</think>nk>b",
		"<thinking aloud> is not a block",
		"Plain text with </think> in it.",
		"\n\nHello",
		"<",
	} {
		var f ThinkFilter
		prev := ""
		for i := range len(content) + 1 {
			var fresh ThinkFilter
			got, want := f.Answer(content[:i]), fresh.Answer(content[:i])
			if got != want {
				t.Fatalf("%q: after %d bytes %q, a fresh filter says %q", content, i, got, want)
			}
			if !strings.HasPrefix(got, prev) {
				t.Fatalf("%q: after %d bytes %q does not extend %q", content, i, got, prev)
			}
			prev = got
		}
		if final := f.Final(content); !strings.HasPrefix(final, prev) {
			t.Fatalf("%q: Final %q does not extend %q", content, final, prev)
		}
	}
}

// A stream that ends (Stop, an error, a stall, a length cut) right after the opening tag (models send
// "<think>" as one token) opened a block that never closed: no answer, not the tag itself (shown in
// Slack and replayed as the bot's answer in the thread's history).
func TestThinkFilterFinalOfAnOpeningTagAlone(t *testing.T) {
	for _, md := range []string{"<think>", "\n<think>", "  <think>"} {
		var f ThinkFilter
		if got := f.Answer(md); got != "" {
			t.Errorf("Answer(%q) = %q, want \"\"", md, got)
		}
		if got := f.Final(md); got != "" {
			t.Errorf("Final(%q) = %q, want \"\" (a block opened and never closed)", md, got)
		}
	}
}
