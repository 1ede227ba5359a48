package ops

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/llmbot/llmbot/ledger"
)

// ledgerMetrics are the ledger's series: what was used by model and place (the route's feature),
// the redactions by kind, the budgets' refusals. Never a person or a channel: the ledger's own
// counts (/usage) hold those, and a label per person would have no bound.
type ledgerMetrics struct {
	tokens   *prometheus.CounterVec
	images   *prometheus.CounterVec
	redacted *prometheus.CounterVec
	refused  *prometheus.CounterVec
}

func newLedgerMetrics(f promauto.Factory) ledgerMetrics {
	return ledgerMetrics{
		tokens: f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_usage_tokens_total",
			Help: "Tokens used, by model, place (mention, dm, follow_up, summarize, imagine, ...), direction (input, output) and source (reported by the model service, or estimated when it sends no usage)."},
			[]string{"model", "place", "direction", "source"}),
		images: f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_usage_images_total",
			Help: "Pictures made, by model and place."}, []string{"model", "place"}),
		redacted: f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_redactions_total",
			Help: "Values replaced by placeholders before the model saw them (REDACT), by kind (EMAIL, PHONE, CARD, IBAN, SECRET, or the team's pattern's name)."},
			[]string{"kind"}),
		refused: f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_budget_refusals_total",
			Help: "Requests refused because a budget was spent, by scope (person, channel), period (day, month) and place."},
			[]string{"scope", "period", "place"}),
	}
}

// LedgerHooks are the ledger's hooks counting into m (ledger.Meter.Hooks).
func (m *Metrics) LedgerHooks() ledger.Hooks {
	return ledger.Hooks{Used: m.ledger.used, Refused: m.ledger.budgetRefused, Redacted: m.ledger.redactedValues}
}

// used counts one request's use.
func (l ledgerMetrics) used(place string, u ledger.Use) {
	model, place := word(u.Model), word(place)
	source := "reported"
	if u.Estimated {
		source = "estimated"
	}
	if u.Input > 0 {
		l.tokens.WithLabelValues(model, place, "input", source).Add(float64(u.Input))
	}
	if u.Output > 0 {
		l.tokens.WithLabelValues(model, place, "output", source).Add(float64(u.Output))
	}
	if u.Images > 0 {
		l.images.WithLabelValues(model, place).Add(float64(u.Images))
	}
}

// budgetRefused counts a request refused by a budget.
func (l ledgerMetrics) budgetRefused(place string, e *ledger.OverBudget) {
	period := "day"
	if e.Period == ledger.Month {
		period = "month"
	}
	l.refused.WithLabelValues(word(e.Scope), period, word(place)).Inc()
}

// redactedValues counts the values of a kind one request had replaced.
func (l ledgerMetrics) redactedValues(kind string, n int) {
	l.redacted.WithLabelValues(word(kind)).Add(float64(n))
}
