package ops

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSearchMetrics(t *testing.T) {
	m := NewMetrics()
	s := NewSearchMetrics(m, []string{"ok", "refused", "busy"})
	s.Observe("ok", 3)
	s.Observe("ok", 0)
	s.Observe("refused", 0)
	s.Observe("strange", 0)
	want := `
# HELP llmbot_slack_searches_total Searches slack_search made (assistant.search.context), by outcome: ok, refused (the feature or a scope), invalid_token, busy (429), error.
# TYPE llmbot_slack_searches_total counter
llmbot_slack_searches_total{outcome="busy"} 0
llmbot_slack_searches_total{outcome="ok"} 2
llmbot_slack_searches_total{outcome="other"} 1
llmbot_slack_searches_total{outcome="refused"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "llmbot_slack_searches_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(s.results); n != 1 {
		t.Errorf("%d result histograms", n)
	}
	if got := testutil.ToFloat64(s.searches.WithLabelValues("ok")); got != 2 {
		t.Errorf("ok searches %v", got)
	}
}
