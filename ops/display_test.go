package ops

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// TestDisplay: the tool status lines and the tables are counted by outcome, every outcome there
// from the start (at 0), an unexpected one as "other".
func TestDisplay(t *testing.T) {
	m := NewMetrics()
	d := NewDisplay(m)
	d.ToolStatus("shown")
	d.ToolStatus("shown")
	d.Table("refused")
	d.Table("made up!")
	out, err := testutil.GatherAndFormat(m.Registry(), expfmt.TypeTextPlain, "llmbot_tool_status_total", "llmbot_tables_total")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`llmbot_tool_status_total{outcome="shown"} 2`,
		`llmbot_tool_status_total{outcome="skipped"} 0`,
		`llmbot_tool_status_total{outcome="failed"} 0`,
		`llmbot_tables_total{outcome="sent"} 0`,
		`llmbot_tables_total{outcome="refused"} 1`,
		`llmbot_tables_total{outcome="other"} 1`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("metrics lack %s:\n%s", want, out)
		}
	}
}
