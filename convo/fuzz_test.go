package convo

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzSplit checks, for any text, that Split and a streaming Pager never panic, keep parts
// within the limit as valid UTF-8, lose nothing, and never change a sealed part.
func FuzzSplit(f *testing.F) {
	for _, name := range []string{"render_constructs.md", "render_tables.md", "render_lists.md", "render_safety.md", "stream_answer.md"} {
		f.Add(readTestdata(f, name), 120)
	}
	f.Add("```\n"+strings.Repeat("x", 500)+"\n```", 100)
	f.Add("- a\n  - b\n    > c **d** [e](https://f)\n", 100)
	f.Add("see [a link longer than a part](https://example.com/"+strings.Repeat("x", 300)+") 🇯🇵🇯🇵 end", 100)
	f.Fuzz(func(t *testing.T, md string, limit int) {
		if !utf8.ValidString(md) || len(md) > 20_000 {
			t.Skip()
		}
		limit = 100 + abs(limit)%2000
		for _, f := range []Format{FormatMrkdwn, FormatMarkdown} {
			parts := Split(md, f, limit)
			checkParts(t, parts, limit, "split")
			if got, want := normal(strings.Join(parts, "\n")), normal(Render(md, f)); got != want {
				t.Fatalf("format %d limit %d: parts do not read as the whole answer\ngot  %q\nwant %q", f, limit, got, want)
			}
			p := NewPager(f, limit)
			var prev []string
			for n := 0; n < len(md); {
				n = min(len(md), n+1+len(md)/7)
				for n < len(md) && !utf8.RuneStart(md[n]) {
					n++
				}
				parts := p.Update(md[:n], n == len(md))
				checkParts(t, parts, limit, "stream")
				checkSealed(t, prev, parts, "stream")
				prev = parts
			}
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
