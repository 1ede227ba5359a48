package ops

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/llmbot/llmbot/toolinfo"
)

// ApprovalMetrics count the tool approval prompts by how they ended (approvals.Options.Decided).
// A type of its own, not a method of Metrics, which keeps its 25.
type ApprovalMetrics struct {
	decided *prometheus.CounterVec
}

// NewApprovalMetrics registers the approval metrics on m's registry. Call it once.
func NewApprovalMetrics(m *Metrics) *ApprovalMetrics {
	return &ApprovalMetrics{decided: promauto.With(m.reg).NewCounterVec(prometheus.CounterOpts{Name: "llmbot_tool_approvals_total",
		Help: "Tool approval prompts by scope (once, thread, always: allowed so; denied, timeout, cancelled; " +
			"unresolved: the approvers' user group could not be read; lapsed: a click after the prompt's answer ended or its replica restarted) " +
			"and by whom they were decided (asker, approver)."}, []string{"scope", "by"})}
}

// approvalScopes are the scope label's values, by verdict.
var approvalScopes = map[toolinfo.Verdict]string{
	toolinfo.AllowOnce: "once", toolinfo.AllowThread: "thread", toolinfo.AllowAlways: "always",
	toolinfo.Denied: "denied", toolinfo.TimedOut: "timeout", toolinfo.Cancelled: "cancelled",
	"unresolved": "unresolved", "lapsed": "lapsed",
}

// Decided counts one prompt's outcome v; approvers: its call had approvers (not the asker).
func (a *ApprovalMetrics) Decided(v toolinfo.Verdict, approvers bool) {
	scope, ok := approvalScopes[v]
	if !ok {
		scope = other
	}
	by := "asker"
	if approvers {
		by = "approver"
	}
	a.decided.WithLabelValues(scope, by).Inc()
}
