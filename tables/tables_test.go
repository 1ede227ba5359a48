package tables

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/golden"
	"github.com/llmbot/llmbot/slackmd"
)

// TestBlocksGolden: both renderings of an answer with tables, kept in testdata: the text (today's
// aligned code blocks, the message's fallback and what Slack shows when it refuses the block) and
// the blocks (the text around the first table in sections as it is, the table as a table block).
// A table past the block's limits keeps its code block: no blocks at all.
func TestBlocksGolden(t *testing.T) {
	for _, name := range []string{"answer", "wide"} {
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", name+".md"))
			if err != nil {
				t.Fatal(err)
			}
			md := string(src)
			text := slackmd.Render(md, slackmd.FormatMrkdwn)
			var out strings.Builder
			out.WriteString("=== text\n" + text + "\n=== blocks\n")
			blocks, ok := Blocks(text, md)
			enc := json.NewEncoder(&out) // a block a line, as Slack gets it
			enc.SetEscapeHTML(false)
			for _, b := range blocks {
				if err := enc.Encode(b); err != nil {
					t.Fatal(err)
				}
			}
			if !ok {
				out.WriteString("none\n")
			}
			golden.Check(t, name, out.String())
		})
	}
}

// TestBlocksTableCutAcrossParts: a table the Pager cut between two messages is in neither whole:
// both keep their code block.
func TestBlocksTableCutAcrossParts(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("| n | square |\n|---|---|\n")
	for i := range 400 {
		sb.WriteString("| " + strings.Repeat("x", i%7+1) + " | value |\n")
	}
	md := sb.String()
	parts := slackmd.Split(md, slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)
	if len(parts) < 2 {
		t.Fatalf("%d parts, want the table cut", len(parts))
	}
	for i, p := range parts {
		if _, ok := Blocks(p, md); ok {
			t.Errorf("part %d shows a table block", i+1)
		}
	}
}

// TestBlockLimits: the block's limits (rows, columns, a cell's characters) decide whether a table
// is shown as a block.
func TestBlockLimits(t *testing.T) {
	table := func(rows, cols, cell int) string {
		var sb strings.Builder
		line := func(s string) {
			sb.WriteString("|" + strings.Repeat(" "+s+" |", cols) + "\n")
		}
		line("h")
		line("-")
		for range rows - 1 {
			line(strings.Repeat("v", cell))
		}
		return sb.String()
	}
	for _, tc := range []struct {
		name             string
		rows, cols, cell int
		want             bool
	}{
		{"within", MaxRows, MaxColumns, 10, true},
		{"a row too many", MaxRows + 1, 2, 1, false},
		{"a column too many", 2, MaxColumns + 1, 1, false},
		{"the longest cell", 2, 1, MaxCell, true},
		{"a cell too long", 2, 1, MaxCell + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := table(tc.rows, tc.cols, tc.cell)
			if _, ok := Blocks(slackmd.Render(md, slackmd.FormatMrkdwn), md); ok != tc.want {
				t.Errorf("shown as a block: %v, want %v", ok, tc.want)
			}
		})
	}
}
