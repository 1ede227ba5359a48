package slackmd

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// genMarkdown builds a random answer from the constructs models write, including emoji,
// CJK text, long words, links and code blocks, so that cuts fall everywhere.
func genMarkdown(rng *rand.Rand, blocks int) string {
	words := []string{"the", "answer", "is", "simple:", "use", "a", "map.", "Then", "check", "again!",
		"日本語の文章です。", "emoji 👍🏽", "family 👨‍👩‍👧", "flag 🇫🇷", "naïve", "e\u0301", "x<y", "a&b", "@here", "<!channel>",
		"**bold text**", "*italic*", "~~struck~~", "`code & <b>`", "[a link](https://example.com/a?b=1&c=2)",
		"https://go.dev/doc", "<@U123ABC>", "Why?", "Really.", "averyveryveryverylongwordwithoutanyspacesatallinsideitxxxxxxxxxxxx"}
	sentence := func(n int) string {
		var sb strings.Builder
		for i := range n {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(words[rng.IntN(len(words))])
		}
		return sb.String()
	}
	var sb strings.Builder
	for b := range blocks {
		if b > 0 {
			sb.WriteString("\n\n")
		}
		switch rng.IntN(10) {
		case 9: // list items whose text starts on the next line, and a nested quote
			fmt.Fprintf(&sb, "-\n  %s\n-\n  %s\n\n> > %s", sentence(3), sentence(2+rng.IntN(30)), sentence(5))
		case 0:
			fmt.Fprintf(&sb, "%s %s", strings.Repeat("#", 1+rng.IntN(3)), sentence(3+rng.IntN(5)))
		case 1, 2:
			n := 1 + rng.IntN(3)
			for l := range n {
				if l > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString(sentence(5 + rng.IntN(60)))
			}
		case 3:
			for i := range 2 + rng.IntN(6) {
				if i > 0 {
					sb.WriteByte('\n')
				}
				if rng.IntN(3) == 0 {
					fmt.Fprintf(&sb, "   - %s", sentence(2+rng.IntN(10)))
				} else {
					fmt.Fprintf(&sb, "%d. %s", i+1, sentence(2+rng.IntN(20)))
				}
			}
		case 4:
			fmt.Fprintf(&sb, "```%s\n", []string{"", "go", "python"}[rng.IntN(3)])
			for i := range 1 + rng.IntN(40) {
				fmt.Fprintf(&sb, "line %d: x := a < b && c > d // %s\n", i, strings.Repeat("é", rng.IntN(20)))
			}
			sb.WriteString("```")
		case 5:
			sb.WriteString("| Name | Value |\n|---|---:|\n")
			for i := range 1 + rng.IntN(8) {
				fmt.Fprintf(&sb, "| %s | %d |\n", sentence(1+rng.IntN(3)), i)
			}
		case 6:
			for i := range 1 + rng.IntN(4) {
				if i > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString("> " + sentence(3+rng.IntN(30)))
			}
		case 7:
			sb.WriteString("---")
		case 8:
			sb.WriteString(sentence(1 + rng.IntN(200)))
		}
	}
	return sb.String()
}

var (
	fenceRE  = regexp.MustCompile("`{3,}[^`\\s]*")
	prefixRE = regexp.MustCompile(`(?m)^[ >]*`)
	spaceRE  = regexp.MustCompile(`\s+`)
)

// normal drops what a cut may add or remove: whitespace, code fences with their language
// (closed and reopened at cuts) and line prefixes (repeated after mid-line cuts).
func normal(s string) string {
	s = fenceRE.ReplaceAllString(s, "")
	s = prefixRE.ReplaceAllString(s, "")
	return spaceRE.ReplaceAllString(s, "")
}

func checkParts(t *testing.T, parts []string, limit int, what string) {
	t.Helper()
	for i, p := range parts {
		if n := len16(p); n > limit {
			t.Fatalf("%s: part %d has %d UTF-16 units, over the limit %d:\n%s", what, i, n, limit, p)
		}
		if !utf8.ValidString(p) {
			t.Fatalf("%s: part %d is not valid UTF-8", what, i)
		}
		if strings.TrimSpace(p) == "" {
			t.Fatalf("%s: part %d is empty", what, i)
		}
	}
}

func TestSplitKeepsEverything(t *testing.T) {
	for seed := range rounds(30) {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		md := genMarkdown(rng, 1+rng.IntN(30))
		for _, f := range []Format{FormatMrkdwn, FormatMarkdown} {
			for _, limit := range []int{100, 237, 1000, MrkdwnLimit} {
				parts := Split(md, f, limit)
				what := fmt.Sprintf("seed %d format %d limit %d", seed, f, limit)
				checkParts(t, parts, limit, what)
				if got, want := normal(strings.Join(parts, "\n")), normal(Render(md, f)); got != want {
					t.Fatalf("%s: parts do not read as the whole answer\ngot  %q\nwant %q\nmd:\n%s", what, got, want, md)
				}
			}
		}
	}
}

func TestPagerStreamingSealsAndKeepsEverything(t *testing.T) {
	for seed := range rounds(8) {
		rng := rand.New(rand.NewPCG(uint64(seed), 2))
		md := genMarkdown(rng, 1+rng.IntN(30))
		for _, f := range []Format{FormatMrkdwn, FormatMarkdown} {
			for _, limit := range []int{120, 1000} {
				what := fmt.Sprintf("seed %d format %d limit %d", seed, f, limit)
				p := NewPager(f, limit)
				var prev []string
				sealedEarly := false
				for n := 0; n < len(md); {
					n = min(len(md), n+1+rng.IntN(100))
					for n < len(md) && !utf8.RuneStart(md[n]) {
						n++
					}
					parts := p.Update(md[:n], false)
					checkParts(t, parts, limit, what)
					checkSealed(t, prev, parts, what+fmt.Sprintf(" at %d", n))
					prev = parts
					sealedEarly = sealedEarly || len(parts) > 1
				}
				if len(md) > 20*limit && !sealedEarly {
					t.Errorf("%s: a %d byte answer sealed no part while streaming", what, len(md))
				}
				parts := p.Update(md, true)
				checkParts(t, parts, limit, what)
				checkSealed(t, prev, parts, what+" final")
				if got, want := normal(strings.Join(parts, "\n")), normal(Render(md, f)); got != want {
					t.Fatalf("%s: streamed parts do not read as the whole answer\ngot  %q\nwant %q\nmd:\n%s", what, got, want, md)
				}
			}
		}
	}
}

// checkSealed checks that every part but the last of prev is unchanged in cur.
func checkSealed(t *testing.T, prev, cur []string, what string) {
	t.Helper()
	if len(prev) == 0 {
		return
	}
	if len(cur) < len(prev)-1 {
		t.Fatalf("%s: %d parts after %d", what, len(cur), len(prev))
	}
	for i := range len(prev) - 1 {
		if prev[i] != cur[i] {
			t.Fatalf("%s: sealed part %d changed\nwas %q\nnow %q", what, i, prev[i], cur[i])
		}
	}
}

// rounds is how many random inputs a property test tries: fewer with -race or -short.
func rounds(n int) int {
	if raceEnabled || testing.Short() {
		return max(n/4, 2)
	}
	return n
}

func TestPagerUpdate(t *testing.T) {
	tests := []struct {
		name  string
		md    string
		final bool
		limit int
		want  []string
	}{
		{"empty answer has no parts", "", true, 100, []string{}},
		{"blank answer has no parts", "  \n\n ", false, 100, []string{}},
		{"short answer is one part", "Hello **world**", true, 100, []string{"Hello *world*"}},
		{"unclosed bold while streaming reads as bold", "Some **bold te", false, 100, []string{"Some *bold te*"}},
		{"unclosed code span while streaming", "Run `go te", false, 100, []string{"Run `go te`"}},
		{"unclosed bold in the final text stays literal", "Some **bold te", true, 100, []string{"Some **bold te"}},
		{"unclosed fence while streaming shows as code", "```go\nfmt.Println(", false, 100, []string{"```\nfmt.Println(\n```"}},
		{"growing last line that looks like a heading is not sealed",
			strings.Repeat("word ", 30) + "\n#", false, 100,
			[]string{strings.TrimSpace(strings.Repeat("word ", 19)) + " …"}},
		{"paragraphs split at the blank line",
			strings.Repeat("a", 60) + "\n\n" + strings.Repeat("b", 60), true, 100,
			[]string{strings.Repeat("a", 60), strings.Repeat("b", 60)}},
		{"code split reopens the fence with its language (markdown)",
			"```go\n" + strings.Repeat("x := 1\n", 20) + "```", true, 100, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := FormatMrkdwn
			if strings.Contains(tt.name, "(markdown)") {
				f = FormatMarkdown
			}
			got := NewPager(f, tt.limit).Update(tt.md, tt.final)
			if tt.want == nil {
				checkParts(t, got, tt.limit, tt.name)
				for i, p := range got {
					if !strings.HasPrefix(p, "```go\n") || !strings.HasSuffix(p, "\n```") {
						t.Errorf("part %d is not a complete go code block:\n%s", i, p)
					}
				}
				if len(got) < 2 {
					t.Errorf("got %d parts, want several", len(got))
				}
				return
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("parts = %q\nwant    %q", got, tt.want)
			}
		})
	}
}

func TestPagerSealsAtStableBoundaries(t *testing.T) {
	p := NewPager(FormatMrkdwn, 100)
	first := strings.Repeat("a", 80)
	// The first paragraph is complete once the second one starts: it is sealed.
	parts := p.Update(first+"\n\nsecond paragraph that is long", false)
	if len(parts) != 2 || parts[0] != first || parts[1] != "second paragraph that is long" {
		t.Fatalf("parts = %q", parts)
	}
	// More text never changes the sealed part.
	parts = p.Update(first+"\n\nsecond paragraph that is long, longer now", false)
	if len(parts) != 2 || parts[0] != first {
		t.Fatalf("parts = %q", parts)
	}
	parts = p.Update(first+"\n\nsecond paragraph that is long, longer now.", true)
	if got, want := fmt.Sprintf("%q", parts), fmt.Sprintf("%q", []string{first, "second paragraph that is long, longer now."}); got != want {
		t.Errorf("final parts = %s, want %s", got, want)
	}
}

// TestSplitHardCuts: text without any boundary is cut hard, but never inside a flag (a pair
// of regional indicators), an emoji ZWJ sequence or a link that fits in a part; a link longer
// than a whole part is cut where it must be (nothing lost, no panic).
func TestSplitHardCuts(t *testing.T) {
	const flag, coder = "🇯🇵", "👩🏽\u200d💻" // 4 and 7 UTF-16 units
	longURL := "https://example.com/" + strings.Repeat("x", 150)
	tests := []struct {
		name  string
		md    string
		f     Format
		limit int
		want  []string
	}{
		{"flags stay whole (mrkdwn)", "a" + strings.Repeat(flag, 60), FormatMrkdwn, 100,
			[]string{"a" + strings.Repeat(flag, 24), strings.Repeat(flag, 25), strings.Repeat(flag, 11)}},
		{"flags stay whole (markdown)", "a" + strings.Repeat(flag, 60), FormatMarkdown, 100,
			[]string{"a" + strings.Repeat(flag, 24), strings.Repeat(flag, 25), strings.Repeat(flag, 11)}},
		{"ZWJ sequences stay whole", "a" + strings.Repeat(coder, 30), FormatMrkdwn, 100,
			[]string{"a" + strings.Repeat(coder, 14), strings.Repeat(coder, 14), strings.Repeat(coder, 2)}},
		{"a link that fits moves to the next part (mrkdwn)", strings.Repeat("x", 80) + "[label](https://example.com/abc)", FormatMrkdwn, 100,
			[]string{strings.Repeat("x", 80), "<https://example.com/abc|label>"}},
		{"a link that fits moves to the next part (markdown)", strings.Repeat("x", 80) + "[label](https://example.com/abc)", FormatMarkdown, 100,
			[]string{strings.Repeat("x", 80), "[label](https://example.com/abc)"}},
		{"a link longer than a part is cut inside", "see [label](" + longURL + ") end", FormatMrkdwn, 100,
			[]string{"see", "<" + longURL[:99], longURL[99:] + "|label> end"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.md, tt.f, tt.limit)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("parts = %q\nwant    %q", got, tt.want)
			}
		})
	}
}

// While an answer streams, the preview of its growing last line showed "****" right after
// the model wrote "**", a code block after "~~" at a line start ("~~~~" is a fence), and a
// half-written link as literal "[the docs](https://go.d" text.
func TestPagerPreviewShowsNoBrokenMarkup(t *testing.T) {
	tests := []struct {
		name, md string
		want     []string
	}{
		{"half link", "See [the docs](https://go.dev/doc/eff", []string{"See"}},
		{"half link, path with underscore", "See [the docs](https://go.dev/doc/effective_", []string{"See"}},
		{"half link after a whole one", "A [b](https://x.io) and [c](https://y", []string{"A <https://x.io|b> and"}},
		{"just opened bold", "Details for **", []string{"Details for"}},
		{"bold opened after a closed one", "A **b** and **", []string{"A *b* and"}},
		{"strike opened at a line start", "Intro.\n\n~~", []string{"Intro."}},
		{"bold with text is still closed", "Some **bold te", []string{"Some *bold te*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NewPager(FormatMrkdwn, MrkdwnLimit).Update(tt.md, false)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("preview of %q = %q, want %q", tt.md, got, tt.want)
			}
		})
	}
}

// A streaming Pager parses again from the first line of a top-level block it has not sealed
// whole. For a list or a quote whose first line holds no text ("-" alone, then the item's
// text), that line is the marker's, not the line of the first text: parsed from there, the
// item's text is another block ("**bold**" over a "-" line is a heading), the offsets into
// the old rendering no longer fit: Update would panic, or lose text and cut a character.
func TestPagerStreamingListItemWithEmptyFirstLine(t *testing.T) {
	const rest = "\n 日本語の文章です。 check `code & <b>` family 👨‍👩‍👧 simple: Really. ~~struck~"
	const more = "flag 🇫🇷 <@U123ABC> Really. again! chec"
	tests := []struct{ name, md string }{
		{"item text starts with a marker character", "```\n```\n-\n  **bold text** **bold text**\n-" + rest},
		{"quoted item", "```\n```\n> -\n>   **bold text** **bold text**\n> -" + rest},
		{"nested list on the item's second line", "```\n```\n-\n  - bold text bold text and more more more\n-" + rest},
		{"quote with an empty first line", "```\n```\n>\n> - bold text bold text and more more more\n> -" + rest},
	}
	for _, tt := range tests {
		for _, final := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, final %v", tt.name, final), func(t *testing.T) {
				p := NewPager(FormatMrkdwn, 120)
				prev := p.Update(tt.md, false)
				checkParts(t, prev, 120, "first update")
				parts := p.Update(tt.md+more, final)
				checkParts(t, parts, 120, "second update")
				checkSealed(t, prev, parts, "second update")
				if !final {
					prev, parts = parts, p.Update(tt.md+more, true)
					checkParts(t, parts, 120, "final update")
					checkSealed(t, prev, parts, "final update")
				}
				if got, want := normal(strings.Join(parts, "\n")), normal(Render(tt.md+more, FormatMrkdwn)); got != want {
					t.Fatalf("parts do not read as the whole answer\ngot  %q\nwant %q", got, want)
				}
			})
		}
	}
}

// A code block is closed at the end of a part and opened again in the next, which leaves
// room for its content only when its fences are short: a language that makes the reopening
// fence longer than a quarter of a part is left out of it, and a fence too long to repeat (in
// a deep quote, or made longer than the backtick runs in the code) is neither closed nor
// opened again. A fence longer than a whole part is cut like any text.
func TestSplitCodeBlockWithLongFences(t *testing.T) {
	lines := strings.Repeat("x := 1\n", 30)
	quoted := strings.Repeat("> ", 40)
	tests := []struct {
		name   string
		md     string
		f      Format
		limit  int
		prefix string // what every part but the first starts with ("": not checked)
		most   int    // the most parts (0: not checked)
	}{
		{"short language kept (markdown)", "```go\n" + lines + "```", FormatMarkdown, 100, "```go\nx := 1", 0},
		{"long language left out (markdown)", "```" + strings.Repeat("a", 25) + "\n" + lines + "```", FormatMarkdown, 100, "```\nx := 1", 0},
		{"long fence (markdown)", "~~~\n" + strings.Repeat("`", 60) + "\n" + lines + "~~~", FormatMarkdown, 100, "", 0},
		{"fence longer than a part (markdown)", "~~~\n" + strings.Repeat("`", 150) + "\n" + lines + "~~~", FormatMarkdown, 100, "", 10},
		{"deep quote (mrkdwn)", quoted + "```\n" + strings.Repeat(quoted+"x\n", 10), FormatMrkdwn, 100, "", 0},
		{"deep quote (markdown)", quoted + "```\n" + strings.Repeat(quoted+"x\n", 10), FormatMarkdown, 100, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := Split(tt.md, tt.f, tt.limit)
			checkParts(t, parts, tt.limit, tt.name)
			// A fence cut like text leaves runs of fewer than three backticks.
			read := func(s string) string { return strings.ReplaceAll(normal(s), "`", "") }
			if got, want := read(strings.Join(parts, "\n")), read(Render(tt.md, tt.f)); got != want {
				t.Fatalf("parts do not read as the whole answer\ngot  %q\nwant %q", got, want)
			}
			if len(parts) < 2 || tt.most > 0 && len(parts) > tt.most {
				t.Fatalf("%d parts, want from 2 to %d", len(parts), tt.most)
			}
			for i, p := range parts[1:] {
				if !strings.HasPrefix(p, tt.prefix) {
					t.Errorf("part %d = %q, want it to start with %q", i+1, p, tt.prefix)
				}
			}
		})
	}
}
