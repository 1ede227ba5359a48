// Package tables shows a Markdown table of an answer as Slack's native table block, within its
// limits, at the answer's final write (gateway.Msg.Markdown; the streamed preview keeps the aligned
// code block slackmd renders). The text around the table is today's rendering, in section blocks;
// the message's text keeps the whole code-block rendering as its notification fallback. When Slack
// refuses the block (invalid_blocks) the same message is written again as text, and tables are not
// tried again for a while (Writes).
package tables

import (
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/slackmd"
)

// The table block's limits. [V] docs.slack.dev/reference/block-kit/blocks/table-block: at most 100
// rows, 20 cells a row, 20 column settings; one table a message (slack-agent-surface-2026.md §1.6,
// [S]). [U] A cell's text: the reference gives no limit; MaxCell is a secondary source's (a bot
// SDK's clamp), kept as the bound. Whether Slack takes an empty raw_text cell is not verified
// either: a refusal falls back to the code block.
const (
	MaxRows    = 100
	MaxColumns = 20
	MaxCell    = 2000
)

// sectionLimit is the most characters of a section block's text (as bot's sections of a message).
const sectionLimit = 3000

// Blocks shows text (one message of an answer, mrkdwn rendered from md) with the first of md's
// tables that it holds whole and that fits the limits as a table block, the text before and after
// it in sections as they are. ok is false when there is none: the text stays as it is.
func Blocks(text, md string) (blocks []slack.Block, ok bool) {
	if !strings.Contains(text, "```") || !strings.Contains(md, "|") {
		return nil, false
	}
	for _, t := range slackmd.Tables(md) {
		at := strings.Index(text, t.Code)
		if at < 0 || !fits(t) {
			continue
		}
		blocks = sections(blocks, strings.TrimRight(text[:at], "\n"))
		blocks = append(blocks, Block(t))
		return sections(blocks, strings.TrimLeft(text[at+len(t.Code):], "\n")), true
	}
	return nil, false
}

// fits reports whether t is within the table block's limits.
func fits(t slackmd.Table) bool {
	if len(t.Rows) > MaxRows || len(t.Align) > MaxColumns {
		return false
	}
	for _, r := range t.Rows {
		for _, c := range r {
			if utf8.RuneCountInString(c) > MaxCell {
				return false
			}
		}
	}
	return true
}

// Block is t as Slack's table block: raw_text cells (the code block's plain text), every row as
// wide as the widest, the columns aligned as the table says (left when it says nothing) and
// wrapped, so that a long cell does not widen the table past the message.
func Block(t slackmd.Table) *slack.TableBlock {
	b := &slack.TableBlock{Type: slack.MBTTable}
	for _, r := range t.Rows {
		cells := make([]slack.TableCell, len(r))
		for i, c := range r {
			cells[i] = slack.NewTableRawTextCell(c)
		}
		b.AddRow(cells...)
	}
	settings := make([]slack.ColumnSetting, len(t.Align))
	for i, a := range t.Align {
		settings[i] = slack.ColumnSetting{Align: slack.ColumnAlignmentLeft, IsWrapped: true}
		if a != "" {
			settings[i].Align = slack.ColumnAlignment(a)
		}
	}
	return b.WithColumnSettings(settings...)
}

// sections appends text (mrkdwn) to blocks in section blocks of at most sectionLimit characters,
// cut at line ends; nothing for blank text.
func sections(blocks []slack.Block, text string) []slack.Block {
	if strings.TrimSpace(text) == "" {
		return blocks
	}
	for _, t := range slackmd.SplitLines(text, sectionLimit) {
		blocks = append(blocks, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, t, false, false), nil, nil))
	}
	return blocks
}
