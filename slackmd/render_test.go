package slackmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/golden"
)

func readTestdata(tb testing.TB, name string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

func TestRenderGolden(t *testing.T) {
	for _, name := range []string{"constructs", "tables", "lists", "safety", "partial"} {
		t.Run(name, func(t *testing.T) {
			md := readTestdata(t, "render_"+name+".md")
			got := "=== mrkdwn\n" + Render(md, FormatMrkdwn) + "\n=== markdown\n" + Render(md, FormatMarkdown) + "\n"
			golden.Check(t, "render_"+name, got)
		})
	}
}

// dumpParts shows parts for golden files.
func dumpParts(parts []string) string {
	var sb strings.Builder
	for i, p := range parts {
		fmt.Fprintf(&sb, "--- part %d (%d)\n%s\n", i+1, len16(p), p)
	}
	return sb.String()
}

func TestSplitGolden(t *testing.T) {
	var long strings.Builder
	long.WriteString("Intro paragraph before the code.\n\n```python\n")
	for i := range 40 {
		fmt.Fprintf(&long, "print('line %02d: a < b and c & d')\n", i)
	}
	long.WriteString("```\n\nAfter the code. ")
	long.WriteString(strings.Repeat("Emoji 👩🏽‍💻 and 🇯🇵 flags, 日本語のテキスト、そして文。 ", 12))
	long.WriteString("\n\n> A quote that goes on and on. " + strings.Repeat("It keeps going with more words. ", 12))
	long.WriteString("\n\n- item with a [link that must not be cut](https://example.com/a/very/long/path) " +
		strings.Repeat("and words ", 20))
	long.WriteString("\n\n" + strings.Repeat("🙂", 300))
	md := long.String()
	tests := []struct {
		name  string
		f     Format
		limit int
	}{
		{"split_mrkdwn_300", FormatMrkdwn, 300},
		{"split_markdown_300", FormatMarkdown, 300},
		{"split_mrkdwn_1000", FormatMrkdwn, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := Split(md, tt.f, tt.limit)
			checkParts(t, parts, tt.limit, tt.name)
			golden.Check(t, tt.name, dumpParts(parts))
		})
	}
}

// mrkdwnCase is Markdown and what Render makes of it in mrkdwn.
type mrkdwnCase struct{ name, md, want string }

// checkMrkdwn renders each case's Markdown in mrkdwn and compares.
func checkMrkdwn(t *testing.T, cases []mrkdwnCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if got := Render(tt.md, FormatMrkdwn); got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.md, got, tt.want)
			}
		})
	}
}

// An answer about Markdown itself shows fences: "type ``` to open a block", a ````markdown
// block holding a ```go fence, a lone backtick as inline code. mrkdwn has no longer fences and code
// cannot hold a backtick, so only the renderer's own fences may be ``` runs.
func TestRenderMrkdwnBackticksInCode(t *testing.T) {
	const wj = wordJoiner
	tests := []mrkdwnCase{
		{"inline code with fence", "Type ` ``` ` to open a block.", "Type ``" + wj + "` to open a block."},
		{"inline code with backtick", "Use `` ` `` for inline code.", "Use ` for inline code."},
		{"inline code without backtick", "Run `go test` now.", "Run `go test` now."},
		{"code block showing a fence", "````markdown\n```go\nx := 1\n```\n````", "```\n``" + wj + "`go\nx := 1\n``" + wj + "`\n```"},
		{"bare fence in text", "Start a block with ``` and end it the same way:\n\n```python\nprint(1)\n```\n\nThen **bold** text.",
			"Start a block with ``" + wj + "` and end it the same way:\n\n```\nprint(1)\n```\n\nThen *bold* text."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Render(tt.md, FormatMrkdwn)
			if got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.md, got, tt.want)
			}
			// Every ``` run must be a fence of a block the renderer wrote: alone on its line, and paired.
			fences := 0
			for _, l := range strings.Split(got, "\n") {
				if strings.TrimSpace(l) == "```" {
					fences++
				}
			}
			if n := strings.Count(got, "```"); n != fences || fences%2 != 0 {
				t.Errorf("Render(%q): %d ``` runs, %d of them fence lines: Slack pairs them wrongly", tt.md, n, fences)
			}
		})
	}
}

// Slack formats *bold*, _italic_ and ~strike~ only at word boundaries: "2*3*4" rendered as
// "2_3_4" reads as literal underscores (and the product changes meaning), so emphasis next
// to an ASCII letter or digit keeps the model's text; next to CJK text, which has no
// spaces, word joiners give Slack the boundary it needs.
func TestRenderMrkdwnEmphasisNextToLetters(t *testing.T) {
	const wj = wordJoiner
	tests := []mrkdwnCase{
		{"math product", "The volume is 2*3*4 = 24.", "The volume is 2*3*4 = 24."},
		{"latex", "Inline $a*b*c$ here.", "Inline $a*b*c$ here."},
		{"intraword italic", "Call foo*bar* now.", "Call foo*bar* now."},
		{"intraword bold", "Use **un**likely here.", "Use **un**likely here."},
		{"intraword strike", "A x~~y~~z b.", "A x~~y~~z b."},
		{"CJK italic", "这是*重要*的内容", "这是" + wj + "_重要_" + wj + "的内容"},
		{"CJK bold", "这是**重要**的内容", "这是" + wj + "*重要*" + wj + "的内容"},
		{"between spaces", "A *b* and **c**, (_d_).", "A _b_ and *c*, (_d_)."},
		{"snake_case", "Call snake_case_name now.", "Call snake_case_name now."},
		// Inside bold (or a heading, bold in mrkdwn) the model's "*" would close the bold early:
		// the span is formatted instead, as next to CJK (found by review).
		{"intraword italic inside bold", "**Use foo*bar* here**", "*Use foo" + wj + "_bar_ here*"},
		{"intraword italic in a heading", "## Use foo*bar* here", "*Use foo" + wj + "_bar_ here*"},
	}
	checkMrkdwn(t, tests)
}

// mrkdwn formatting does not span lines: a bold sentence the model wraps over two lines
// ("**first line  \nsecond line**") showed stray "*" on both. Each line gets its own markers.
func TestRenderMrkdwnEmphasisAcrossLineBreak(t *testing.T) {
	tests := []mrkdwnCase{
		{"bold soft break", "**bold\nacross lines**", "*bold*\n*across lines*"},
		{"bold hard break", "**first line  \nsecond line**", "*first line*\n*second line*"},
		{"italic soft break", "_italic\nacross lines_", "_italic_\n_across lines_"},
		{"bold italic", "***both\nlines*** end", "_*both*_\n_*lines*_ end"},
		{"in a list item", "- **a\n  b**", "• *a*\n    *b*"},
		{"setext heading", "Two\nlines\n===", "*Two*\n*lines*"},
	}
	checkMrkdwn(t, tests)
}

// The model points users to a channel ("ask in #general", written <#C024BE7LR|general>):
// a channel link pings no one, so it stays a link instead of literal "&lt;#C…&gt;" text;
// user and group mentions next to it stay neutralised.
func TestRenderMrkdwnChannelLink(t *testing.T) {
	const wj = wordJoiner
	tests := []mrkdwnCase{
		{"with and without label", "Ask in <#C024BE7LR|general> or <#C024BE7LR>.", "Ask in <#C024BE7LR|general> or <#C024BE7LR>."},
		{"private, empty label", "See <#G0PRIV|>.", "See <#G0PRIV|>."},
		{"label with underscore, in bold", "Try **<#C1AB|dev_ops>** now", "Try *<#C1AB|dev_ops>* now"},
		{"mentions stay neutralised", "<#C024BE7LR> <@U024BE7LH> <!here>", "<#C024BE7LR> &lt;" + wj + "@U024BE7LH&gt; &lt;" + wj + "!here&gt;"},
		{"in code", "`<#C024BE7LR>`", "`&lt;#C024BE7LR&gt;`"},
		{"not a channel id", "<#general>", "&lt;#general&gt;"},
	}
	checkMrkdwn(t, tests)
}

// A code block keeps its language in Markdown when it is one: a short name. An info string
// longer than that could fill a part on its own, and one with a backtick would keep a backtick
// fence from opening.
func TestRenderMarkdownCodeLanguage(t *testing.T) {
	tests := []struct{ name, md, want string }{
		{"a language", "```go\nx\n```", "```go\nx\n```"},
		{"words after the language", "```python title=a.py\nx\n```", "```python\nx\n```"},
		{"too long for a language", "```" + strings.Repeat("a", 31) + "\nx\n```", "```\nx\n```"},
		{"a backtick in a tilde fence's language", "~~~a`b\nx\n~~~", "```\nx\n```"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Render(tt.md, FormatMarkdown); got != tt.want {
				t.Errorf("Render(%q) = %q, want %q", tt.md, got, tt.want)
			}
		})
	}
}
