package ops

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/llmbot/llmbot/threads"
)

// ThreadCacheHooks registers the thread cache's metrics on m's registry and returns the hooks that
// count them (threads.Options.Hooks). Call it once.
func (m *Metrics) ThreadCacheHooks() threads.Hooks {
	f := promauto.With(m.reg)
	hits := f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_thread_cache_hits_total",
		Help: "Thread reads answered from the thread cache, by kind (replies, history)."}, []string{"kind"})
	misses := f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_thread_cache_misses_total",
		Help: "Thread reads that went to Slack, by kind and reason (absent, stale: after a gap, incomplete, error)."},
		[]string{"kind", "reason"})
	saved := f.NewCounter(prometheus.CounterOpts{Name: "llmbot_thread_cache_reads_saved_total",
		Help: "Slack Web API reads (conversations.replies, conversations.history: Tier 3) not made thanks to the thread cache."})
	for _, k := range []string{"replies", "history"} {
		hits.WithLabelValues(k)
		for _, r := range []string{threads.MissAbsent, threads.MissStale, threads.MissIncomplete, threads.MissError} {
			misses.WithLabelValues(k, r)
		}
	}
	return threads.Hooks{
		Hit: func(kind string) {
			hits.WithLabelValues(word(kind)).Inc()
			saved.Inc()
		},
		Miss: func(kind, reason string) { misses.WithLabelValues(word(kind), word(reason)).Inc() },
	}
}

// SummaryMade registers the long threads' summaries metric on m's registry and returns what counts
// one made (threads.SummaryOptions.Made). Call it once.
func (m *Metrics) SummaryMade() func() {
	made := promauto.With(m.reg).NewCounter(prometheus.CounterOpts{Name: "llmbot_thread_summaries_total",
		Help: "Summaries of long threads' oldest messages made by the model (each is kept and reused by the answers that follow in its thread)."})
	return made.Inc
}

// SummaryReused registers the metric of the long threads' summaries reused on m's registry and
// returns what counts one (threads.SummaryOptions.Reused). Call it once. A function, not a method:
// Metrics keeps its 25.
func SummaryReused(m *Metrics) func() {
	reused := promauto.With(m.reg).NewCounter(prometheus.CounterOpts{Name: "llmbot_thread_summaries_reused_total",
		Help: "Answers (and /summarize requests) that reused a summary kept of a long thread's or channel's oldest messages instead of asking the model for one (with Redis, made by any replica)."})
	return reused.Inc
}
