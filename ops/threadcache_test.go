package ops_test

import (
	"testing"

	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/threads"
)

func TestThreadCacheHooks(t *testing.T) {
	m := ops.NewMetrics()
	h := m.ThreadCacheHooks()
	h.Hit("replies")
	h.Hit("history")
	h.Miss("replies", threads.MissStale)
	made := m.SummaryMade()
	made()
	reused := ops.SummaryReused(m)
	reused()
	reused()
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"llmbot_thread_cache_hits_total", map[string]string{"kind": "replies"}, 1},
		{"llmbot_thread_cache_reads_saved_total", nil, 2},
		{"llmbot_thread_cache_misses_total", map[string]string{"kind": "replies", "reason": "stale"}, 1},
		{"llmbot_thread_cache_misses_total", map[string]string{"kind": "history", "reason": "absent"}, 0},
		{"llmbot_thread_summaries_total", nil, 1},
		{"llmbot_thread_summaries_reused_total", nil, 2},
	} {
		if got := metricValue(t, m.Registry(), c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
