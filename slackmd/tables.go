package slackmd

import (
	"strings"

	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// Table is a GFM table of an answer as Render shows it in FormatMrkdwn, for a native table block
// (package tables) to take its place.
type Table struct {
	// Rows are its rows, the header first, each as many cells as the widest row: plain text
	// (formatting dropped, links as "text (url)", mentions neutralised) as the code block shows it.
	Rows [][]string
	// Align is each column's alignment: "left", "center", "right", or "" (none given).
	Align []string
	// Code is the aligned code block FormatMrkdwn renders it as: what a rendered part holds where
	// the table stands (a top-level table's, without a list's or a quote's prefix).
	Code string
}

// Tables returns md's top-level tables, in order (those in lists or quotes are left to their code
// blocks).
func Tables(md string) []Table {
	src := []byte(clean(md))
	doc := mdParser.Parse(text.NewReader(src))
	var out []Table
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		t, ok := n.(*east.Table)
		if !ok {
			continue
		}
		var rows [][]string
		for r := t.FirstChild(); r != nil; r = r.NextSibling() {
			var cells []string
			for c := r.FirstChild(); c != nil; c = c.NextSibling() {
				cells = append(cells, strings.TrimSpace(strings.ReplaceAll(plainText(c, src), "\n", " ")))
			}
			rows = append(rows, cells)
		}
		lines := tableLines(rows, t.Alignments)
		for i, l := range lines {
			lines[i] = breakFences(EscapeMrkdwn(l))
		}
		ncol := len(t.Alignments)
		for _, r := range rows {
			ncol = max(ncol, len(r))
		}
		for i := range rows {
			rows[i] = padTo(rows[i], ncol, "")
		}
		align := make([]string, ncol)
		for i, a := range padTo(t.Alignments, ncol, east.AlignNone) {
			if a != east.AlignNone {
				align[i] = a.String()
			}
		}
		out = append(out, Table{Rows: rows, Align: align, Code: "```\n" + strings.Join(lines, "\n") + "\n```"})
	}
	return out
}
