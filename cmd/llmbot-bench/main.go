// Command llmbot-bench is the bot's load benchmark: it builds the real bot (cmd/llmbot), runs
// it as a separate process against the in-process fake Slack (Slack's rate limits enforced: a
// token bucket per method per workspace, chat.postMessage per channel, 429 with Retry-After) and
// fake model (SSE, tokens at a steady rate), asks N questions at once, and reports how fresh the
// answers were next to the best the edit budget allows, what Slack calls they cost, whether any
// answer was lost or wrong, and the bot's CPU, memory and goroutines. The same load runs with the
// bot's pacing (fair) and the two baselines (every-1s, every-20-chunks), chosen with the bot's
// --bench-edit-policy flag (not a setting, and not in its --help). With -mode stream the bot
// writes with Slack's native streaming (REPLY_MODE=stream) and the questions are asked in DM
// threads, where it streams; streamed answers are rebuilt from their chat.startStream,
// appendStream and stopStream writes, and those the bot wrote by editing (the stream budget used
// up) are measured as in edit mode.
//
//	go run ./cmd/llmbot-bench -n 1,10,50,200
//	go run ./cmd/llmbot-bench -n 10,50 -mode stream
//	go run ./cmd/llmbot-bench -n 50,200 -policies fair -replicas 1,2,3
//	go run ./cmd/llmbot-bench -long-thread 2000
//
// With -replicas K the bot runs as K processes sharing a redis-server (REDIS_URL), and the fake
// Slack spreads the questions over their Socket Mode connections.
//
// Everything listens on 127.0.0.1; every wait is bounded; the bot is killed at the end of each
// scenario. docs/benchmarks.md records its runs and what they showed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmbot-bench:", err)
		os.Exit(1)
	}
}

var allPolicies = []string{"fair", "every-1s", "every-20-chunks"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llmbot-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ns := fs.String("n", "1,10,50,200", "numbers of conversations started together, comma-separated")
	policies := fs.String("policies", strings.Join(allPolicies, ","), "edit policies to compare (the bot's --bench-edit-policy)")
	mode := fs.String("mode", "edit", "the bot's REPLY_MODE: edit (mentions in channels, answers posted and edited) or stream (questions in DM threads, answers streamed natively while Slack's stream budget lasts, else edited)")
	scale := fs.Float64("scale", 1, "time scale: multiplies Slack's rates and the model's token rate (ratios kept); reported lags are converted back to Slack time")
	maxConcurrent := fs.Int("max-concurrent", 0, "the bot's MAX_CONCURRENT_REPLIES (50 is its default: answers beyond it wait in line, and the table reports the wait per place); 0: N + 10, so that no question waits")
	perChannel := fs.Int("per-channel", 4, "conversations per channel (N=200 -> 50 channels)")
	tokens := fs.Int("tokens", 400, "tokens per answer (about)")
	spread := fs.Float64("spread", 0, "answers' lengths differ by up to this fraction of -tokens either way, spread evenly over the conversations (0.5: 200 to 600 tokens); 0: every answer has the same length, so answers started together end together (the worst case for the final edits)")
	first := fs.Duration("first-token", 600*time.Millisecond, "model: time to the first token")
	interval := fs.Duration("token-interval", 25*time.Millisecond, "model: time between tokens (25ms = 40 tokens/s)")
	updates := fs.Float64("updates-per-min", 50, "Slack: chat.update calls per minute per workspace (the bot's EDIT_BUDGET_PER_MINUTE is set to the same, unless -edit-budget)")
	editBudget := fs.Float64("edit-budget", 0, "the bot's EDIT_BUDGET_PER_MINUTE, each replica's; 0: -updates-per-min (with Redis the replicas share it: it is the workspace's figure). With -no-redis, the workspace's figure divided by the replicas is the old workaround")
	replicaList := fs.String("replicas", "1", "numbers of bot processes (replicas), comma-separated: each runs every N and policy; above 1 they share a redis-server started for each scenario (REDIS_URL), and the fake Slack spreads the questions over their connections")
	noRedis := fs.Bool("no-redis", false, "with -replicas above 1: no Redis, the replicas share nothing (dedupe, leases, Slack's budgets each their own), as they ran before it")
	posts := fs.Float64("posts-per-min", 60, "Slack: chat.postMessage calls per minute per channel")
	burst := fs.Int("burst", 5, "Slack: burst of every method's token bucket")
	spent := fs.Bool("spent", false, "Slack: every budget is used up when the questions come (as when the bot restarts mid-load and its previous instance spent them), so the bot's first calls get 429s: measures that a 429 from a fresh start is honoured and not repeated")
	reads := fs.Bool("read-limits", true, "Slack: enforce the tiers of conversations.replies/history (50/min) and users.info (100/min) too, as Slack does; false: reads are unlimited (only the write budget is measured)")
	quiet := fs.Duration("quiet", 10*time.Second, "a scenario ends when no model stream is open and Slack saw no call for this long")
	settle := fs.Duration("settle", time.Second, "idle time after the bot starts (then idle RSS is read) and after the run (then goroutines are counted)")
	timeout := fs.Duration("timeout", 0, "bound of one scenario (0: twice its expected time plus margins)")
	botPath := fs.String("bot", "", "a prebuilt bot binary (default: go build ./cmd/llmbot)")
	plot := fs.String("plot", "docs/load-lag.png", "write the lag plot (PNG) here; empty: no plot")
	keep := fs.Bool("keep", false, "keep the work directory (the bot's logs and goroutine dumps) and print its path")
	verbose := fs.Bool("v", false, "progress and per-method call counts on stderr")
	newThreads := fs.Bool("new-threads", false, "with -mode stream: each question is a new top-level DM message (in the agent pane it starts its own thread), not a reply in a DM thread from before the run")
	userTeams := fs.Bool("user-teams", false, "Slack: every person's message event names their team as user_team (members' too, as some of Slack's payloads do, not all): the bot then places members without users.info; false: only people of other workspaces carry it")
	followUps := fs.Bool("follow-ups", false, "with -mode edit: each thread is answered once first (not measured), then a follow-up mention in each is asked at once (through another replica than the first question), and those are measured; reports the conversations.replies calls per thread")
	imagine := fs.Int("imagine", 0, "instead of the conversations: this many /imagine jobs from as many people, whose pictures the model returns all at the same instant (the worst case for memory); reports the bot's peak RSS")
	imageMiB := fs.Int("image-mib", 4, "with -imagine: the size of each picture in MiB")
	longThread := fs.Int("long-thread", 0, "instead of the conversations: a thread of this many messages (from before the bot started), one mention at its end; reports the model requests' sizes against CONTEXT_TOKENS, whether the summary request got the thread's beginning, the times, the conversations.replies calls and the bot's peak RSS")
	var botEnv envList
	fs.Var(&botEnv, "bot-env", "KEY=VALUE added to the bot's environment (repeatable), e.g. GOMAXPROCS=1 to measure a runtime setting")
	if err := fs.Parse(args); err != nil {
		return err
	}
	counts, err := parseInts(*ns)
	if err != nil {
		return fmt.Errorf("-n: %w", err)
	}
	replicas, err := parseInts(*replicaList)
	if err != nil {
		return fmt.Errorf("-replicas: %w", err)
	}
	pols := strings.Split(*policies, ",")
	for _, p := range pols {
		if !contains(allPolicies, p) {
			return fmt.Errorf("-policies: %q is not one of %s", p, strings.Join(allPolicies, ", "))
		}
	}
	if *mode != "edit" && *mode != "stream" {
		return fmt.Errorf("-mode: %q is not edit or stream", *mode)
	}
	if *followUps && *mode != "edit" || *newThreads && *mode != "stream" {
		return errors.New("-follow-ups: only with -mode edit; -new-threads: only with -mode stream")
	}
	if *scale <= 0 || *maxConcurrent < 0 || *perChannel < 1 || *tokens < 1 || *updates <= 0 || *posts <= 0 || *burst < 1 || *spread < 0 || *spread >= 1 || *editBudget < 0 {
		return errors.New("-scale, -updates-per-min and -posts-per-min must be above 0; -per-channel, -tokens and -burst at least 1; -spread from 0 to below 1; -edit-budget and -max-concurrent not below 0")
	}
	var redisPath string
	if slices.Max(replicas) > 1 && !*noRedis {
		// Looked up before the bot is built, so a missing redis-server costs nothing.
		if redisPath, err = findRedis(); err != nil {
			return err
		}
	}

	logf := func(format string, a ...any) {
		if *verbose {
			fmt.Fprintf(stderr, format+"\n", a...)
		}
	}
	work, err := os.MkdirTemp("", "llmbot-bench-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Fprintln(stderr, "work directory:", work)
	} else {
		defer os.RemoveAll(work)
	}
	path := *botPath
	if path == "" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		logf("building ./cmd/llmbot")
		bctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		path, err = buildBot(bctx, root, work)
		cancel()
		if err != nil {
			return err
		}
	}
	set := settings{
		scale: *scale, perChannel: *perChannel, tokens: *tokens, spread: *spread, firstToken: *first, tokenInterval: *interval,
		updatesPerMin: *updates, editBudget: *editBudget, noRedis: *noRedis, redisPath: redisPath, postsPerMin: *posts, burst: *burst, spent: *spent, readLimits: *reads, quiet: *quiet, settle: *settle,
		timeout: *timeout, botPath: path, botEnv: botEnv, mode: *mode, workDir: work, verbose: logf, maxConcurrent: *maxConcurrent,
		followUps: *followUps, newThreads: *newThreads, userTeams: *userTeams,
	}
	if *imagine > 0 {
		if *imageMiB < 1 {
			return errors.New("-image-mib must be at least 1")
		}
		logf("imagine: %d jobs of %d MiB pictures", *imagine, *imageMiB)
		r, err := runImagine(ctx, set, *imagine, *imageMiB)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "llmbot-bench %s\n", strings.Join(args, " "))
		fmt.Fprintf(stdout, "machine: %s; %d CPUs; %s\n\n", cpuModel(), runtime.NumCPU(), runtime.Version())
		writeImagine(stdout, r)
		return nil
	}
	if *longThread > 0 {
		if *longThread < 3 {
			return errors.New("-long-thread must be at least 3")
		}
		logf("long thread: %d messages", *longThread)
		r, err := runLongThread(ctx, set, *longThread)
		if r == nil {
			return err
		}
		fmt.Fprintf(stdout, "llmbot-bench %s\n", strings.Join(args, " "))
		fmt.Fprintf(stdout, "machine: %s; %d CPUs; %s\n\n", cpuModel(), runtime.NumCPU(), runtime.Version())
		writeLongThread(stdout, r)
		return err
	}
	sc := newScripts(set)

	idle, err := idleGoroutines(ctx, set)
	if err != nil {
		return fmt.Errorf("idle goroutines: %w", err)
	}
	began := time.Now()
	var results []*result
	for _, n := range counts {
		for _, k := range replicas {
			for _, p := range pols {
				logf("scenario N=%d replicas=%d policy=%s", n, k, p)
				r, err := runScenario(ctx, set, sc, n, k, p)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil { // reported in the table; the other scenarios still run
					r = &result{n: n, policy: p, replicas: k, noRedis: k > 1 && set.noRedis,
						best: bestMeanLag(n, set.updatesPerMin), note: "failed: " + err.Error()}
					fmt.Fprintf(stderr, "%s: %v\n", r.label(), err)
				}
				logf("  done in %v: %s", r.wall.Round(time.Millisecond), r.summary())
				results = append(results, r)
			}
		}
	}
	fmt.Fprintf(stdout, "llmbot-bench %s\n", strings.Join(args, " "))
	fmt.Fprintf(stdout, "machine: %s; %d CPUs; %s; run took %v\n\n", cpuModel(), runtime.NumCPU(), runtime.Version(), time.Since(began).Round(time.Second))
	writeTable(stdout, results, set, idle)
	if *plot != "" {
		if err := writePlot(*plot, results, set); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Fprintf(stdout, "\nplot: %s\n", *plot)
	}
	return nil
}

// idleGoroutines starts the bot once with no load and counts its goroutines: the reference for
// the count after each run (idle HTTP connections add two goroutines each).
func idleGoroutines(ctx context.Context, set settings) (int, error) {
	r, err := runScenario(ctx, set, newScripts(set), 0, 1, "fair")
	if err != nil {
		return 0, err
	}
	return r.goroutines - r.httpConns, r.goroutineErr
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive whole number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(val)
		}
	}
	return "unknown CPU"
}

// envList collects -bot-env flags.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	k, _, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	if flag, ok := toolSettings[k]; ok {
		return fmt.Errorf("%s is set by the tool for every scenario (%s), so the table's labels and best possible lag follow it", k, flag)
	}
	*e = append(*e, v)
	return nil
}

// toolSettings are the bot's settings each scenario sets itself, with the flag that sets them.
var toolSettings = map[string]string{
	"REPLY_MODE":             "-mode, which also puts the questions where the bot streams: in DM threads",
	"EDIT_BUDGET_PER_MINUTE": "-edit-budget, by default -updates-per-min",
	"REDIS_URL":              "-replicas, which starts a redis-server for each scenario, since the state of one scenario must not reach the next (-no-redis: none)",
	"STATE_DIR":              "a new folder for each bot process in each scenario",
	"MAX_CONCURRENT_REPLIES": "N + 10, so that no question waits in line (or -max-concurrent)",
}
