package fakeslack

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// The table block's limits the fake enforces (Slack answers invalid_blocks). [V] from Slack's
// reference (docs.slack.dev/reference/block-kit/blocks/table-block): rows 1–100, 1–20 cells a row,
// cells of type raw_text, raw_number or rich_text, column_settings at most 20 with align left,
// center or right. [S] one table block a message (a secondary source; the reference page's usage
// notes were not read). [U] TableCellLimit: the reference gives no limit on a cell's text; 2,000
// is a bot SDK's clamp. Unverified and not enforced: whether rows must be as wide as each other,
// whether an empty raw_text cell is taken, where Slack shows the table among the other blocks.
const (
	TableRowLimit     = 100
	TableColumnLimit  = 20
	TableCellLimit    = 2000
	maxTablesAMessage = 1
)

// tableBlock is the part of a table block the fake reads.
type tableBlock struct {
	Type           string        `json:"type"`
	Rows           [][]tableCell `json:"rows"`
	ColumnSettings []struct {
		Align string `json:"align"`
	} `json:"column_settings"`
}

type tableCell struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text"`
	Elements json.RawMessage `json:"elements"`
}

// checkTablesLocked applies the table block's limits to blocks, and refuses every table when
// Config.RefuseTables says so (a workspace or client that does not take the block).
func (s *Server) checkTablesLocked(raw json.RawMessage) apiError {
	if len(raw) == 0 {
		return ""
	}
	var bs []json.RawMessage
	if json.Unmarshal(raw, &bs) != nil {
		return "invalid_blocks"
	}
	n := 0
	for _, b := range bs {
		var t tableBlock
		if json.Unmarshal(b, &t) != nil {
			return "invalid_blocks"
		}
		if t.Type != "table" {
			continue
		}
		n++
		if s.cfg.RefuseTables || n > maxTablesAMessage || !validTable(t) {
			return "invalid_blocks"
		}
	}
	return ""
}

// validTable reports whether t is within the limits above.
func validTable(t tableBlock) bool {
	if len(t.Rows) == 0 || len(t.Rows) > TableRowLimit || len(t.ColumnSettings) > TableColumnLimit {
		return false
	}
	for _, c := range t.ColumnSettings {
		if !slices.Contains([]string{"", "left", "center", "right"}, c.Align) {
			return false
		}
	}
	for _, r := range t.Rows {
		if len(r) == 0 || len(r) > TableColumnLimit {
			return false
		}
		for _, c := range r {
			if !validCell(c) {
				return false
			}
		}
	}
	return true
}

func validCell(c tableCell) bool {
	switch c.Type {
	case "raw_number":
		return true
	case "raw_text":
		return c.Text != nil && utf8.RuneCountInString(*c.Text) <= TableCellLimit
	case "rich_text":
		return len(c.Elements) > 0
	}
	return false
}

// Table returns the rows of the message's table block (each cell's text; a rich_text cell's is
// ""), or nil when it has none.
func (m Message) Table() [][]string {
	var bs []tableBlock
	if json.Unmarshal(m.Blocks, &bs) != nil {
		return nil
	}
	for _, b := range bs {
		if b.Type != "table" {
			continue
		}
		rows := make([][]string, len(b.Rows))
		for i, r := range b.Rows {
			for _, c := range r {
				text := ""
				if c.Text != nil {
					text = *c.Text
				}
				rows[i] = append(rows[i], text)
			}
		}
		return rows
	}
	return nil
}
