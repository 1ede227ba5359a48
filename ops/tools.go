package ops

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/llmbot/llmbot/handlers"
)

// toolBuckets: a tool call's time, and the wait for the asker's click (seconds).
var toolBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}

// maxToolLabels bounds the tool names that become label values (a server without an allow list may
// list any number of tools); later ones count as "other".
const maxToolLabels = 200

// ToolMetrics count the model's tool calls (handlers.ToolOptions.Observe) and the MCP servers' tools.
type ToolMetrics struct {
	calls    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	approval *prometheus.HistogramVec
	tools    *prometheus.GaugeVec
	asked    *prometheus.CounterVec // ask_user's questions

	mu    sync.Mutex
	names []string // tool label values in use
}

// ToolMetrics registers the tool metrics on m's registry. Call it once.
func (m *Metrics) ToolMetrics() *ToolMetrics {
	f := promauto.With(m.reg)
	return &ToolMetrics{
		calls: f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_tool_calls_total",
			Help: "Tool calls the model made, by MCP server, tool and outcome: ok, error, denied, timeout (no click in time), cancelled, invalid."},
			[]string{"server", "tool", "outcome"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "llmbot_tool_call_duration_seconds",
			Help: "Time of one tool call made, by MCP server.", Buckets: toolBuckets}, []string{"server"}),
		approval: f.NewHistogramVec(prometheus.HistogramOpts{Name: "llmbot_tool_approval_wait_seconds",
			Help: "Time a tool call waited for the asker's approval, by outcome.", Buckets: toolBuckets}, []string{"outcome"}),
		tools: f.NewGaugeVec(prometheus.GaugeOpts{Name: "llmbot_mcp_server_tools",
			Help: "Tools an MCP server offers now (0 while it is down)."}, []string{"server"}),
		asked: f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_questions_total",
			Help: "ask_user's questions to the person who asked, by outcome: asked, answered, timeout (no answer in time), cancelled (the answer stopped), failed (not posted)."},
			[]string{"outcome"}),
	}
}

var toolOutcomes = []string{"ok", "error", "denied", "timeout", "cancelled", "invalid"}

// Observe counts one call (handlers.ToolOptions.Observe).
func (t *ToolMetrics) Observe(ev handlers.ToolEvent) {
	outcome := ev.Outcome
	if !slices.Contains(toolOutcomes, outcome) {
		outcome = other
	}
	server := word(ev.Server)
	t.calls.WithLabelValues(server, t.toolLabel(ev.Tool), outcome).Inc()
	if ev.Duration > 0 {
		t.duration.WithLabelValues(server).Observe(ev.Duration.Seconds())
	}
	if ev.Approval > 0 {
		t.approval.WithLabelValues(outcome).Observe(ev.Approval.Seconds())
	}
}

// ServerTools records how many tools server offers (tools.Options.Changed).
func (t *ToolMetrics) ServerTools(server string, n int) {
	t.tools.WithLabelValues(word(server)).Set(float64(n))
}

func (t *ToolMetrics) toolLabel(name string) string {
	name = word(name)
	t.mu.Lock()
	defer t.mu.Unlock()
	if slices.Contains(t.names, name) {
		return name
	}
	if len(t.names) >= maxToolLabels {
		return other
	}
	t.names = append(t.names, name)
	return name
}

var questionOutcomes = []string{"asked", "answered", "timeout", "cancelled", "failed"}

// Question counts an ask_user question's outcome (ask.Options.Counted).
func (t *ToolMetrics) Question(outcome string) {
	if !slices.Contains(questionOutcomes, outcome) {
		outcome = other
	}
	t.asked.WithLabelValues(outcome).Inc()
}
