package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/watch"
)

var errTooLong = errors.New("the answer does not fit one Slack message: lower -tokens")

// settings are the load and the budget, as given on the command line (times in real Slack time:
// the time scale divides them).
type settings struct {
	scale         float64       // multiplies Slack's rates and the model's token rate
	perChannel    int           // conversations per channel
	tokens        int           // answer length, about
	spread        float64       // answers' lengths differ by up to this fraction of tokens either way
	firstToken    time.Duration // model: request -> first token
	tokenInterval time.Duration // model: between tokens
	updatesPerMin float64       // chat.update per workspace
	editBudget    float64       // the bot's EDIT_BUDGET_PER_MINUTE, each replica's (Slack time)
	postsPerMin   float64       // chat.postMessage per channel
	burst         int           // every bucket's burst
	readLimits    bool          // enforce Slack's tiers on reads (conversations.*, users.info) too
	spent         bool          // Slack's budgets are used up when the load starts (fakeslack.SpendBudgets)
	quiet         time.Duration // a run without news for this long (and no stream open) is over
	settle        time.Duration // idle time after start-up (before idle RSS) and after the run (before goroutines)
	timeout       time.Duration // bound of one scenario; 0: from the expected duration
	botPath       string
	botEnv        []string // KEY=VALUE added to the bot's environment (-bot-env)
	// noRedis: several replicas share nothing (no REDIS_URL), each with its own budgets, as they
	// ran before Redis; otherwise they share a redis-server at redisPath, one per scenario.
	noRedis   bool
	redisPath string
	// mode is the bot's REPLY_MODE. In stream mode the conversations are DMs, each question a reply
	// in a thread of its asker's DM: native streaming writes into a thread, and in a DM the asker is
	// its only reader (a top-level DM is answered below it, outside any thread, so by editing).
	mode    string
	workDir string
	verbose func(format string, args ...any)
	// maxConcurrent is the bot's MAX_CONCURRENT_REPLIES; 0: N + 10, so that no question waits in line.
	maxConcurrent int
	// followUps: each of the N threads is answered once first (not measured), then a follow-up
	// mention in each is asked at once, through another replica than the first question when
	// there are several: what is measured are the follow-ups.
	followUps bool
	// newThreads: in stream mode each question is a new top-level DM message (in the agent pane it
	// starts its own thread), not a reply in a thread from before the run.
	newThreads bool
	// userTeams: the fake names every person's team in their events, members' too
	// (fakeslack.Config.UserTeams), as Slack does in some payloads, not in all.
	userTeams bool
}

// concurrent is MAX_CONCURRENT_REPLIES for n conversations.
func (s settings) concurrent(n int) int {
	if s.maxConcurrent > 0 {
		return s.maxConcurrent
	}
	return n + 10
}

// limits are the fake's rate limits: Slack's published tiers (fakeslack.SlackLimits), with
// chat.update per workspace and chat.postMessage per channel as set and the given burst; every
// other method gets a burst of max(burst, 6 s of its rate) (Slack publishes no burst sizes; a
// burst of 5 on chat.postMessage's workspace-wide 600/min would refuse 50 placeholders posted in
// 50 channels at once, which Slack does not). Every rate is multiplied by the time scale.
func (s settings) limits() fakeslack.Limits {
	l := fakeslack.SlackLimits(s.burst)
	for m, lim := range l.Methods {
		lim.Burst = max(s.burst, int(lim.PerMinute/10))
		l.Methods[m] = lim
	}
	l.Methods["chat.update"] = fakeslack.Limit{PerMinute: s.updatesPerMin, Burst: s.burst}
	l.PostMessagePerChannel = fakeslack.Limit{PerMinute: s.postsPerMin, Burst: s.burst}
	if !s.readLimits {
		for _, m := range []string{"conversations.replies", "conversations.history", "users.info"} {
			delete(l.Methods, m)
		}
	}
	for m, lim := range l.Methods {
		lim.PerMinute *= s.scale
		l.Methods[m] = lim
	}
	l.PostMessagePerChannel.PerMinute *= s.scale
	return l
}

// result is one scenario's measurements. Durations measured under a time scale are multiplied
// back by it (Slack time), except the ack latencies and CPU, which do not scale.
type result struct {
	n        int
	policy   string
	replicas int  // bot processes
	noRedis  bool // the replicas shared nothing

	acks        []time.Duration
	firstText   []time.Duration
	lags        []time.Duration // per token shown
	finalLags   []time.Duration
	best        time.Duration
	hidden      int // tokens never shown
	tokens      int // tokens the model streamed
	calls       int // Slack Web API calls after the first question
	callsBy     map[string]int
	throttled   int // 429s answered
	throttledBy map[string]int
	last429     map[string]time.Duration // per method: its last 429, from the load's start (Slack time)
	complete    int
	wrong, lost int
	duplicates  int             // extra bot messages in threads that do not show the answer, and extra model requests
	continued   int             // answers whose end was posted in a second message (the edit budget was spent)
	streamed    int             // answers written with native streaming alone
	edited      int             // answers written by posting and editing alone
	bothWays    int             // answers streamed, then posted (a stream that could not be finished)
	streamLags  []time.Duration // lags of the tokens of answers written with native streaming alone
	editLags    []time.Duration // lags of the tokens of answers written by posting and editing alone
	unmatched   int
	peakStreams int // most model streams open at once
	// threadReads is how many conversations.replies calls read each thread (by channel/ts), after
	// the first question measured.
	threadReads map[string]int
	toModel     []time.Duration // question posted -> the model request for it (not scaled)
	// concurrent is the bot's MAX_CONCURRENT_REPLIES; toldPlace counts the askers told their place
	// in line privately.
	concurrent, toldPlace int
	httpConns             int             // of the goroutines after: idle HTTP connections' read/write loops
	streamTime            []time.Duration // model: first token -> last token, per answer (not scaled)
	cpu                   time.Duration   // from the first question to the end of the run (summed over the replicas, as below)
	wakeups               int64           // times the bot's threads were scheduled in, same span (-1: unknown)
	replicaCPU            []time.Duration // each replica's part of cpu
	replicaRSS            []int64         // each replica's peak RSS, kB
	envelopes             []int           // envelopes the fake Slack wrote to each Socket Mode connection
	redisCPU              time.Duration   // the redis-server's CPU over the same span (-1 without one)
	idleCPU               time.Duration   // during the settle time before the load
	idleFor               time.Duration   // how long that was
	idleRSS               int64           // kB
	peakRSS               int64           // kB
	goroutines            int
	goroutineErr          error
	logs                  map[string]int
	firstLog              string        // the bot's first warning or error line
	wall                  time.Duration // load start -> end of the run
	note                  string        // why the run ended before every reply was final, if it did
	// troubles describes each conversation that was not answered exactly once: what its thread
	// shows and how many model requests it had, to find the cause in the bot's logs.
	troubles []string
}

// scripts caches the conversations' answers across scenarios (the same seeds every time).
type scripts struct {
	tokens int
	spread float64 // lengths differ by up to this fraction of tokens either way
	m      map[int]*script
}

// newScripts returns an empty cache for the answers set describes.
func newScripts(set settings) *scripts {
	return &scripts{tokens: set.tokens, spread: set.spread, m: map[int]*script{}}
}

// length is conversation i's answer length: tokens, or with a spread, tokens·(1 ± spread) spread
// evenly over the conversations (the golden ratio's multiples modulo 1 cover [0, 1) evenly for any
// number of them), so the mean stays about tokens at any N.
func (sc *scripts) length(i int) int {
	if sc.spread == 0 {
		return sc.tokens
	}
	u := math.Mod(float64(i)*0.6180339887498949, 1)
	return max(1, int(math.Round(float64(sc.tokens)*(1-sc.spread+2*sc.spread*u))))
}

func (sc *scripts) get(i int) (*script, error) {
	if s, ok := sc.m[i]; ok {
		return s, nil
	}
	// Answer(n) makes about 1.4n pieces as Split cuts them: cut to exactly the length.
	n := sc.length(i)
	tokens := fakellm.Split(fakellm.Answer(n, uint64(i)+1))
	s, err := newScript(tokens[:min(n, len(tokens))])
	if err != nil {
		return nil, err
	}
	sc.m[i] = s
	return s, nil
}

var questionTag = regexp.MustCompile(`\[q(\d+)\]`)

// question is conversation i's question, mentioning botUserID unless it is "" (in a DM nobody
// mentions the bot); the tag lets the fake model and the analysis find it.
func question(botUserID string, i int) string {
	q := fmt.Sprintf("[q%d] How do we share Slack's edit budget between answers?", i)
	if botUserID == "" {
		return q
	}
	return fmt.Sprintf("<@%s> %s", botUserID, q)
}

// conversationOf finds the conversation a chat request is for: the tag in its last user message.
func conversationOf(msgs []fakellm.Message) (int, bool) {
	for j := len(msgs) - 1; j >= 0; j-- {
		if msgs[j].Role != "user" {
			continue
		}
		m := questionTag.FindStringSubmatch(msgs[j].Content)
		if m == nil {
			return 0, false
		}
		i, err := strconv.Atoi(m[1])
		return i, err == nil
	}
	return 0, false
}

// runScenario starts the fakes and the bot with policy, asks n questions at once, waits until
// every answer is final (or nothing moves any more), and measures.
func runScenario(ctx context.Context, set settings, sc *scripts, n, replicas int, policy string) (*result, error) {
	logf := set.verbose
	convs := make([]*script, n)
	for i := range n {
		s, err := sc.get(i)
		if err != nil {
			return nil, err
		}
		convs[i] = s
	}
	first := scaleDown(set.firstToken, set.scale)
	interval := scaleDown(set.tokenInterval, set.scale)

	slack := fakeslack.New(fakeslack.Config{Limits: set.limits(), UserTeams: set.userTeams})
	defer slack.Close()
	for i := range n { // the workspace's people, as users.list lists them: the askers
		slack.AddUser(fakeslack.User{ID: fmt.Sprintf("U%04d", i), Name: fmt.Sprintf("user%d", i)})
	}
	model := fakellm.New()
	defer model.Close()
	model.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		i, ok := conversationOf(r.Messages)
		if !ok || i >= n {
			return fakellm.Text("I cannot tell which question this is.")
		}
		return fakellm.Tokens(convs[i].tokens...).Paced(first, interval)
	})

	env := append(fakesEnv(slack, model), // later entries win (os/exec keeps the last of a key)
		"REPLY_MODE="+set.mode,
		"EDIT_BUDGET_PER_MINUTE="+strconv.FormatFloat(set.botEditBudget()*set.scale, 'f', -1, 64),
		"MAX_CONCURRENT_REPLIES="+strconv.Itoa(set.concurrent(n)),
		"GOTRACEBACK=all",
		"HOME="+set.workDir,
	)
	res := &result{n: n, policy: policy, replicas: replicas, noRedis: replicas > 1 && set.noRedis,
		best: bestMeanLag(n, set.updatesPerMin), redisCPU: -1}
	var redis *redisServer
	if replicas > 1 && !set.noRedis {
		var err error
		redis, err = startRedis(ctx, set.redisPath, filepath.Join(set.workDir, fmt.Sprintf("redis-%s-%d-%dx", policy, n, replicas)))
		if err != nil {
			return nil, err
		}
		defer redis.stop() // deferred before the bots' stop, so it runs after it
		env = append(env, "REDIS_URL="+redis.url())
	}
	env = append(env, set.botEnv...)
	logPath := func(i int) string {
		if replicas == 1 {
			return filepath.Join(set.workDir, fmt.Sprintf("bot-%s-%d.log", policy, n))
		}
		return filepath.Join(set.workDir, fmt.Sprintf("bot-%s-%d-%dx-r%d.log", policy, n, replicas, i+1))
	}
	bots, err := startFleet(ctx, set.botPath, []string{"--bench-edit-policy=" + policy}, env, replicas, logPath, slack)
	if err != nil {
		return nil, err
	}
	defer bots.stop(10 * time.Second)
	idle0, _, err := bots.usage()
	if err != nil {
		return nil, err
	}
	settled := time.Now()
	if err := watch.Sleep(ctx, set.settle); err != nil { // idle RSS is measured after start-up
		return nil, err
	}
	if idle1, _, err := bots.usage(); err == nil {
		res.idleCPU, res.idleFor = idle1.cpu-idle0.cpu, time.Since(settled)
	}
	if res.idleRSS, _, err = bots.memKB("VmRSS"); err != nil {
		return nil, err
	}
	// The load: n mentions at once, each the start of its own thread; in stream mode n DM messages,
	// each a reply in a thread of its asker's DM, under a message of theirs from before the run (stored
	// as history: the bot hears nothing of it). With follow-ups, those are answered first, and the
	// load is a follow-up mention in each thread.
	threads := make([]string, n)
	chans := make([]string, n)
	asked := make([]time.Time, n)
	if set.mode == "stream" {
		for i := range n {
			chans[i] = fmt.Sprintf("D%04d", i)
			if !set.newThreads {
				threads[i] = slack.Post(fakeslack.UserMessage{Channel: chans[i], User: fmt.Sprintf("U%04d", i),
					Text: "About Slack's rate limits.", Time: time.Now().Add(-time.Hour)})
			}
		}
	}
	post, err := spreader(slack, replicas)
	if err != nil {
		return nil, err
	}
	botUser := slack.Config().BotUserID
	ask := func() (time.Time, error) {
		start := time.Now()
		for i := range n {
			user := fmt.Sprintf("U%04d", i)
			asked[i] = time.Now()
			switch {
			case set.mode == "stream" && threads[i] == "": // a new top-level DM message
				threads[i], err = post(i, fakeslack.UserMessage{Channel: chans[i], User: user, Text: question("", i)})
			case set.mode == "stream":
				_, err = post(i, fakeslack.UserMessage{Channel: chans[i], User: user, ThreadTS: threads[i], Text: question("", i)})
			case threads[i] != "": // a follow-up, through the next replica
				_, err = post(i+1, fakeslack.UserMessage{Channel: chans[i], User: user, ThreadTS: threads[i], Text: question(botUser, i)})
			default:
				chans[i] = fmt.Sprintf("C%04d", i/set.perChannel)
				threads[i], err = post(i, fakeslack.UserMessage{Channel: chans[i], User: user, Text: question(botUser, i)})
			}
			if err != nil {
				return start, err
			}
		}
		if set.mode == "stream" {
			logf("  %s N=%d: %d questions asked in DM threads", policy, n, n)
		} else {
			logf("  %s N=%d: %d questions asked in %d channels", policy, n, n, (n+set.perChannel-1)/set.perChannel)
		}
		return start, waitDone(ctx, set, slack, model, bots, convs, chans, threads, start)
	}
	if set.followUps {
		if _, err := ask(); err != nil {
			return nil, fmt.Errorf("the first questions, before the follow-ups: %w", err)
		}
		// The answers' last writes (their Stop buttons taken off, at the back of the edit budget)
		// come after their final texts, and a thread's next answer waits for them.
		if err := waitIdle(ctx, slack, chans, threads); err != nil {
			return nil, fmt.Errorf("the first answers' last writes: %w", err)
		}
	}
	use0, each0, err := bots.usage()
	if err != nil {
		return nil, err
	}
	var redis0 usage
	if redis != nil {
		if redis0, err = cpuUsage(redis.pid()); err != nil {
			return nil, err
		}
	}
	if set.spent {
		slack.SpendBudgets()
	}
	start, err := ask()
	if err != nil {
		if ctx.Err() != nil || bots.exited() != nil {
			return nil, err // interrupted, or the bot died: nothing more to measure
		}
		res.note = err.Error() // the scenario's time bound: measure what there is
		logf("  %v", err)
	}
	res.wall = time.Since(start)
	use1, each1, err := bots.usage()
	if err != nil {
		return nil, err
	}
	res.cpu, res.wakeups = use1.cpu-use0.cpu, -1
	if use0.wakeup >= 0 && use1.wakeup >= 0 {
		res.wakeups = use1.wakeup - use0.wakeup
	}
	for i := range each1 {
		res.replicaCPU = append(res.replicaCPU, each1[i].cpu-each0[i].cpu)
	}
	if redis != nil {
		if redis1, err := cpuUsage(redis.pid()); err == nil {
			res.redisCPU = redis1.cpu - redis0.cpu
		}
	}
	for _, c := range slack.Conns() {
		res.envelopes = append(res.envelopes, c.Envelopes)
	}
	if res.peakRSS, res.replicaRSS, err = bots.memKB("VmHWM"); err != nil {
		return nil, err
	}
	if err := watch.Sleep(ctx, set.settle); err != nil { // let finished replies' goroutines end
		return nil, err
	}
	res.logs = map[string]int{}
	for i, bot := range bots {
		g, h, err := bot.dumpGoroutines(10 * time.Second)
		res.goroutines += g
		res.httpConns += h
		if err != nil && res.goroutineErr == nil {
			res.goroutineErr = err
		}
		logs, first := logLines(logPath(i))
		for level, k := range logs {
			res.logs[level] += k
		}
		if res.firstLog == "" && first != "" {
			res.firstLog = first
			if replicas > 1 {
				res.firstLog = fmt.Sprintf("replica %d: %s", i+1, first)
			}
		}
	}

	measure(res, set.scale, slack, model, convs, chans, threads, asked, start)
	res.concurrent = set.concurrent(n)
	for _, e := range slack.Ephemerals() {
		if strings.Contains(e.Text, "in line") {
			res.toldPlace++
		}
	}
	return res, nil
}

// fakesEnv is the bot's environment for the fakes: their URLs and credentials, warnings and errors
// only, in JSON.
func fakesEnv(slack *fakeslack.Server, model *fakellm.Server) []string {
	return []string{
		"SLACK_BOT_TOKEN=xoxb-test",
		"SLACK_APP_TOKEN=xapp-test",
		"SLACK_API_URL=" + slack.URL(),
		"OPENAI_API_KEY=" + fakellm.DefaultAPIKey,
		"OPENAI_BASE_URL=" + model.URL(),
		"LOG_LEVEL=warn",
		"LOG_FORMAT=json",
	}
}

// startConnected starts the bot and waits until it has connected to slack's Socket Mode. On an
// error the bot is stopped.
func startConnected(ctx context.Context, path string, env []string, logPath string, slack *fakeslack.Server) (*botProcess, error) {
	bots, err := startFleet(ctx, path, nil, env, 1, func(int) string { return logPath }, slack)
	if err != nil {
		return nil, err
	}
	return bots[0], nil
}

// botEditBudget is the bot's EDIT_BUDGET_PER_MINUTE (each replica's): -edit-budget, or Slack's
// own figure.
func (s settings) botEditBudget() float64 {
	if s.editBudget > 0 {
		return s.editBudget
	}
	return s.updatesPerMin
}

// waitDone waits until every reply shows its final text, or until no model stream is open and
// nothing has happened in Slack for set.quiet, or the scenario's time bound.
func waitDone(ctx context.Context, set settings, slack *fakeslack.Server, model *fakellm.Server,
	bots fleet, convs []*script, chans, threads []string, start time.Time) error {
	n := len(convs)
	limit := set.timeout
	if limit <= 0 {
		// Twice the expected time: answers stream, then every reply gets two writes from the budget.
		stream := set.firstToken + time.Duration(set.tokens)*set.tokenInterval
		writes := time.Duration(float64(2*n) / set.updatesPerMin * float64(time.Minute))
		limit = scaleDown(2*(stream+writes), set.scale) + 30*time.Second + set.quiet
	}
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	index := make(map[string]int, n) // channel/thread -> conversation
	for i := range n {
		index[chans[i]+"/"+threads[i]] = i
	}
	replies := make([]reply, n) // what each thread shows
	done := make([]bool, n)
	remaining := n
	seen, calls := 0, 0
	lastNews := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for remaining > 0 {
		select {
		case <-wctx.Done():
			return fmt.Errorf("%d of %d replies not final after %v", remaining, n, time.Since(start).Round(time.Second))
		case <-tick.C:
		}
		if err := bots.exited(); err != nil {
			return err
		}
		ws := slack.WritesSince(seen)
		seen += len(ws)
		if c := slack.CallCount(""); len(ws) > 0 || c != calls {
			calls, lastNews = c, time.Now()
		}
		for _, w := range ws {
			i, ok := index[w.Channel+"/"+w.ThreadTS]
			bw, write := botWriteOf(w)
			if !ok || !write || w.Time.Before(start) { // before start: the answers before follow-ups
				continue
			}
			v, _ := replies[i].add(convs[i], bw)
			if !done[i] && convs[i].isFinal(v) {
				done[i] = true
				remaining--
			}
		}
		if model.Counts().Active == 0 && time.Since(lastNews) >= set.quiet {
			set.verbose("  nothing moved for %v: %d replies not final", set.quiet, remaining)
			return nil
		}
	}
	return nil
}

// measure fills res from the fakes' records of the run from start (the first question).
func measure(res *result, scale float64, slack *fakeslack.Server, model *fakellm.Server,
	convs []*script, chans, threads []string, asked []time.Time, start time.Time) {
	up := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	for _, a := range slack.Acks() {
		if a.Known {
			res.acks = append(res.acks, a.Latency)
		}
	}
	res.callsBy, res.throttledBy, res.last429 = map[string]int{}, map[string]int{}, map[string]time.Duration{}
	res.threadReads = map[string]int{}
	for _, c := range slack.Calls() {
		if c.Time.Before(start) {
			continue // the bot's start-up (auth.test, apps.connections.open), or the first questions before follow-ups
		}
		res.calls++
		res.callsBy[c.Method]++
		if c.Method == "conversations.replies" && c.Status == 200 {
			res.threadReads[c.Params.Get("channel")+"/"+c.Params.Get("ts")]++
		}
		if c.Status == 429 {
			res.throttled++
			res.throttledBy[c.Method]++
			res.last429[c.Method] = max(res.last429[c.Method], up(c.Time.Sub(start)))
		}
	}
	n := len(convs)
	tokenTimes := make([][]time.Time, n)
	requests := make([]int, n)
	for _, r := range model.Requests() {
		if r.Chat == nil || r.Time.Before(start) {
			continue
		}
		i, ok := conversationOf(r.Chat.Messages)
		if !ok || i >= n {
			continue
		}
		requests[i]++
		res.tokens += len(r.Tokens)
		if tokenTimes[i] != nil {
			res.duplicates++ // a second model request for one question
			continue
		}
		res.toModel = append(res.toModel, r.Time.Sub(asked[i]))
		if len(r.Tokens) > 1 {
			res.streamTime = append(res.streamTime, r.Tokens[len(r.Tokens)-1].Time.Sub(r.Tokens[0].Time))
		}
		for _, t := range r.Tokens {
			tokenTimes[i] = append(tokenTimes[i], t.Time)
		}
	}
	res.peakStreams = model.Counts().Peak
	index := make(map[string]int, n)
	for i := range n {
		index[chans[i]+"/"+threads[i]] = i
	}
	writes := make([][]botWrite, n)
	for _, w := range slack.Writes() {
		i, ok := index[w.Channel+"/"+w.ThreadTS]
		bw, write := botWriteOf(w)
		if ok && write && !w.Time.Before(start) {
			writes[i] = append(writes[i], bw)
		}
	}
	for i := range n {
		o := analyse(convs[i], tokenTimes[i], writes[i])
		switch o.status {
		case complete:
			res.complete++
		case wrong:
			res.wrong++
		case lost:
			res.lost++
		}
		if o.status == complete {
			res.continued += max(o.messages-1, 0) // the answer's end posted below what its message showed
		} else {
			res.duplicates += max(o.messages-1, 0)
		}
		if o.status != complete || requests[i] != 1 {
			res.troubles = append(res.troubles, trouble(i, res.replicas, o, requests[i], convs[i], writes[i], start, threads[i], chans[i]))
		}
		res.unmatched += o.unmatched
		res.hidden += o.hidden
		var way *[]time.Duration // the lags of answers written one way, kept apart as well
		switch {
		case o.streamed && o.posted:
			res.bothWays++
		case o.streamed:
			res.streamed++
			way = &res.streamLags
		case o.posted:
			res.edited++
			way = &res.editLags
		}
		for _, l := range o.lags {
			res.lags = append(res.lags, up(l))
			if way != nil {
				*way = append(*way, up(l))
			}
		}
		if o.hasFirst {
			res.firstText = append(res.firstText, up(o.firstText))
		}
		if o.hasFinal {
			res.finalLags = append(res.finalLags, up(o.finalLag))
		}
	}
}

// trouble describes conversation i, which was not answered exactly once: its thread, the replica
// its events went to, how it ended, its model requests, its writes in order (times from the
// questions), and what its messages show at the end, cut short.
func trouble(i, replicas int, o outcome, requests int, s *script, writes []botWrite, start time.Time, thread, channel string) string {
	var r reply
	var ws []string
	for _, w := range writes {
		r.add(s, w)
		ws = append(ws, fmt.Sprintf("%s %s at %.2fs", w.kind, w.ts, w.at.Sub(start).Seconds()))
	}
	var shows []string
	for _, ts := range r.order {
		t := strings.ReplaceAll(r.msgs[ts].text, "\n", " ")
		if len(t) > 60 {
			t = t[:60] + "…"
		}
		shows = append(shows, fmt.Sprintf("%s %q", ts, t))
	}
	state := map[status]string{complete: "complete", wrong: "wrong", lost: "lost"}[o.status]
	where := ""
	if replicas > 1 {
		where = fmt.Sprintf(", its events to replica %d", i%replicas+1)
	}
	return fmt.Sprintf("q%d (%s thread %s%s): %s, %d model requests, %d bot messages; writes: %s; shows: %s",
		i, channel, thread, where, state, requests, o.messages, strings.Join(ws, ", "), strings.Join(shows, " | "))
}

func scaleDown(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d) / scale)
}

// followUpIdle is how long the bot must have made no Slack call before the follow-ups are asked.
const followUpIdle = 3 * time.Second

// waitIdle waits (at most 5 minutes) until no bot message in the threads shows a Stop button any
// more, and then until Slack has seen no call for followUpIdle.
func waitIdle(ctx context.Context, slack *fakeslack.Server, chans, threads []string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	stops := func() bool {
		for i := range threads {
			for _, m := range slack.BotReplies(chans[i], threads[i]) {
				for _, b := range m.Buttons() {
					if strings.Contains(b.ActionID, "stop") {
						return true
					}
				}
			}
		}
		return false
	}
	calls, since := slack.CallCount(""), time.Now()
	for stops() || time.Since(since) < followUpIdle {
		if err := watch.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
		if c := slack.CallCount(""); c != calls {
			calls, since = c, time.Now()
		}
	}
	return nil
}
