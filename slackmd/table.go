package slackmd

import (
	"strings"
	"unicode"

	east "github.com/yuin/goldmark/extension/ast"
	"golang.org/x/text/width"
)

// table writes a GFM table as an aligned code block (neither mrkdwn nor Slack's markdown
// supports tables). Cells are plain text (formatting dropped, links as "text (url)"); columns
// are padded to the widest cell by display width (see displayWidth), aligned as the table
// says; the header is underlined with dashes. A part may end between rows.
func (w *writer) table(t *east.Table) {
	var rows [][]string
	for r := t.FirstChild(); r != nil; r = r.NextSibling() {
		var cells []string
		for c := r.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, strings.TrimSpace(strings.ReplaceAll(plainText(c, w.src), "\n", " ")))
		}
		rows = append(rows, cells)
	}
	lines := tableLines(rows, t.Alignments)
	w.codeLines(lines)
}

// codeLines writes lines as a code block (fence without language) that may be cut between lines.
func (w *writer) codeLines(lines []string) {
	fence := "```"
	w.o.write(fence)
	prefix := w.o.curPrefix()
	start := len(w.o.r.out) + 1
	for i, l := range lines {
		at := len(w.o.r.out)
		w.o.nl()
		if i > 0 {
			w.o.cut(at, len(w.o.r.out), breakLine)
		}
		w.o.codeText(l)
	}
	end := len(w.o.r.out)
	w.o.nl()
	w.o.write(fence)
	w.o.r.codes = append(w.o.r.codes, codeRange{start: start, end: end, fenceEnd: len(w.o.r.out), close: prefix + fence, reopen: prefix + fence})
}

// tableLines lays out rows (the first is the header) as aligned text lines. Every row has as many
// columns as the widest row or the alignments say: missing cells are empty, missing alignments
// AlignNone.
func tableLines(rows [][]string, align []east.Alignment) []string {
	ncol := len(align)
	for _, r := range rows {
		ncol = max(ncol, len(r))
	}
	align = padTo(align, ncol, east.AlignNone)
	grid := make([][]string, len(rows))
	widths := make([]int, ncol)
	for ri, r := range rows {
		grid[ri] = padTo(r, ncol, "")
		for i, c := range r {
			widths[i] = max(widths[i], displayWidth(c))
		}
	}
	var out []string
	for ri, r := range grid {
		out = append(out, tableRow(r, widths, align))
		if ri == 0 {
			out = append(out, headerRule(widths))
		}
	}
	return out
}

// padTo is s with fill appended up to n elements; s itself when it is that long.
func padTo[T any](s []T, n int, fill T) []T {
	if len(s) >= n {
		return s
	}
	out := make([]T, n)
	copy(out, s)
	for i := len(s); i < n; i++ {
		out[i] = fill
	}
	return out
}

// tableRow is one row's line: cells padded to their column's width as aligned, between " | ",
// without trailing spaces.
func tableRow(cells []string, widths []int, align []east.Alignment) string {
	var sb strings.Builder
	for i, c := range cells {
		if i > 0 {
			sb.WriteString(" | ")
		}
		pad := widths[i] - displayWidth(c)
		switch align[i] {
		case east.AlignRight:
			sb.WriteString(strings.Repeat(" ", pad) + c)
		case east.AlignCenter:
			sb.WriteString(strings.Repeat(" ", pad/2) + c + strings.Repeat(" ", pad-pad/2))
		default:
			sb.WriteString(c + strings.Repeat(" ", pad))
		}
	}
	return strings.TrimRight(sb.String(), " ")
}

// headerRule underlines the header: dashes as wide as each column (at least one), joined by "-+-".
func headerRule(widths []int) string {
	var sb strings.Builder
	for i, w := range widths {
		if i > 0 {
			sb.WriteString("-+-")
		}
		sb.WriteString(strings.Repeat("-", max(w, 1)))
	}
	return sb.String()
}

// displayWidth approximates how many monospace columns s takes: East Asian wide and
// fullwidth characters (CJK, most emoji) count 2, combining marks, zero-width characters and
// variation selectors 0, everything else 1. Emoji sequences joined with ZWJ and flags may be
// off by a column or two; Slack's fonts differ anyway.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

func runeWidth(r rune) int {
	switch {
	case r < 0x20:
		return 0
	case r < 0x300:
		return 1
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || unicode.Is(unicode.Cf, r),
		r >= 0xFE00 && r <= 0xFE0F, r >= 0x1F3FB && r <= 0x1F3FF:
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}
