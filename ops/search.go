package ops

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// SearchMetrics count slack_search's searches and the messages they found (search.Options.Observe).
// A type of its own beside Metrics, which is at its size.
type SearchMetrics struct {
	searches *prometheus.CounterVec
	results  prometheus.Histogram
	outcomes []string
}

// NewSearchMetrics registers the search metrics on m's registry, with their outcome labels (search.Outcomes).
// Call it once.
func NewSearchMetrics(m *Metrics, outcomes []string) *SearchMetrics {
	f := promauto.With(m.reg)
	s := &SearchMetrics{
		searches: f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_slack_searches_total",
			Help: "Searches slack_search made (assistant.search.context), by outcome: ok, refused (the feature or a scope), invalid_token, busy (429), error."},
			[]string{"outcome"}),
		results: f.NewHistogram(prometheus.HistogramOpts{Name: "llmbot_slack_search_results",
			Help: "Messages one successful Slack search found.", Buckets: []float64{0, 1, 2, 5, 10, 20}}),
		outcomes: outcomes,
	}
	for _, o := range outcomes {
		s.searches.WithLabelValues(o)
	}
	return s
}

// Observe counts one search and, when it went through, its results.
func (s *SearchMetrics) Observe(outcome string, results int) {
	if !slices.Contains(s.outcomes, outcome) {
		outcome = other
	}
	s.searches.WithLabelValues(outcome).Inc()
	if outcome == "ok" {
		s.results.Observe(float64(results))
	}
}
