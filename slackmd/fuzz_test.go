package slackmd

import (
	"fmt"
	"slices"
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
	f.Add("```\n```\n-\n  **bold text** **bold text**\n-\n 日本語の文章です。 check `code & <b>` family 👨‍👩‍👧 simple: Really. ~~struck~flag 🇫🇷 <@U123ABC> Really. again! chec", 20)
	f.Add("```\n```\n> -\n>   **bold text** **bold text**\n> -\n 日本語の文章です。 check `code & <b>` family 👨‍👩‍👧 simple: Really. ~~struck~flag 🇫🇷 <@U123ABC> Really. again! chec", 20)
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

// FuzzPagerStream checks that a Pager streaming an answer in any pieces (sizes gives each
// Update's growth, 1 to 256 bytes) never panics, keeps its parts within the limit as valid
// UTF-8, never changes a sealed part, and ends with parts that read as the whole answer.
func FuzzPagerStream(f *testing.F) {
	for _, name := range []string{"render_constructs.md", "render_lists.md", "stream_answer.md"} {
		f.Add(readTestdata(f, name), []byte{40, 3, 200}, 0)
	}
	a := "```\n```\n-\n  **bold text** **bold text**\n-\n 日本語の文章です。 check `code & <b>` family 👨‍👩‍👧 simple: Really. ~~struck~"
	f.Add(a+"flag 🇫🇷 <@U123ABC> Really. again! chec", []byte{byte(len(a) - 1), 255}, 20)
	f.Fuzz(func(t *testing.T, md string, sizes []byte, limit int) {
		if !utf8.ValidString(md) || len(md) > 5000 {
			t.Skip()
		}
		limit = 100 + abs(limit)%1000
		for _, f := range []Format{FormatMrkdwn, FormatMarkdown} {
			p := NewPager(f, limit)
			var prev []string
			for n, i := 0, 0; n < len(md); i++ {
				step := 1 + len(md)/7
				if len(sizes) > 0 {
					step = 1 + int(sizes[i%len(sizes)])
				}
				n = min(len(md), n+step)
				for n < len(md) && !utf8.RuneStart(md[n]) {
					n++
				}
				parts := p.Update(md[:n], false)
				what := fmt.Sprintf("format %d limit %d, %d bytes in", f, limit, n)
				checkParts(t, parts, limit, what)
				checkSealed(t, prev, parts, what)
				prev = parts
			}
			parts := p.Update(md, true)
			what := fmt.Sprintf("format %d limit %d, final", f, limit)
			checkParts(t, parts, limit, what)
			checkSealed(t, prev, parts, what)
			if got, want := normal(strings.Join(parts, "\n")), normal(Render(md, f)); got != want {
				t.Fatalf("%s: parts do not read as the whole answer\ngot  %q\nwant %q", what, got, want)
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

// FuzzControls checks, for any answer, that no control character reaches Slack: Render in
// both formats, Split, a Pager streaming it, and a MarkdownStream fed in arbitrary chunks (cut
// anywhere, also inside a character) write no C0 control but tab and newline, no DEL and no
// C1 control. Each writes what it writes for the answer without its controls.
func FuzzControls(f *testing.F) {
	dirty := strings.NewReplacer("\n", "\r\n\x02", ". ", ".\x7f\u0085 ", "|", "\x19|")
	for _, name := range []string{"render_constructs.md", "render_tables.md", "render_safety.md", "stream_answer.md"} {
		f.Add(dirty.Replace(readTestdata(f, name)), []byte{7, 1, 30})
	}
	f.Add("\x02Hello\x19 world\x7f! caf\u0085e\r\n", []byte{1})
	f.Add("<\x02@U123> @\u0085here &\x1blt;!channel>", []byte{2, 3})
	f.Add("x&#2;y&#x85;z&#13;&#127; | a&#1; | b |\n|---|---|\n| &#x9f; | \x1b[31m |\n", []byte{5})
	f.Add("\x02```go\ncode\x00\r\n```\n- item\u0080\n  > quote\x1f", []byte{4, 1})
	f.Fuzz(func(t *testing.T, md string, sizes []byte) {
		if !utf8.ValidString(md) || len(md) > 5000 {
			t.Skip()
		}
		plain, _ := stripControls(md)
		size := func(i int) int { // the i-th chunk's length, 1 to 32 bytes, as sizes says
			if len(sizes) == 0 {
				return 1 + len(md)/7
			}
			return 1 + int(sizes[i%len(sizes)])%32
		}
		for _, f := range []Format{FormatMrkdwn, FormatMarkdown} {
			out := Render(md, f)
			checkNoControls(t, "Render", out)
			if want := Render(plain, f); out != want {
				t.Fatalf("format %d: Render = %q, want %q as without the controls", f, out, want)
			}
			parts := Split(md, f, 200)
			checkNoControls(t, "Split", strings.Join(parts, "\n"))
			p, q := NewPager(f, 200), NewPager(f, 200)
			for n, i := 0, 0; n < len(md); i++ {
				n = min(len(md), n+8*size(i)) // coarser than a stream's chunks: each Update renders
				for n < len(md) && !utf8.RuneStart(md[n]) {
					n++
				}
				clean, _ := stripControls(md[:n])
				got, want := p.Update(md[:n], n == len(md)), q.Update(clean, n == len(md))
				checkNoControls(t, "Pager", strings.Join(got, "\n"))
				if !slices.Equal(got, want) {
					t.Fatalf("format %d, %d bytes in: Pager parts %q, want %q as without the controls", f, n, got, want)
				}
			}
		}
		// The stream without the controls is fed the same text in the same pieces, except the
		// first byte of a character cut by a piece's end, which the stream holds back until the
		// rest of it arrives (it may start a C1 control).
		s, ps := NewMarkdownStream(), NewMarkdownStream()
		var all strings.Builder
		for e, pe, i := 0, 0, 0; e < len(md); i++ {
			next := min(len(md), e+size(i))
			clean, _ := stripControls(md[:next])
			pnext := len(strings.TrimSuffix(clean, "\xc2"))
			got, want := s.Feed(md[e:next]), ps.Feed(plain[pe:pnext])
			all.WriteString(got)
			if got != want {
				t.Fatalf("%d bytes in: MarkdownStream.Feed = %q, want %q as without the controls", next, got, want)
			}
			e, pe = next, pnext
		}
		got, want := s.Flush(), ps.Flush()
		all.WriteString(got)
		checkNoControls(t, "MarkdownStream", all.String())
		if got != want {
			t.Fatalf("MarkdownStream.Flush = %q, want %q as without the controls", got, want)
		}
	})
}

// checkNoControls fails the test when s holds a C0 control other than tab and newline, DEL
// or a C1 control.
func checkNoControls(t *testing.T, what, s string) {
	t.Helper()
	for i, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' || r >= 0x7f && r <= 0x9f {
			t.Fatalf("%s wrote control %U at byte %d: %q", what, r, i, s)
		}
	}
}

// FuzzMarkdownStream checks, for any answer (valid UTF-8, as decoded model output is), that
// what a MarkdownStream writes does not depend on how the answer is cut into deltas: fed in
// the pieces sizes gives (1 to 32 bytes, cut anywhere, also inside a character), it writes
// what it writes for the whole answer at once.
func FuzzMarkdownStream(f *testing.F) {
	for _, name := range []string{"render_constructs.md", "render_tables.md", "render_lists.md", "stream_answer.md"} {
		f.Add(readTestdata(f, name), []byte{6, 0, 13})
	}
	f.Add("  - ~~~\n  **code**\n  ~~~\nafter\n", []byte{0})
	f.Add(" 10. ```\n    echo hi\n    ```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n", []byte{0, 1})
	f.Fuzz(func(t *testing.T, md string, sizes []byte) {
		if !utf8.ValidString(md) || len(md) > 5000 {
			t.Skip()
		}
		want := strings.Join(feedAll(md, func() int { return len(md) }), "")
		i := 0
		got := strings.Join(feedAll(md, func() int {
			i++
			if len(sizes) == 0 {
				return 1
			}
			return 1 + int(sizes[i%len(sizes)])%32
		}), "")
		if got != want {
			t.Fatalf("output depends on how the answer was chunked\ngot  %q\nwant %q", got, want)
		}
	})
}
