package fakeslack_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// tableOf is a table block of rows×cols cells, each cell of text.
func tableOf(rows, cols int, text string) *slack.TableBlock {
	b := &slack.TableBlock{Type: slack.MBTTable}
	for range rows {
		row := make([]slack.TableCell, cols)
		for i := range row {
			row[i] = slack.NewTableRawTextCell(text)
		}
		b.AddRow(row...)
	}
	return b
}

// TestTableBlockLimits: the fake takes a table block within Slack's limits and stores it (Message.Table),
// refuses one past them, a second table in a message, or a bad shape with invalid_blocks, and refuses
// every table with Config.RefuseTables.
func TestTableBlockLimits(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	bad := tableOf(2, 2, "x")
	bad.ColumnSettings = []slack.ColumnSetting{{Align: "justify"}}
	for _, tc := range []struct {
		name   string
		blocks []slack.Block
	}{
		{"a row too many", []slack.Block{tableOf(fakeslack.TableRowLimit+1, 1, "x")}},
		{"a column too many", []slack.Block{tableOf(1, fakeslack.TableColumnLimit+1, "x")}},
		{"a cell too long", []slack.Block{tableOf(1, 1, strings.Repeat("é", fakeslack.TableCellLimit+1))}},
		{"no rows", []slack.Block{tableOf(0, 1, "x")}},
		{"an unknown alignment", []slack.Block{bad}},
		{"two tables", []slack.Block{tableOf(1, 1, "x"), tableOf(1, 1, "y")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := api.PostMessageContext(ctxFor(t), "C1", slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(tc.blocks...))
			var se slack.SlackErrorResponse
			if !errors.As(err, &se) || se.Err != "invalid_blocks" {
				t.Errorf("post = %v, want invalid_blocks", err)
			}
		})
	}
	var ts string
	for _, b := range []*slack.TableBlock{tableOf(fakeslack.TableRowLimit, fakeslack.TableColumnLimit, "x"),
		tableOf(1, 1, strings.Repeat("é", fakeslack.TableCellLimit))} {
		var err error
		if _, ts, err = api.PostMessageContext(ctxFor(t), "C1", slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(b)); err != nil {
			t.Fatalf("a table at the limits: %v", err)
		}
	}
	if _, _, _, err := api.UpdateMessageContext(ctxFor(t), "C1", ts, slack.MsgOptionText("fallback", false),
		slack.MsgOptionBlocks(tableOf(2, 1, "v"))); err != nil {
		t.Fatalf("update with a table: %v", err)
	}
	m, _ := srv.Message("C1", ts)
	if got := m.Table(); !slices.EqualFunc(got, [][]string{{"v"}, {"v"}}, slices.Equal) {
		t.Errorf("stored table %q", got)
	}

	refusing := newAPI(newServer(t, fakeslack.Config{RefuseTables: true}))
	_, _, err := refusing.PostMessageContext(ctxFor(t), "C1", slack.MsgOptionText("fallback", false), slack.MsgOptionBlocks(tableOf(1, 1, "x")))
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "invalid_blocks" {
		t.Errorf("RefuseTables: post = %v, want invalid_blocks", err)
	}
}
