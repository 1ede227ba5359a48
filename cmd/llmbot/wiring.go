package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/ask"
	"github.com/llmbot/llmbot/attach"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/command"
	"github.com/llmbot/llmbot/feedback"
	"github.com/llmbot/llmbot/followup"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/imagine"
	"github.com/llmbot/llmbot/instructions"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/media"
	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/orphans"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/pane"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/schedule"
	"github.com/llmbot/llmbot/summarize"
	"github.com/llmbot/llmbot/tables"
	"github.com/llmbot/llmbot/threads"
	"github.com/llmbot/llmbot/tools"
	"github.com/llmbot/llmbot/usage"
)

// Time limits of the Slack client and the start-up (Slack's rate limits are gateway.Budgets).
const (
	slackCallTimeout  = 60 * time.Second // one Web API call, file upload included
	identifyTimeout   = 20 * time.Second
	appIDTimeout      = 5 * time.Second
	authRecheckEvery  = time.Minute // auth.test for /readyz while running (HEALTH_ADDR only)
	slackDialTimeout  = 10 * time.Second
	slackHeaderWait   = 30 * time.Second
	slackIdleConnsMax = 20
	imageUploadTime   = time.Minute // added to IMAGE_TIMEOUT for the whole /imagine job
)

// start wires the parts together and runs the bot until ctx ends. Each part is made by a builder of
// its own; what runs in the background is stopped by start's defers, in the reverse order of their
// starts: when the bot has drained, the background work the last answers used (the shared state's
// heartbeat, the MCP servers, the orphan watch) stops, then the shared state closes, then the
// token's recheck and, last, the health probes, which answer from the start until the end.
func start(ctx context.Context, cfg Config, mcp tools.Config, policy pace.Policy, log *zap.Logger) error {
	warnBaseURL(cfg.OpenAIBaseURL, log)
	metrics, ready := ops.NewMetrics(), ops.NewReadiness()
	stopHealth, err := startHealth(ctx, cfg.HealthAddr, metrics, ready, log.Named("health"))
	if err != nil {
		return fmt.Errorf("HEALTH_ADDR: %w", err)
	}
	defer stopHealth()
	sc, api, files, err := newSlack(cfg, metrics, log)
	if err != nil {
		return err
	}
	id, err := identify(ctx, api, ready, log)
	if errors.Is(err, errStopped) {
		return nil // stopped while starting (SIGTERM): a clean stop
	}
	if err != nil {
		return err
	}
	log = log.With(zap.String("bot_user", id.UserID), zap.String("team", id.TeamID))
	stopRecheck := startAuthRecheck(ctx, cfg.HealthAddr, api, ready)
	defer stopRecheck()
	model, err := newModel(cfg, metrics, log.Named("llm"))
	if err != nil {
		return fmt.Errorf("model client: %w", err)
	}

	shared, err := openState(ctx, cfg, id, metrics, ready, log.Named("state"))
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	defer shared.Close()
	bg := newBackground(ctx)
	defer bg.stop()
	// Without its heartbeat this replica would look dead to the others, which would take over its
	// answers while it writes them: the bot stops instead (and is restarted).
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	bg.run(func(ctx context.Context) {
		if err := shared.run(ctx); err != nil {
			stopRun(fmt.Errorf("shared state: %w", err))
		}
	})

	p := newParts(cfg, id, api, model, metrics, shared, policy, log)
	p.approvalSlack = bot.NewApprovalSlack(sc, api) // approvers' user groups, private prompts
	if p.threads, err = openThreads(cfg, shared, id, metrics, log); err != nil {
		return err
	}
	steer, err := p.steering()
	if err != nil {
		return fmt.Errorf("/llmbot: %w", err)
	}
	tm := metrics.ToolMetrics()
	questions := p.questions(tm) // ask_user
	a := p.answering(files, startTools(bg, cfg, mcp, p.overrides, tm, log.Named("tools"),
		builtins(cfg, questions, slackSearch(cfg, api, p.shared.marks, metrics, log))...))
	// Every command, button, shortcut and event is one row of routes; access rules, the ledger (who
	// asked where, and the budgets) and metrics wrap them all.
	table := route.NewTable(p.guard(a.replies.KnownFollowUp).Middleware, p.controls.gate.Middleware, metrics.Middleware)
	bg.run(func(ctx context.Context) { placeWorkspace(ctx, p.members, bot.NewRoster(sc), log.Named("access")) })
	b := p.bot(sc, table, ready, a.pane)
	// Answers left open by a replica that died (or by this one before a restart) are closed.
	bg.run(func(ctx context.Context) { a.orphans.WatchOrphans(ctx, shared.orphans) })
	bg.run(a.approvals.WatchLapsed) // and the approvals they were waiting for, lapsed
	uses := useCases{bot: b, answering: a, imagine: p.imagine(), feedback: p.feedback(), slack: api, sessions: api.Assistant,
		prompts: p.prompts, usage: p.usage(p.controls.book),
		steering: steer, ask: questions}
	if err := table.Add(uses.routes()...); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	// The scheduled prompts are asked through the bot's loop until the bot stops taking requests.
	defer p.startSchedules(runCtx, steer, b)()
	logStarting(log, cfg, id, policy)
	if err := b.Run(runCtx); err != nil {
		return err // main prints it
	}
	if err := context.Cause(runCtx); ctx.Err() == nil && err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// useCases are what the routes serve.
type useCases struct {
	bot *bot.Bot // Stop: it knows which answers run here, and hands the others' to their replica
	answering
	imagine  *imagine.Imagine
	feedback *feedback.Feedback
	ask      *ask.Ask
	slack    *bot.SlackAPI       // private responses
	sessions *bot.SlackAssistant // the agent session's status
	prompts  []pane.Prompt
	usage    *usage.Usage
	steering // /llmbot: the channels' instructions and scheduled prompts
}

// routes is the route table: every message, command, button, shortcut, modal and event the bot
// serves, one row each. A feature with no row is one Slack never reaches.
func (u useCases) routes() []route.Route {
	approve := u.bot.ApprovalHandler(u.approvals) // the click reaches the call waiting for it, or its replica
	answer := u.bot.AskHandler(u.ask)             // an answer to ask_user's question, likewise
	return []route.Route{
		{Kind: route.Message, Name: route.MessageRoute, Handler: u.replies.Handler()},
		{Kind: route.Action, Name: route.ActionRegenerate, Feature: route.FeatureRegenerate, Handler: u.replies.RegenerateHandler()},
		{Kind: route.Action, Name: route.ActionStop, Feature: route.FeatureStop, Handler: u.bot.StopHandler()},
		{Kind: route.Event, Name: route.EventSessionStopped, Feature: route.FeatureStop, Handler: u.bot.SessionStopHandler(u.sessions)},
		{Kind: route.Action, Name: approvals.ActionToolAllowOnce, Feature: approvals.FeatureToolApproval, Handler: approve},
		{Kind: route.Action, Name: approvals.ActionToolAllowThread, Feature: approvals.FeatureToolApproval, Handler: approve},
		{Kind: route.Action, Name: approvals.ActionToolAllowAlways, Feature: approvals.FeatureToolApproval, Handler: approve},
		{Kind: route.Action, Name: approvals.ActionToolShowApproval, Feature: approvals.FeatureToolApproval, Handler: approve},
		{Kind: route.Action, Name: approvals.ActionToolDeny, Feature: approvals.FeatureToolApproval, Handler: approve},
		{Kind: route.Action, Name: ask.ActionOption(0), Feature: ask.Feature, Handler: answer},
		{Kind: route.Action, Name: ask.ActionOption(1), Feature: ask.Feature, Handler: answer},
		{Kind: route.Action, Name: ask.ActionOption(2), Feature: ask.Feature, Handler: answer},
		{Kind: route.Action, Name: ask.ActionOption(3), Feature: ask.Feature, Handler: answer},
		{Kind: route.Action, Name: ask.ActionOption(4), Feature: ask.Feature, Handler: answer},
		{Kind: route.Action, Name: ask.ActionOther, Feature: ask.Feature, Handler: u.ask.OtherHandler()},
		{Kind: route.View, Name: ask.View, Feature: ask.Feature, Handler: answer},
		{Kind: route.Event, Name: pane.EventAppHomeOpened, Feature: pane.FeatureAgentPane, Handler: u.pane.Handler(u.prompts)},
		{Kind: route.Action, Name: feedback.Action, Feature: feedback.Feature, Handler: u.feedback.Handler()},
		{Kind: route.View, Name: feedback.View, Feature: feedback.Feature, Handler: u.feedback.CommentHandler()},
		{Kind: route.Command, Name: imagine.Command, Feature: access.FeatureImagine, Handler: u.imagine.Handler()},
		{Kind: route.Action, Name: imagine.ActionImagineAgain, Feature: access.FeatureImagine, Handler: u.imagine.Handler()},
		{Kind: route.Command, Name: summarize.Command, Feature: summarize.Feature, Handler: u.summarize.SummarizeHandler(u.slack)},
		{Kind: route.Action, Name: summarize.ActionPost, Feature: summarize.Feature, Handler: u.summarize.PostSummaryHandler(u.slack)},
		{Kind: route.Shortcut, Name: summarize.ShortcutThread, Feature: summarize.Feature, Handler: u.summarize.SummarizeThreadHandler(u.slack)},
		{Kind: route.Command, Name: usage.Command, Feature: usage.Feature, Handler: u.usage.Handler()},
		{Kind: route.Command, Name: command.Name, Feature: command.Feature, Handler: u.command},
		// A scheduled summary, submitted by the schedules' runner as its creator's: /summarize's access rules.
		{Kind: route.Event, Name: schedule.EventSummary, Feature: summarize.Feature,
			Handler: u.schedules.SummaryHandler(u.summarize, u.schedulePosts, u.scheduleTell, u.scheduleLog)},
	}
}

// background is the goroutines that serve the answers and so outlive the bot's drain: the last
// answers close their journal records and may still call the MCP servers. stop ends them and
// waits for them; start defers it.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newBackground returns a background whose context is ctx's values without its end: start's
// deferred stop ends it, after the bot has drained.
func newBackground(ctx context.Context) *background {
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &background{ctx: c, cancel: cancel}
}

// run runs f in the background; f returns when its ctx ends.
func (b *background) run(f func(ctx context.Context)) {
	b.wg.Go(func() { f(b.ctx) })
}

// stop ends the background's goroutines and waits for them.
func (b *background) stop() {
	b.cancel()
	b.wg.Wait()
}

// warnBaseURL warns of the commonest set-up mistake (http://localhost:11434): a model service URL
// without a path, with which every answer would fail with a 404.
func warnBaseURL(baseURL string, log *zap.Logger) {
	if u, err := url.Parse(baseURL); err == nil && strings.Trim(u.Path, "/") == "" {
		log.Warn("OPENAI_BASE_URL has no path: OpenAI-compatible services serve their API under one, usually /v1 " +
			"(http://localhost:11434/v1 for Ollama); without it every request gets 404")
	}
}

// startHealth serves the health probes and the metrics on addr ("": none) until the returned stop
// is called. It listens first: a port that cannot be had stops the bot with a clear message,
// instead of a bot whose probes fail for no reason it says. The probes answer from the start
// (auth.test, connecting) until the bot has drained, so ctx's end does not stop them.
func startHealth(ctx context.Context, addr string, metrics *ops.Metrics, ready *ops.Readiness, log *zap.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	health := ops.NewServer(addr, ready.Ready, metrics.Registry(), log)
	ln, err := health.Listen(ctx)
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := health.Serve(hctx, ln); err != nil {
			log.Error("health listener failed", zap.Error(err)) // probes will fail and say so
		}
	}()
	return func() { cancel(); <-done }, nil
}

// newSlack returns the Slack clients: slack-go's (the Socket Mode connection, and under the
// adapter), the Web API adapter and the files' reader.
func newSlack(cfg Config, metrics *ops.Metrics, log *zap.Logger) (*slack.Client, *bot.SlackAPI, *bot.Files, error) {
	httpClient := slackHTTPClient()
	// Metrics count what reaches Slack; FirstCalls answers some calls without sending them.
	httpClient.Transport = bot.NewFirstCalls(metrics.SlackTransport(httpClient.Transport))
	sc := slack.New(cfg.SlackBotToken,
		slack.OptionAPIURL(strings.TrimRight(cfg.SlackAPIURL, "/")+"/"), // slack-go appends the method name
		slack.OptionAppLevelToken(cfg.SlackAppToken),
		slack.OptionHTTPClient(httpClient),
		slack.OptionLog(zap.NewStdLog(log.Named("slack-go"))),
		// No OptionRetry: writes are paced by package pace, which must see every 429;
		// bot.SlackAPI retries reads itself. No OptionDebug: it shortens Socket Mode connections.
	)
	api := bot.NewSlackAPI(sc, httpClient, bot.ThreadBytes(cfg.ContextTokens))
	files, err := bot.NewFiles(sc, bot.FilesOptions{Token: cfg.SlackBotToken, APIURL: cfg.SlackAPIURL,
		MaxBytes: cfg.MaxFileBytes, Transport: slackHTTPClient().Transport})
	if err != nil {
		return nil, nil, nil, err
	}
	return sc, api, files, nil
}

// errStopped is identify's error when ctx ended while it waited for Slack.
var errStopped = errors.New("stopped while starting")

// identify asks Slack who the bot is (auth.test, retried while Slack cannot be reached), tells the
// readiness probe, and finds the bot's app, which Socket Mode must connect to (unknown: not checked).
func identify(ctx context.Context, api *bot.SlackAPI, ready *ops.Readiness, log *zap.Logger) (bot.Identity, error) {
	id, err := api.IdentifyRetrying(ctx, identifyTimeout, func(err error, wait time.Duration) {
		log.Warn("cannot reach Slack; trying again (is SLACK_API_URL right?)", zap.Error(err), zap.Duration("wait", wait))
	})
	if ctx.Err() != nil {
		return bot.Identity{}, errStopped
	}
	ready.Auth(err)
	if err != nil {
		return bot.Identity{}, explainAuth(err)
	}
	actx, cancel := context.WithTimeout(ctx, appIDTimeout)
	defer cancel()
	id.AppID = api.AppID(actx, id.BotID)
	return id, nil
}

// startAuthRecheck turns /readyz red if Slack revokes the bot token while the bot runs (the app
// uninstalled), with health probes only (HEALTH_ADDR, healthAddr ""). It returns its stop.
func startAuthRecheck(ctx context.Context, healthAddr string, api *bot.SlackAPI, ready *ops.Readiness) (stop func()) {
	if healthAddr == "" {
		return func() {}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ready.RecheckAuth(rctx, authRecheckEvery, func(ctx context.Context) error {
			_, err := api.Identify(ctx)
			return err
		})
	}()
	return func() { cancel(); <-done }
}

// newModel returns the model client, its retries and fallbacks logged and counted.
func newModel(cfg Config, metrics *ops.Metrics, llmLog *zap.Logger) (*llm.Client, error) {
	llmCfg := cfg.llmConfig()
	llmCfg.Hooks = llm.Hooks{
		Retry: func(op string, attempt int, wait time.Duration, e *llm.Error) {
			metrics.Retry(op, attempt, wait, e)
			llmLog.Warn("model request retried", zap.String("op", op), zap.Int("attempt", attempt),
				zap.Duration("wait", wait), zap.String("kind", string(e.Kind)), zap.Int("status", e.Status))
		},
		TemperatureDropped: func(model string) {
			metrics.TemperatureDropped(model)
			llmLog.Warn("model rejected TEMPERATURE; sending requests without it", zap.String("model", model))
		},
		AlternatingTurns: func(model string) {
			llmLog.Info("the model's chat template wants alternating user and assistant turns and no system message; sending them so",
				zap.String("model", model))
		},
		ImagesDropped: func(model string) {
			llmLog.Warn("the model refused pictures (no vision); sending requests without them (VISION=off says so at once)",
				zap.String("model", model))
		},
		StreamUsageDropped: func(model string) {
			llmLog.Warn("model rejected stream_options; streaming without token usage (set LLM_STREAM_USAGE=false to stop asking)",
				zap.String("model", model))
		},
		ToolsDropped: func(model string) {
			llmLog.Warn("the model service refused tools for this model; it answers without them", zap.String("model", model))
		},
	}
	return llm.New(llmCfg)
}

// parts are what the use cases are built from, made once by start; each of its methods builds one
// use case (or the bot) from them.
type parts struct {
	cfg       Config
	id        bot.Identity
	api       *bot.SlackAPI
	model     *llm.Client
	metrics   *ops.Metrics
	shared    sharedState
	budgets   gateway.Budgets
	notices   *gateway.Notices
	overrides *access.Overrides
	prompts   []pane.Prompt
	controls  controls       // usage counted, budgets, redaction: at the model seam and in the route middleware
	threads   *threads.Cache // nil: none
	log       *zap.Logger
	// instructions are the channels' standing instructions, built by steering before the answers
	// that read them.
	instructions *instructions.Instructions
	// approvals are the tool approvals, built by steering (/llmbot tools) before the answers that ask.
	approvals     *approvals.Approvals
	approvalSlack bot.ApprovalSlack
	members       *access.Members // the standing of people, built by guard; placeWorkspace fills it
}

func newParts(cfg Config, id bot.Identity, api *bot.SlackAPI, model *llm.Client, metrics *ops.Metrics,
	shared sharedState, policy pace.Policy, log *zap.Logger) *parts {
	budgets := gateway.NewBudgets(cfg.EditBudgetPerMinute, policy)
	budgets.Share(shared.buckets)
	prompts, _ := cfg.prompts()                             // validated
	overrides, _ := access.LoadOverrides(cfg.ChannelConfig) // validated; nil (no overrides) when unset
	p := &parts{cfg: cfg, id: id, api: api, model: model, metrics: metrics, shared: shared, budgets: budgets,
		// The loop's busy notes and places in line, and the guard's and the ledger's refusals, take
		// their turns in the replies' chat.postEphemeral budget: Slack's limit is the workspace's, kept once.
		notices:   gateway.NewNotices(api, budgets),
		overrides: overrides, prompts: prompts, log: log}
	p.controls = p.newControls()
	return p
}

// answering is what answers messages, and the use cases beside it that share its options: the
// orphans' recovery, /summarize, the tool approvals and the agent pane.
type answering struct {
	replies   *handlers.Replies
	orphans   *orphans.Closer
	summarize *summarize.Summarizer
	approvals *approvals.Approvals
	pane      *pane.Pane
}

// answering builds the answers and the use cases beside them.
func (p *parts) answering(files *bot.Files, toolOpts handlers.ToolOptions) answering {
	cfg, api := p.cfg, p.api
	names := gateway.NewNames(api, p.budgets.Lookups, p.id.UserID)
	agentPane := pane.New(paneOf(cfg, api), p.budgets.Statuses, p.log.Named("pane"))
	approve := p.approvals
	opt := p.replyOptions(files, toolOpts, names, agentPane, approve)
	// One metered chat for the answers and the summaries, under the ledger: a request a budget
	// refuses never reaches the model (nor its metrics), and what reaches it is redacted.
	chat := p.controls.meter.Chat(p.metrics.Chat(p.model, cfg.ChatModel), cfg.ChatModel)
	display := ops.NewDisplay(p.metrics)
	agentPane.OnToolStatus(display.ToolStatus)
	writes := gateway.WriteThrough(nativeTables(cfg, api, display, p.log), p.threads) // the bot's writes in its threads reach the cache
	// A long thread's oldest part is summarised through the same metered chat as the answers.
	// Kept beside the thread's entry in the thread cache's store (Redis: shared by the replicas).
	opt.Summaries = threads.NewSummaries(chat, threads.SummaryOptions{Made: p.metrics.SummaryMade(),
		Reused: ops.SummaryReused(p.metrics), Cache: p.threads})
	replies := handlers.NewReplies(api, writes, writes, api, chat, p.log.Named("replies"), opt)
	return answering{
		replies:   replies,
		orphans:   p.orphanCloser(opt, writes),
		summarize: summarize.New(api, writes, names, chat, replies, p.log.Named("summarize"), summaryOptions(opt)),
		approvals: approve,
		pane:      agentPane,
	}
}

// summaryOptions are the answers' options that /summarize shares.
func summaryOptions(opt handlers.ReplyOptions) summarize.Options {
	return summarize.Options{BotUserID: opt.BotUserID, BotID: opt.BotID, BotName: opt.BotName, Model: opt.Model,
		Budget: opt.Budget, OtherBots: opt.OtherBots, Rand: opt.Rand, Buttons: opt.Buttons,
		ChannelSettings: opt.ChannelSettings, Fence: opt.Fence, Budgets: opt.Budgets, ShutdownTimeout: opt.ShutdownTimeout,
		Kept: keptOf(opt.Summaries)}
}

// keptOf is where /summarize keeps a long period's older part's summary: with the long threads'
// (threads.Summaries), or nowhere.
func keptOf(s handlers.ThreadSummaries) summarize.Kept {
	k, _ := s.(summarize.Kept)
	return k
}

// orphanCloser closes the answers of replicas that died, under the settings the answers are written
// with (opt), writing through writes.
func (p *parts) orphanCloser(opt handlers.ReplyOptions, writes gateway.Messenger) *orphans.Closer {
	return orphans.New(p.api, writes, p.log.Named("orphans"), orphans.Options{Budgets: opt.Budgets, Fence: opt.Fence,
		BotUserID: opt.BotUserID, BotID: opt.BotID, Buttons: opt.Buttons, Quiet: orphanQuiet(p.cfg), HistoryLimit: opt.HistoryLimit})
}

// replyOptions are the answers' options, which the orphans' recovery and /summarize share.
func (p *parts) replyOptions(files *bot.Files, toolOpts handlers.ToolOptions, names *gateway.Names, agentPane *pane.Pane, approve *approvals.Approvals) handlers.ReplyOptions {
	cfg, id, overrides := p.cfg, p.id, p.overrides
	return handlers.ReplyOptions{
		BotUserID: id.UserID,
		BotID:     id.BotID,
		BotName:   id.Name,
		TeamID:    id.TeamID,
		// Built once: the threads the bot is known to take part in are this process's memory.
		FollowUps: followup.New(followup.Options{On: cfg.FollowUps, BotUserID: id.UserID, BotID: id.BotID,
			Marks: p.shared.marks, Log: p.log.Named("followup")}),
		Buttons: cfg.Buttons,
		ContextOptions: handlers.ContextOptions{
			SystemPrompt: cfg.SystemPrompt,
			Budget:       cfg.ContextTokens,
			OtherBots:    true, // an alert or a CI report is often what a thread is about, whatever ANSWER_BOTS says
			ChannelSettings: func(channel string) (string, string) {
				o, _ := overrides.Lookup(channel)
				return o.SystemPrompt, o.Model
			},
			ThreadCache:         p.threads,
			ChannelInstructions: p.instructions.Text,
		},
		WriteOptions: handlers.WriteOptions{
			Mode: handlers.ReplyMode(cfg.ReplyMode),
			ChannelMode: func(channel string) handlers.ReplyMode {
				o, _ := overrides.Lookup(channel)
				return handlers.ReplyMode(o.ReplyMode)
			},
			Feedback:         cfg.Buttons && cfg.Feedback,
			PlaceholderAfter: cfg.PlaceholderAfter,
			StreamRollover:   cfg.StreamRolloverAfter,
			StreamIdle:       cfg.StreamIdleLimit,
			Sessions:         p.api.Assistant,
		},
		Timeouts: handlers.Timeouts{
			// The model client's header and idle timeouts detect a stalled stream (keep-alives count as life);
			// the handler's chunk watchdog only backs them up, so it must never fire before they would.
			StallTimeout: max(5*time.Minute, cfg.LLMHeaderTimeout+cfg.LLMIdleTimeout),
			// At shutdown the "interrupted" notes must land within SHUTDOWN_GRACE.
			ShutdownTimeout: bot.CloseReserve(cfg.ShutdownGrace),
		},
		ReplicaOptions: handlers.ReplicaOptions{
			Journal: p.shared.journal,
			Fence:   p.shared.fence,
		},
		Budgets:   p.budgets,
		Approvals: approve,
		Names:     names,
		Pane:      agentPane,
		Files: attach.NewReader(attach.Options{
			Files: files, Vision: attach.Vision(cfg.Vision),
			ChannelVision: func(channel string) attach.Vision {
				o, _ := overrides.Lookup(channel)
				return attach.Vision(o.Vision)
			},
			MaxImageSide: cfg.ImageInputMaxSide, MaxText: cfg.MaxFileText, MaxBytes: cfg.MaxFileBytes,
			// One Preparer for the process: at most picturesDecoded pictures are decoded at once, whatever
			// the number of answers reading them, so their memory is bounded together.
			Pictures: media.NewPreparer(picturesDecoded),
		}),
		Written: p.metrics.ReplyWritten,
		Tools:   toolOpts,
	}
}

// imagine makes pictures for /imagine and its "Another one" button.
func (p *parts) imagine() *imagine.Imagine {
	return imagine.New(p.controls.meter.Imager(p.metrics.Imager(p.model), p.cfg.ImageModel), p.api, p.api, p.log.Named("imagine"), imagine.Options{
		BotName:    p.id.Name,
		MaxPerUser: p.cfg.ImaginePerUser,
		Timeout:    p.cfg.ImageTimeout + imageUploadTime,
		Buttons:    p.cfg.Buttons,
		// At shutdown the private "interrupted" note must be sent within SHUTDOWN_GRACE.
		ShutdownTimeout: bot.CloseReserve(p.cfg.ShutdownGrace),
	})
}

// feedback takes the 👍/👎 on answers and their comments.
func (p *parts) feedback() *feedback.Feedback {
	return feedback.New(p.api, p.api, p.api, p.log.Named("feedback"), feedback.Options{
		Channel: p.cfg.FeedbackChannel,
		Model: func(channel string) string {
			o, _ := p.overrides.Lookup(channel)
			return cmp.Or(o.Model, p.cfg.ChatModel)
		},
		Rated: p.metrics.Feedback,
	})
}

// guard is the access rules' middleware: who may ask what where, the /imagine quota, and the
// standing of people (EXTERNAL_USERS, GUEST_USERS). knownFollowUp says whether a refused follow-up
// would have been answered: refused follow-ups count only then.
func (p *parts) guard(knownFollowUp func(route.ReplyRequest) bool) *access.Guard {
	accessPolicy, _ := p.cfg.accessRules() // validated
	quota := access.NewQuota(p.cfg.ImagineDailyQuota, 0)
	quota.Share(p.shared.counter) // every replica counts a person's pictures in one place
	// Validated with the settings. Who is of the workspace's organisation is told from auth.test's
	// team and Enterprise Grid org.
	members, _ := access.NewMembers(access.MembersOptions{
		Team: p.id.TeamID, Enterprise: p.id.EnterpriseID, Workspace: p.id.TeamName,
		External: p.cfg.ExternalUsers, Guests: p.cfg.GuestUsers, Directory: p.api,
		Budget: p.budgets.Lookups, // with the names' look-ups, shared by the replicas
	})
	p.members = members
	return access.NewGuard(access.GuardOptions{
		Policy:        accessPolicy,
		Quota:         quota,
		Denied:        p.metrics.AccessDenied,
		KnownFollowUp: knownFollowUp,
		Members:       members,
		Notifier:      p.notices,
		Log:           p.log.Named("access"),
	})
}

// bot is the Socket Mode loop over routes; queue shows a waiting question's place under its thread.
func (p *parts) bot(sc *slack.Client, routes *route.Table, ready *ops.Readiness, queue bot.QueueStatus) *bot.Bot {
	m, cfg := p.metrics, p.cfg
	return bot.New(sc, p.id, routes, p.notices, p.log.Named("bot"), bot.Options{
		Hooks: bot.Hooks{
			Acked: m.Acked, Duplicate: m.Duplicate, Busy: m.Busy, Done: m.Done,
			Connection: func(up bool) { m.Connection(up); ready.Connection(up) },
		},
		MaxConcurrent: cfg.MaxConcurrentReplies,
		MaxQueued:     cfg.MaxQueuedReplies,
		Grace:         cfg.ShutdownGrace,
		FollowUps:     cfg.FollowUps,
		AgentView:     cfg.AgentView,
		AnswerBots:    cfg.AnswerBots,
		Replicas:      p.shared.replicas,
		InboxKey:      bot.InboxKey(cfg.SlackBotToken), // every replica of the bot has the token; Redis does not
		Queue:         queue,
		Threads:       p.threads,
	})
}

// logStarting says, once, what the bot runs with (no secrets: the model service's host only).
func logStarting(log *zap.Logger, cfg Config, id bot.Identity, policy pace.Policy) {
	log.Info("starting",
		zap.String("version", versionString()),
		zap.String("bot_name", id.Name),
		zap.String("chat_model", cfg.ChatModel),
		zap.String("image_model", cfg.ImageModel),
		zap.String("model_host", hostOf(cfg.OpenAIBaseURL)),
		zap.String("reply_mode", cfg.ReplyMode),
		zap.Bool("buttons", cfg.Buttons),
		zap.String("edit_policy", string(policy)),
		zap.Float64("edit_budget_per_minute", cfg.EditBudgetPerMinute),
		zap.Int("max_concurrent_replies", cfg.MaxConcurrentReplies),
		zap.Int("max_queued_replies", cfg.MaxQueuedReplies))
}

// nativeTables is api showing the tables of answers' final writes as Slack's table blocks
// (NATIVE_TABLES), else api.
func nativeTables(cfg Config, api gateway.Writes, m *ops.Display, log *zap.Logger) gateway.Writes {
	if !cfg.NativeTables {
		return api
	}
	return tables.NewWrites(api, tables.Options{Observe: m.Table, Log: log.Named("tables")})
}

// paneOf is the agent pane's Slack calls when the app is declared as an agent (AGENT_VIEW), else nil.
func paneOf(cfg Config, api *bot.SlackAPI) pane.Assistant {
	if !cfg.AgentView {
		return nil
	}
	return api.Assistant
}

// llmConfig is the model client's configuration from the settings, without hooks. The bot and doctor
// both build their client from it, so doctor checks what the bot runs.
func (cfg Config) llmConfig() llm.Config {
	headers, _ := parseHeaders(cfg.LLMHeaders) // validated
	imageOptions := map[string]any{}
	if cfg.ImageSize != "" {
		imageOptions["size"] = cfg.ImageSize
	}
	if cfg.ImageQuality != "" {
		imageOptions["quality"] = cfg.ImageQuality
	}
	retries := cfg.LLMMaxRetries
	if retries == 0 {
		retries = -1 // llm: 0 means its default, negative means none
	}
	return llm.Config{
		BaseURL:        cfg.OpenAIBaseURL,
		APIKey:         cfg.OpenAIAPIKey,
		Headers:        headers,
		ChatModel:      cfg.ChatModel,
		ImageModel:     cfg.ImageModel,
		Temperature:    cfg.Temperature,
		ImageOptions:   imageOptions,
		ConnectTimeout: cfg.LLMConnectTimeout,
		HeaderTimeout:  cfg.LLMHeaderTimeout,
		IdleTimeout:    cfg.LLMIdleTimeout,
		StreamCoalesce: cfg.LLMStreamCoalesce,
		ImageTimeout:   cfg.ImageTimeout,
		MaxRetries:     retries,
		NoStreamUsage:  !cfg.LLMStreamUsage,
	}
}

// slackHTTPClient is the Web API client: bounded calls, no reliance on http.DefaultClient.
func slackHTTPClient() *http.Client {
	return &http.Client{
		Timeout: slackCallTimeout,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: slackDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   slackDialTimeout,
			ResponseHeaderTimeout: slackHeaderWait,
			MaxIdleConnsPerHost:   slackIdleConnsMax,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
	}
}

// explainAuth turns an auth.test failure into a message that says what to fix.
func explainAuth(err error) error {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired":
			return fmt.Errorf("Slack rejected SLACK_BOT_TOKEN (%s): copy the Bot User OAuth Token (xoxb-...) again from OAuth & Permissions in your app's settings, and reinstall the app if it was removed: %w", se.Err, err)
		}
	}
	return fmt.Errorf("cannot reach Slack (is SLACK_API_URL right?): %w", err)
}

// hostOf returns the host of a URL (never its user info or query, which may hold secrets).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// picturesDecoded is how many pictures the process decodes at once: each may take up to
// media.MaxDecodeBytes while decoded, and answers wait a moment for a slot rather than add up.
const picturesDecoded = 2
