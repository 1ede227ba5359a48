package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs the whole tool for N=2 at a high time scale: it builds the bot, runs it as a
// process against the fakes with each policy, and prints the table and the plot.
func TestSmoke(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	plot := filepath.Join(t.TempDir(), "lag.png")
	var out, errs bytes.Buffer
	err := run(ctx, []string{"-n", "2", "-scale", "20", "-tokens", "120", "-settle", "200ms", "-quiet", "3s", "-plot", plot, "-bot-env", "GOGC=100"}, &out, &errs)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errs.String())
	}
	table := out.String()
	for _, row := range []string{"| 2 | 1 | fair |", "| 2 | 1 | every-1s |", "| 2 | 1 | every-20-chunks |"} {
		if !strings.Contains(table, row) {
			t.Errorf("no row %q in:\n%s", row, table)
		}
	}
	// Two conversations, each complete, none wrong, lost or duplicated, with the bot's pacing.
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "| 2 | 1 | fair |") && !strings.Contains(line, "| 2 / 0 / 0 / 0 |") {
			t.Errorf("fair: not 2 complete answers: %s", line)
		}
	}
	if strings.Contains(table, "failed:") || strings.Contains(table, "not final after") {
		t.Errorf("a scenario failed or timed out:\n%s\nstderr:\n%s", table, errs.String())
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Errorf("no plot: %v", err)
	}
}

// TestSmokeSpent: with every Slack budget used up when the questions come, the bot's first calls get
// 429s, which it waits out: both answers complete, and the details name the 429s.
func TestSmokeSpent(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	// The placeholder at once: the bot's first call then comes before the spent budgets refill (at this
	// time scale a first text posted after the first token finds them refilled).
	err := run(ctx, []string{"-n", "2", "-policies", "fair", "-spent", "-scale", "20", "-tokens", "120", "-settle", "200ms", "-quiet", "3s", "-plot", "",
		"-bot-env", "PLACEHOLDER_AFTER=0"}, &out, &errs)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errs.String())
	}
	table := out.String()
	for _, want := range []string{"Every Slack budget was used up", "| 2 / 0 / 0 / 0 |", "x 429, the last"} {
		if !strings.Contains(table, want) {
			t.Errorf("no %q in:\n%s\nstderr:\n%s", want, table, errs.String())
		}
	}
}

// TestSmokeStream: in stream mode the questions are asked in DM threads and the bot streams its
// answers natively (two starts fit the bot's stream budget at once): both answers are rebuilt from their
// stream writes and complete.
func TestSmokeStream(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	err := run(ctx, []string{"-n", "2", "-mode", "stream", "-policies", "fair", "-scale", "20", "-tokens", "120", "-settle", "200ms",
		"-quiet", "3s", "-plot", ""}, &out, &errs)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errs.String())
	}
	table := out.String()
	for _, want := range []string{"REPLY_MODE=stream", "| 2 | 1 | fair |", "| 2 / 0 / 0 / 0 |", "answers streamed 2 (lag mean / p95 ", "edited 0, both 0", "chat.startStream 2"} {
		if !strings.Contains(table, want) {
			t.Errorf("no %q in:\n%s\nstderr:\n%s", want, table, errs.String())
		}
	}
	if strings.Contains(table, "failed:") || strings.Contains(table, "not final after") {
		t.Errorf("the scenario failed or timed out:\n%s\nstderr:\n%s", table, errs.String())
	}
}

// TestSmokeReplicas: with -replicas 2 the bot runs as two processes sharing a redis-server; the
// questions are spread over both (each question's two envelopes to one connection, in turn), and
// every question gets exactly one complete answer without a 429.
func TestSmokeReplicas(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("LLMBOT_REQUIRE_REDIS") == "1" {
			t.Fatal("redis-server not found, and LLMBOT_REQUIRE_REDIS=1: install Debian's redis-server (apt-get install redis-server)")
		}
		t.Skip("redis-server not found: install Debian's redis-server (apt-get install redis-server), or set LLMBOT_REQUIRE_REDIS=1 to make this a failure")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	err := run(ctx, []string{"-n", "6", "-replicas", "2", "-policies", "fair", "-scale", "20", "-tokens", "120", "-settle", "200ms",
		"-quiet", "3s", "-plot", ""}, &out, &errs)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errs.String())
	}
	table := out.String()
	// The row: 0 429s, then 6 complete, none wrong, lost or duplicated.
	row := regexp.MustCompile(`(?m)^\| 6 \| 2 \| fair \| .*\| 0 \| 6 / 0 / 0 / 0 \| `)
	if !row.MatchString(table) {
		t.Errorf("no row of 6 answers from 2 replicas, each once, without a 429, in:\n%s\nstderr:\n%s", table, errs.String())
	}
	for _, want := range []string{"share one redis-server", "envelopes per Socket Mode connection 6, 6", "redis-server CPU"} {
		if !strings.Contains(table, want) {
			t.Errorf("no %q in:\n%s\nstderr:\n%s", want, table, errs.String())
		}
	}
	if strings.Contains(table, "failed:") || strings.Contains(table, "not final after") {
		t.Errorf("the scenario failed or timed out:\n%s\nstderr:\n%s", table, errs.String())
	}
}

// TestReplicasFlags: -replicas takes positive numbers, and -edit-budget no negative one, refused
// before the bot is built.
func TestReplicasFlags(t *testing.T) {
	for _, args := range [][]string{{"-replicas", "0"}, {"-replicas", "1,x"}, {"-edit-budget", "-1"}} {
		var out, errs bytes.Buffer
		err := run(context.Background(), args, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestSmokeImagine: -imagine runs /imagine jobs whose pictures come back at once, and reports
// every picture shared and the bot's peak RSS.
func TestSmokeImagine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	if err := run(ctx, []string{"-imagine", "3", "-image-mib", "1", "-settle", "200ms"}, &out, &errs); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errs.String())
	}
	row := regexp.MustCompile(`(?m)^\| 3 \| 1 MiB \| yes \(b64_json\) \| [0-9.]+ / [0-9.]+ \| 3 / 3 \| `)
	if !row.MatchString(out.String()) {
		t.Errorf("no row of 3 pictures shared in:\n%s\nstderr:\n%s", out.String(), errs.String())
	}
}

// TestSmokeLongThread: a thread over CONTEXT_TOKENS and over what a read keeps is answered with the
// summary of its beginning, each request within the budget; a follow-up reuses the thread and the
// summary.
func TestSmokeLongThread(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the bot binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	err := run(ctx, []string{"-long-thread", "600", "-settle", "200ms", "-first-token", "10ms", "-token-interval", "1ms",
		"-bot-env", "CONTEXT_TOKENS=1000"}, &out, &errs)
	if err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errs.String())
	}
	row := regexp.MustCompile(`(?m)^\| 600 messages \(\d+ KB of text\) \| 1000 \| 1, (\d+) tokens \| 2, (\d+) tokens \| parent yes, first replies yes \| \[\d+ messages in between are left out\] \| yes, yes, yes \|$`)
	m := row.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no row of a summarised thread in:\n%s\nstderr:\n%s", out.String(), errs.String())
	}
	for _, n := range m[1:] {
		if k, _ := strconv.Atoi(n); k > 1000 {
			t.Errorf("a request of %d tokens, over CONTEXT_TOKENS:\n%s", k, out.String())
		}
	}
	// The follow-up: answered with no summary request and no read.
	if !regexp.MustCompile(`(?m)\| \d+ / 1 / 0 \| [0-9.]+m?s, 0, 0 \|`).MatchString(out.String()) {
		t.Errorf("the follow-up made a summary request or a read:\n%s", out.String())
	}
}

func TestBotEnvFlag(t *testing.T) {
	var e envList
	for _, ok := range []string{"GOMAXPROCS=1", "LLM_STREAM_COALESCE="} {
		if err := e.Set(ok); err != nil {
			t.Errorf("Set(%q): %v", ok, err)
		}
	}
	if got := e.String(); got != "GOMAXPROCS=1 LLM_STREAM_COALESCE=" {
		t.Errorf("collected %q", got)
	}
	for _, bad := range []string{"GOMAXPROCS", "=1", "", "REPLY_MODE=stream", "REPLY_MODE=edit", "EDIT_BUDGET_PER_MINUTE=100", "MAX_CONCURRENT_REPLIES=5", "REDIS_URL=redis://127.0.0.1:6379/0", "STATE_DIR=/tmp"} {
		if err := e.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}

// TestModeFlag: -mode takes the bot's two reply modes and refuses anything else before building the bot.
func TestModeFlag(t *testing.T) {
	var out, errs bytes.Buffer
	err := run(context.Background(), []string{"-mode", "chat"}, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "-mode") {
		t.Errorf("-mode chat: %v", err)
	}
}

func TestWrittenBy(t *testing.T) {
	tests := []struct {
		r    result
		want string
	}{
		{result{edited: 2, editLags: ms(1000, 3000)}, "answers streamed 0, edited 2 (lag mean / p95 2.00 / 3.00 s), both 0"},
		{result{streamed: 1, streamLags: ms(500), edited: 1, editLags: ms(4000), bothWays: 1},
			"answers streamed 1 (lag mean / p95 0.50 / 0.50 s), edited 1 (lag mean / p95 4.00 / 4.00 s), both 1"},
		{result{streamed: 1}, "answers streamed 1, edited 0, both 0"}, // an answer that showed nothing has no lags
	}
	for _, tt := range tests {
		if got := tt.r.writtenBy(); got != tt.want {
			t.Errorf("writtenBy() = %q, want %q", got, tt.want)
		}
	}
}

func TestReplicaLabels(t *testing.T) {
	tests := []struct {
		r           result
		cell, label string
	}{
		{result{n: 50, policy: "fair", replicas: 1}, "1", "N=50 fair"},
		{result{n: 50, policy: "fair", replicas: 2}, "2", "N=50 2 replicas fair"},
		{result{n: 200, policy: "fair", replicas: 2, noRedis: true}, "2, no Redis", "N=200 2 replicas without Redis fair"},
	}
	for _, tt := range tests {
		if cell, label := tt.r.replicasCell(), tt.r.label(); cell != tt.cell || label != tt.label {
			t.Errorf("replicasCell, label = %q, %q; want %q, %q", cell, label, tt.cell, tt.label)
		}
	}
}
