package ops

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/toolinfo"
)

func TestToolMetrics(t *testing.T) {
	m := NewMetrics()
	tm := m.ToolMetrics()
	for _, ev := range []handlers.ToolEvent{
		{Server: "wiki", Tool: "wiki__search", Outcome: "ok", Duration: time.Second},
		{Server: "wiki", Tool: "wiki__search", Outcome: "denied", Approval: 3 * time.Second},
		{Server: "wiki", Tool: "xoxb-123", Outcome: "made up"},
	} {
		tm.Observe(ev)
	}
	for i := range maxToolLabels + 5 {
		tm.Observe(handlers.ToolEvent{Server: "many", Tool: fmt.Sprintf("t%d", i), Outcome: "ok"})
	}
	tm.ServerTools("wiki", 3)
	out, err := testutil.GatherAndFormat(m.Registry(), expfmt.TypeTextPlain, "llmbot_tool_calls_total", "llmbot_tool_approval_wait_seconds", "llmbot_mcp_server_tools")
	if err != nil {
		t.Fatal(err)
	}
	text := string(out)
	for _, want := range []string{
		`llmbot_tool_calls_total{outcome="ok",server="wiki",tool="wiki__search"} 1`,
		`llmbot_tool_calls_total{outcome="denied",server="wiki",tool="wiki__search"} 1`,
		`llmbot_tool_calls_total{outcome="other",server="wiki",tool="other"} 1`,
		`llmbot_tool_calls_total{outcome="ok",server="many",tool="other"} 7`, // 2 names taken before, "other" among them,
		`llmbot_tool_approval_wait_seconds_count{outcome="denied"} 1`,
		`llmbot_mcp_server_tools{server="wiki"} 3`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
}

func TestApprovalMetrics(t *testing.T) {
	m := NewMetrics()
	am := NewApprovalMetrics(m)
	for _, v := range []toolinfo.Verdict{toolinfo.AllowOnce, toolinfo.AllowAlways, toolinfo.AllowAlways, toolinfo.TimedOut, "lapsed", "made up"} {
		am.Decided(v, false)
	}
	am.Decided(toolinfo.Denied, true)
	out, err := testutil.GatherAndFormat(m.Registry(), expfmt.TypeTextPlain, "llmbot_tool_approvals_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`llmbot_tool_approvals_total{by="asker",scope="once"} 1`,
		`llmbot_tool_approvals_total{by="asker",scope="always"} 2`,
		`llmbot_tool_approvals_total{by="asker",scope="timeout"} 1`,
		`llmbot_tool_approvals_total{by="asker",scope="lapsed"} 1`,
		`llmbot_tool_approvals_total{by="asker",scope="other"} 1`,
		`llmbot_tool_approvals_total{by="approver",scope="denied"} 1`,
	} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
}

func TestQuestionMetrics(t *testing.T) {
	m := NewMetrics()
	tm := m.ToolMetrics()
	for _, o := range []string{"asked", "answered", "asked", "timeout", "the model's words"} {
		tm.Question(o)
	}
	out, err := testutil.GatherAndFormat(m.Registry(), expfmt.TypeTextPlain, "llmbot_questions_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`llmbot_questions_total{outcome="asked"} 2`, `llmbot_questions_total{outcome="answered"} 1`,
		`llmbot_questions_total{outcome="timeout"} 1`, `llmbot_questions_total{outcome="other"} 1`} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
}
