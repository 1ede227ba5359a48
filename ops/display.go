package ops

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Display counts how answers are shown besides their text: the tool status line under a thread
// (pane.Pane.OnToolStatus) and native tables (tables.Options.Observe). A type of its own: Metrics
// keeps its methods few.
type Display struct {
	toolStatuses *prometheus.CounterVec
	tables       *prometheus.CounterVec
}

// The outcomes each series starts with at 0 (pane's ToolStatus*, tables' Sent and Refused).
var (
	toolStatusOutcomes = []string{"shown", "skipped", "failed"}
	tableOutcomes      = []string{"sent", "refused"}
)

// NewDisplay registers the display metrics on m's registry. Call it once.
func NewDisplay(m *Metrics) *Display {
	f := promauto.With(m.reg)
	d := &Display{
		toolStatuses: f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_tool_status_total",
			Help: "Tool status lines (\"is running <tool>…\" under an edited answer's thread while a tool runs), by outcome: shown, skipped (no token of their budget at once, or statuses refused lately), failed."},
			[]string{"outcome"}),
		tables: f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_tables_total",
			Help: "Answers' final messages written with Slack's table block, by outcome: sent, refused (invalid_blocks: written again with the code block)."},
			[]string{"outcome"}),
	}
	for _, o := range toolStatusOutcomes {
		d.toolStatuses.WithLabelValues(o)
	}
	for _, o := range tableOutcomes {
		d.tables.WithLabelValues(o)
	}
	return d
}

// ToolStatus counts one tool status by its outcome.
func (d *Display) ToolStatus(outcome string) { d.toolStatuses.WithLabelValues(word(outcome)).Inc() }

// Table counts one table block by its outcome.
func (d *Display) Table(outcome string) { d.tables.WithLabelValues(word(outcome)).Inc() }
