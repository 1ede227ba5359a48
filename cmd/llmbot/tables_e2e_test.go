package main

// End-to-end tests of native tables: the real wiring against the fake Slack, which checks the table
// block's shape and limits (and can refuse every table block, as a Slack that does not take them).

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

const tableAnswer = "Orders by region:\n\n| Region | Orders |\n|:--|--:|\n| North | 1,204 |\n| South | 980 |\n\nNorth leads."

// tableCode is how the answer's table shows as text: the aligned code block.
const tableCode = "```\nRegion | Orders\n-------+-------\nNorth  |  1,204\nSouth  |    980\n```"

// TestE2ENativeTable: an answer written by editing shows its Markdown table as Slack's table block
// at its final write, the text before and after it as before, and the whole text (with the code
// block) as the message's fallback. NATIVE_TABLES=false keeps the code block.
func TestE2ENativeTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want [][]string
	}{
		{"on", nil, [][]string{{"Region", "Orders"}, {"North", "1,204"}, {"South", "980"}}},
		{"off", map[string]string{"NATIVE_TABLES": "false"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startE2E(t, fakeslack.Config{}, tc.env)
			e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(tableAnswer) })
			q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> orders by region?")
			m := e.final(t, "C1", q, 1, 1)[0]
			if got := m.Table(); !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("table block %q, want %q", got, tc.want)
			}
			if !strings.Contains(m.Text, tableCode) || !strings.HasPrefix(m.Text, "Orders by region:") ||
				!strings.Contains(m.Text, "North leads.") {
				t.Errorf("text %q lacks the code block or the text around it", m.Text)
			}
			if tc.want != nil && (!strings.Contains(string(m.Blocks), "Orders by region:") || !strings.Contains(string(m.Blocks), "North leads.")) {
				t.Errorf("blocks %s lack the text around the table", m.Blocks)
			}
		})
	}
}

// TestE2ENativeTableRefused: when Slack refuses the table block (invalid_blocks), the same answer is
// written again with the code block, and the next answers do not try a table again.
func TestE2ENativeTableRefused(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{RefuseTables: true}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(tableAnswer) })
	for i, q := range []string{"<@UBOT> orders by region?", "<@UBOT> and again?"} {
		ts := e.slack.PostUserMessage("C1", "U1", "", q)
		m := e.final(t, "C1", ts, 1, i+1)[0]
		if m.Table() != nil || !strings.Contains(m.Text, tableCode) || !strings.Contains(m.Text, "North leads.") {
			t.Errorf("answer %d: table %q, text %q; want the code block", i+1, m.Table(), m.Text)
		}
	}
	refused := 0
	for _, c := range e.slack.Calls() {
		if c.Error == "invalid_blocks" {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d table blocks refused, want 1 (the refusal is remembered)", refused)
	}
	if !strings.Contains(e.logs.String(), "Slack refused a table block") {
		t.Error("the refusal is not logged")
	}
}
