package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// secs formats d in seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

// millis formats d in milliseconds with two decimals.
func millis(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond)) }

// lagMean is the mean visible lag, and false when some tokens were never shown: their lag, and
// so the mean, is infinite (a policy that loses text never looks fresher for it).
func (r *result) lagMean() (time.Duration, bool) {
	return mean(r.lags), r.hidden == 0 && len(r.lags) > 0
}

// lagCell is the table's "lag mean / p95": "∞" when text was lost, with the shown tokens' figures.
func (r *result) lagCell() string {
	m, ok := r.lagMean()
	if !ok {
		return fmt.Sprintf("∞ (shown: %s / %s)", secs(m), secs(percentile(r.lags, 95)))
	}
	return secs(m) + " / " + secs(percentile(r.lags, 95))
}

// ratio is the mean lag over the best possible ("∞" when text was lost).
func (r *result) ratio() string {
	m, ok := r.lagMean()
	switch {
	case !ok:
		return "∞"
	case r.best <= 0:
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(m)/float64(r.best))
}

// cpuPer1k is the bot's CPU time per 1,000 tokens streamed.
func (r *result) cpuPer1k() time.Duration {
	if r.tokens == 0 {
		return 0
	}
	return time.Duration(float64(r.cpu) * 1000 / float64(r.tokens))
}

// wakeupsPer1k is how often the bot's threads were scheduled in per 1,000 tokens streamed ("-": unknown).
func (r *result) wakeupsPer1k() string {
	if r.tokens == 0 || r.wakeups < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(r.wakeups)*1000/float64(r.tokens))
}

// idleCPUPerSec is the bot's CPU while idle (connected, before the load), in ms per second.
func (r *result) idleCPUPerSec() float64 {
	if r.idleFor <= 0 {
		return 0
	}
	return float64(r.idleCPU) / float64(time.Millisecond) / r.idleFor.Seconds()
}

// replicasCell is the table's "replicas": how many bot processes, and whether they went without
// Redis.
func (r *result) replicasCell() string {
	if r.noRedis {
		return fmt.Sprintf("%d, no Redis", r.replicas)
	}
	return fmt.Sprint(r.replicas)
}

// label names the scenario in the details and on stderr: N, the replicas when several, the policy.
func (r *result) label() string {
	if r.replicas <= 1 {
		return fmt.Sprintf("N=%d %s", r.n, r.policy)
	}
	if r.noRedis {
		return fmt.Sprintf("N=%d %d replicas without Redis %s", r.n, r.replicas, r.policy)
	}
	return fmt.Sprintf("N=%d %d replicas %s", r.n, r.replicas, r.policy)
}

// replicaDetails lists each replica's CPU, peak RSS and envelopes, and Redis's CPU; "" for one
// process.
func (r *result) replicaDetails() string {
	if r.replicas <= 1 {
		return ""
	}
	var each []string
	for i, c := range r.replicaCPU {
		s := fmt.Sprintf("replica %d CPU %s ms", i+1, millis(c))
		if i < len(r.replicaRSS) {
			s += fmt.Sprintf(", peak RSS %.1f MB", float64(r.replicaRSS[i])/1024)
		}
		each = append(each, s)
	}
	envs := make([]string, len(r.envelopes))
	for i, e := range r.envelopes {
		envs[i] = fmt.Sprint(e)
	}
	out := strings.Join(each, "; ") + "; envelopes per Socket Mode connection " + strings.Join(envs, ", ")
	if r.redisCPU >= 0 {
		out += "; redis-server CPU " + millis(r.redisCPU) + " ms"
	}
	return out
}

func (r *result) summary() string {
	return fmt.Sprintf("lag mean / p95 %s s (best %ss, ratio %s), complete %d wrong %d lost %d dup %d, %s, 429s %d, calls %d",
		r.lagCell(), secs(r.best), r.ratio(), r.complete, r.wrong, r.lost, r.duplicates, r.writtenBy(), r.throttled, r.calls)
}

// writtenBy says how the answers were written: streamed natively, posted and edited, or both (a
// stream replaced by posted messages), with the shown tokens' lags of each of the first two ways.
func (r *result) writtenBy() string {
	lags := func(n int, l []time.Duration) string {
		if n == 0 || len(l) == 0 {
			return fmt.Sprint(n)
		}
		return fmt.Sprintf("%d (lag mean / p95 %s / %s s)", n, secs(mean(l)), secs(percentile(l, 95)))
	}
	return fmt.Sprintf("answers streamed %s, edited %s, both %d", lags(r.streamed, r.streamLags), lags(r.edited, r.editLags), r.bothWays)
}

// maxTroubles is how many conversations not answered exactly once the details describe: enough to
// find a cause in the logs, not a page per lost run.
const maxTroubles = 10

func writeTable(w io.Writer, results []*result, set settings, idleGoroutines int) {
	length := fmt.Sprint(set.tokens)
	if set.spread > 0 {
		length += fmt.Sprintf(" ± %.0f%% (spread evenly)", set.spread*100)
	}
	where := fmt.Sprintf("%d conversations per channel", set.perChannel)
	if set.mode == "stream" {
		where = "REPLY_MODE=stream, each conversation a thread in its asker's DM (chat.startStream and chat.stopStream " +
			"share Slack's Tier 2, about 20/min; chat.appendStream Tier 4, about 100/min; answers past the stream " +
			"budget are edited; best and ratio are the edit budget's, for comparison with edit mode)"
		if set.scale != 1 {
			// The bot's own stream and append budgets are fixed inside it: under a time scale its
			// streams are paced in real time, so every stream's wait is multiplied by the scale.
			where += "; the bot's stream budgets are not scaled, so its streams' lags are too long by up to the time scale"
		}
	}
	fmt.Fprintf(w, "Budget: chat.update %.0f/min per workspace, chat.postMessage %.0f/min per channel, burst %d; "+
		"answers of %s tokens, first token after %v, then one every %v; %s; time scale %g "+
		"(lags in Slack time); idle bot: %d goroutines besides idle HTTP connections.",
		set.updatesPerMin, set.postsPerMin, set.burst, length, set.firstToken, set.tokenInterval,
		where, set.scale, idleGoroutines)
	if set.spent {
		fmt.Fprint(w, " Every Slack budget was used up when the questions came (-spent).")
	}
	if set.newThreads {
		fmt.Fprint(w, " New threads (-new-threads): each question is a new top-level DM message, answered in its own thread (the agent pane).")
	}
	if set.userTeams {
		fmt.Fprint(w, " Every person's events name their team as user_team (-user-teams).")
	}
	if set.followUps {
		fmt.Fprint(w, " Follow-ups (-follow-ups): every thread was answered once before; the figures are those of a follow-up mention in each thread, asked at once.")
	}
	if set.botEditBudget() != set.updatesPerMin {
		fmt.Fprintf(w, " The bot's EDIT_BUDGET_PER_MINUTE: %g (each replica's).", set.botEditBudget())
	}
	if slices.ContainsFunc(results, func(r *result) bool { return r.replicas > 1 }) {
		if set.noRedis {
			fmt.Fprint(w, " Several replicas share nothing (-no-redis): each holds its own budgets.")
		} else {
			fmt.Fprint(w, " Several replicas share one redis-server (REDIS_URL), started for each scenario.")
		}
		fmt.Fprint(w, " With several replicas, CPU, wake-ups, RSS, goroutines and log lines are sums over the bot's processes"+
			" (each one's CPU and peak RSS, and Redis's CPU, in the details); each question's events go to one replica's connection, question i's to replica i mod K + 1.")
	}
	fmt.Fprint(w, "\n\n")
	fmt.Fprintln(w, "| N | replicas | policy | ack p50 / p99 ms | first text p50 / p95 s | lag mean / p95 s | best s | ratio | final p50 / p95 / max s | calls / reply | 429s | complete / wrong / lost / dup | tokens never shown | CPU ms / 1k tokens | wake-ups / 1k tokens | RSS idle / peak MB | goroutines after (HTTP conns) |")
	fmt.Fprintln(w, "|---:|---:|---|---|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|---:|")
	for _, r := range results {
		g := fmt.Sprintf("%d (%d)", r.goroutines, r.httpConns)
		if r.goroutineErr != nil {
			g = "not measured"
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s / %s | %s / %s | %s | %s | %s | %s / %s / %s | %.1f | %d | %d / %d / %d / %d | %d | %s | %s | %.1f / %.1f | %s |\n",
			r.n, r.replicasCell(), r.policy,
			millis(percentile(r.acks, 50)), millis(percentile(r.acks, 99)),
			secs(percentile(r.firstText, 50)), secs(percentile(r.firstText, 95)),
			r.lagCell(), secs(r.best), r.ratio(),
			secs(percentile(r.finalLags, 50)), secs(percentile(r.finalLags, 95)), secs(maxOf(r.finalLags)),
			float64(r.calls)/float64(r.n), r.throttled,
			r.complete, r.wrong, r.lost, r.duplicates, r.hidden,
			millis(r.cpuPer1k()), r.wakeupsPer1k(), float64(r.idleRSS)/1024, float64(r.peakRSS)/1024, g)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Slack calls and 429s by method, time from a question to its model request, peak model streams open at once, bot log lines by level:")
	fmt.Fprintln(w)
	for _, r := range results {
		var calls []string
		for _, m := range slices.Sorted(maps.Keys(r.callsBy)) {
			s := fmt.Sprintf("%s %d", m, r.callsBy[m])
			if t := r.throttledBy[m]; t > 0 {
				s += fmt.Sprintf(" (%d x 429, the last %ss after the questions)", t, secs(r.last429[m]))
			}
			calls = append(calls, s)
		}
		var logs []string
		for _, l := range slices.Sorted(maps.Keys(r.logs)) {
			logs = append(logs, fmt.Sprintf("%s %d", l, r.logs[l]))
		}
		if r.firstLog != "" {
			fmt.Fprintf(w, "- %s: first bot warning/error: `%s`\n", r.label(), r.firstLog)
		}
		if r.note != "" {
			fmt.Fprintf(w, "- %s: %s\n", r.label(), r.note)
		}
		for j, t := range r.troubles {
			if j == maxTroubles {
				fmt.Fprintf(w, "- %s: and %d more not answered exactly once\n", r.label(), len(r.troubles)-j)
				break
			}
			fmt.Fprintf(w, "- %s: not answered exactly once: %s\n", r.label(), t)
		}
		if reads := r.threadReadsDetails(); reads != "" {
			fmt.Fprintf(w, "- %s: %s\n", r.label(), reads)
		}
		if q := r.queueDetails(); q != "" {
			fmt.Fprintf(w, "- %s: %s\n", r.label(), q)
		}
		if d := r.replicaDetails(); d != "" {
			fmt.Fprintf(w, "- %s: %s\n", r.label(), d)
		}
		fmt.Fprintf(w, "- %s: %s; question -> model request p50 %ss p95 %ss max %ss; first -> last token mean %ss; peak model streams %d; %s; answers ended in a second message %d; unmatched writes %d; logs: %s; CPU %s ms in all, idle %.2f ms/s; wall %v\n",
			r.label(), strings.Join(calls, ", "), secs(percentile(r.toModel, 50)), secs(percentile(r.toModel, 95)), secs(maxOf(r.toModel)), secs(mean(r.streamTime)),
			r.peakStreams, r.writtenBy(), r.continued, r.unmatched, strings.Join(logs, ", "), millis(r.cpu), r.idleCPUPerSec(), r.wall.Round(100*time.Millisecond))
	}
}

// queueDetails reports the questions that waited in line for one of the bot's
// MAX_CONCURRENT_REPLIES places: how many, how long they waited for their model request, and that
// wait per place (the k-th question past the places is k-th in line), or "" when none could wait.
func (r *result) queueDetails() string {
	waits := slices.Sorted(slices.Values(r.toModel))
	if len(waits) <= r.concurrent {
		return ""
	}
	queued := waits[r.concurrent:]
	var perPlace []time.Duration
	for k, w := range queued {
		perPlace = append(perPlace, w/time.Duration(k+1))
	}
	return fmt.Sprintf("waited in line for one of %d places %d (told their place privately %d): question -> model request p50 %ss max %ss; per place ahead mean %ss",
		r.concurrent, len(queued), r.toldPlace, secs(percentile(queued, 50)), secs(maxOf(queued)), secs(mean(perPlace)))
}

// threadReadsDetails reports the conversations.replies calls per thread: how many threads were
// read and the most reads of one ("" when not measured).
func (r *result) threadReadsDetails() string {
	if r.threadReads == nil {
		return ""
	}
	most := 0
	for _, k := range r.threadReads {
		most = max(most, k)
	}
	return fmt.Sprintf("threads read (conversations.replies) %d of %d, at most %d calls for one", len(r.threadReads), r.n, most)
}
