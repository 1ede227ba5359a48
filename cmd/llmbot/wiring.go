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
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/media"
	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
	"github.com/llmbot/llmbot/tools"
)

// Time limits of the Slack client and the start-up (Slack's rate limits are handlers.Budgets).
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

// start wires the parts together and runs the bot until ctx ends.
func start(ctx context.Context, cfg Config, mcp tools.Config, policy pace.Policy, log *zap.Logger) error {
	if u, err := url.Parse(cfg.OpenAIBaseURL); err == nil && strings.Trim(u.Path, "/") == "" {
		// The commonest set-up mistake (http://localhost:11434): every answer would fail with a 404.
		log.Warn("OPENAI_BASE_URL has no path: OpenAI-compatible services serve their API under one, usually /v1 " +
			"(http://localhost:11434/v1 for Ollama); without it every request gets 404")
	}
	metrics, ready := ops.NewMetrics(), ops.NewReadiness()
	if cfg.HealthAddr != "" {
		health := ops.NewServer(cfg.HealthAddr, ready.Ready, metrics.Registry(), log.Named("health"))
		// Listening first: a port that cannot be had stops the bot with a clear message, instead of
		// a bot whose probes fail for no reason it says.
		ln, err := health.Listen(ctx)
		if err != nil {
			return fmt.Errorf("HEALTH_ADDR: %w", err)
		}
		// Probes answer from the start (auth.test, connecting) until the bot has drained.
		hctx, stopHealth := context.WithCancel(context.WithoutCancel(ctx))
		healthDone := make(chan struct{})
		go func() {
			defer close(healthDone)
			if err := health.Serve(hctx, ln); err != nil {
				log.Error("health listener failed", zap.Error(err)) // probes will fail and say so
			}
		}()
		defer func() { stopHealth(); <-healthDone }()
	}
	httpClient := slackHTTPClient()
	// Metrics count what reaches Slack; FirstCalls answers some calls without sending them.
	httpClient.Transport = bot.NewFirstCalls(metrics.SlackTransport(httpClient.Transport))
	slackClient := slack.New(cfg.SlackBotToken,
		slack.OptionAPIURL(strings.TrimRight(cfg.SlackAPIURL, "/")+"/"), // slack-go appends the method name
		slack.OptionAppLevelToken(cfg.SlackAppToken),
		slack.OptionHTTPClient(httpClient),
		slack.OptionLog(zap.NewStdLog(log.Named("slack-go"))),
		// No OptionRetry: writes are paced by package pace, which must see every 429;
		// bot.SlackAPI retries reads itself. No OptionDebug: it shortens Socket Mode connections.
	)
	api := bot.NewSlackAPI(slackClient, httpClient, bot.ThreadBytes(cfg.ContextTokens))
	files, err := bot.NewFiles(slackClient, bot.FilesOptions{Token: cfg.SlackBotToken, APIURL: cfg.SlackAPIURL,
		MaxBytes: cfg.MaxFileBytes, Transport: slackHTTPClient().Transport})
	if err != nil {
		return err
	}
	// One Preparer for the process: at most picturesDecoded pictures are decoded at once, whatever
	// the number of answers reading them, so their memory is bounded together.
	pictures := media.NewPreparer(picturesDecoded)

	id, err := api.IdentifyRetrying(ctx, identifyTimeout, func(err error, wait time.Duration) {
		log.Warn("cannot reach Slack; trying again (is SLACK_API_URL right?)", zap.Error(err), zap.Duration("wait", wait))
	})
	if ctx.Err() != nil {
		return nil // stopped while starting (SIGTERM): a clean stop
	}
	ready.Auth(err)
	if err != nil {
		return explainAuth(err)
	}
	actx, cancel := context.WithTimeout(ctx, appIDTimeout)
	id.AppID = api.AppID(actx, id.BotID) // Socket Mode must connect to this app (unknown: not checked)
	cancel()
	log = log.With(zap.String("bot_user", id.UserID), zap.String("team", id.TeamID))
	if cfg.HealthAddr != "" {
		// /readyz turns red if Slack revokes the bot token while the bot runs (app uninstalled).
		actx, stopRecheck := context.WithCancel(ctx)
		recheckDone := make(chan struct{})
		go func() {
			defer close(recheckDone)
			ready.RecheckAuth(actx, authRecheckEvery, func(ctx context.Context) error {
				_, err := api.Identify(ctx)
				return err
			})
		}()
		defer func() { stopRecheck(); <-recheckDone }()
	}

	llmLog := log.Named("llm")
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
	model, err := llm.New(llmCfg)
	if err != nil {
		return fmt.Errorf("model client: %w", err)
	}

	shared, err := openState(ctx, cfg, id, metrics, ready, log.Named("state"))
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	defer shared.Close()
	// The shared state lives until the bot has drained: the last answers close their journal records.
	sctx, stopShared := context.WithCancel(context.WithoutCancel(ctx))
	var sharedWG sync.WaitGroup
	defer func() { stopShared(); sharedWG.Wait() }()
	// Without its heartbeat this replica would look dead to the others, which would take over its
	// answers while it writes them: the bot stops instead (and is restarted).
	runCtx, stopRun := context.WithCancelCause(ctx)
	defer stopRun(nil)
	sharedWG.Go(func() {
		if err := shared.Run(sctx); err != nil {
			stopRun(fmt.Errorf("shared state: %w", err))
		}
	})
	budgets := handlers.NewBudgets(cfg.EditBudgetPerMinute, policy)
	budgets.Share(shared)
	// The loop's busy notes and places in line, and the guard's refusals, take their turns in the
	// replies' chat.postEphemeral budget: Slack's limit is the workspace's, kept once.
	notices := handlers.NewNotices(api, budgets)

	accessPolicy, _ := cfg.accessRules()                    // validated
	prompts, _ := cfg.prompts()                             // validated
	overrides, _ := access.LoadOverrides(cfg.ChannelConfig) // validated; nil (no overrides) when unset
	toolOpts := startTools(sctx, &sharedWG, cfg, mcp, overrides, metrics, log.Named("tools"))
	names := handlers.NewNames(api, budgets.Lookups, id.UserID)
	pane := handlers.NewAgentPane(paneOf(cfg, api), budgets.Statuses, log.Named("pane"))
	// Redis never sees the token the grants' key is derived from.
	approvals := handlers.NewApprovals(shared, state.DeriveKey(cfg.SlackBotToken, "llmbot thread grants v1"), log.Named("approvals"))
	replyOpts := handlers.ReplyOptions{
		SystemPrompt:     cfg.SystemPrompt,
		BotUserID:        id.UserID,
		BotID:            id.BotID,
		BotName:          id.Name,
		TeamID:           id.TeamID,
		Budget:           cfg.ContextTokens,
		Mode:             handlers.ReplyMode(cfg.ReplyMode),
		FollowUps:        cfg.FollowUps,
		OtherBots:        true, // an alert or a CI report is often what a thread is about, whatever ANSWER_BOTS says
		Buttons:          cfg.Buttons,
		Feedback:         cfg.Buttons && cfg.Feedback,
		PlaceholderAfter: cfg.PlaceholderAfter,
		Budgets:          budgets,
		Journal:          shared,
		Fence:            shared,
		OrphanQuiet:      orphanQuiet(cfg),
		Threads:          shared,
		Approvals:        approvals,
		Names:            names,
		Sessions:         api,
		Pane:             pane,
		// The model client's header and idle timeouts detect a stalled stream (keep-alives count as life);
		// the handler's chunk watchdog only backs them up, so it must never fire before they would.
		StreamRollover: cfg.StreamRolloverAfter,
		StreamIdle:     cfg.StreamIdleLimit,
		StallTimeout:   max(5*time.Minute, cfg.LLMHeaderTimeout+cfg.LLMIdleTimeout),
		// At shutdown the "interrupted" notes must land within SHUTDOWN_GRACE.
		ShutdownTimeout: bot.CloseReserve(cfg.ShutdownGrace),
		ChannelSettings: func(channel string) (string, string) {
			o, _ := overrides.Lookup(channel)
			return o.SystemPrompt, o.Model
		},
		Files: handlers.FileOptions{
			Files: files, Vision: handlers.Vision(cfg.Vision),
			ChannelVision: func(channel string) handlers.Vision {
				o, _ := overrides.Lookup(channel)
				return handlers.Vision(o.Vision)
			},
			MaxImageSide: cfg.ImageInputMaxSide, MaxText: cfg.MaxFileText, MaxBytes: cfg.MaxFileBytes,
			Pictures: pictures,
		},
		ChannelMode: func(channel string) handlers.ReplyMode {
			o, _ := overrides.Lookup(channel)
			return handlers.ReplyMode(o.ReplyMode)
		},
		Written: metrics.ReplyWritten,
		Tools:   toolOpts,
	}
	chat := metrics.Chat(model, cfg.ChatModel)
	replies := handlers.NewReplies(api, api, api, api, chat, log.Named("replies"), replyOpts)
	orphans := handlers.NewOrphanCloser(api, api, log.Named("orphans"), replyOpts)
	summarize := handlers.NewSummarize(api, api, names, chat, replies, log.Named("summarize"), replyOpts)
	imagine := handlers.NewImagine(metrics.Imager(model), api, api, log.Named("imagine"), handlers.ImagineOptions{
		BotName:    id.Name,
		MaxPerUser: cfg.ImaginePerUser,
		Timeout:    cfg.ImageTimeout + imageUploadTime,
		Buttons:    cfg.Buttons,
		// At shutdown the private "interrupted" note must be sent within SHUTDOWN_GRACE.
		ShutdownTimeout: bot.CloseReserve(cfg.ShutdownGrace),
	})

	feedback := handlers.NewFeedback(api, api, api, log.Named("feedback"), handlers.FeedbackOptions{
		Channel: cfg.FeedbackChannel,
		Model: func(channel string) string {
			o, _ := overrides.Lookup(channel)
			return cmp.Or(o.Model, cfg.ChatModel)
		},
		Rated: metrics.Feedback,
	})

	quota := access.NewQuota(cfg.ImagineDailyQuota, 0)
	quota.Share(shared) // every replica counts a person's pictures in one place

	// Validated with the settings. Who is of the workspace's organisation is told from auth.test's
	// team and Enterprise Grid org.
	members, _ := access.NewMembers(access.MembersOptions{
		Team: id.TeamID, Enterprise: id.EnterpriseID, Workspace: id.TeamName,
		External: cfg.ExternalUsers, Guests: cfg.GuestUsers, Directory: api,
		Budget: budgets.Lookups, // with the names' look-ups, shared by the replicas
	})
	guard := access.NewGuard(access.GuardOptions{
		Policy: accessPolicy,
		Quota:  quota,
		Denied: metrics.AccessDenied,
		// Refused follow-ups count only where the bot would have answered.
		KnownFollowUp: replies.KnownFollowUp,
		Members:       members, // Slack Connect outsiders and guests, by EXTERNAL_USERS and GUEST_USERS
		Notifier:      notices,
		Log:           log.Named("access"),
	})
	// Every command, button, shortcut and event is one row here; access rules and metrics wrap them all.
	routes := route.NewTable(guard.Middleware, metrics.Middleware)
	b := bot.New(slackClient, id, routes, notices, log.Named("bot"), bot.Options{
		Hooks: bot.Hooks{
			Acked: metrics.Acked, Duplicate: metrics.Duplicate, Busy: metrics.Busy, Done: metrics.Done,
			Connection: func(up bool) { metrics.Connection(up); ready.Connection(up) },
		},
		MaxConcurrent: cfg.MaxConcurrentReplies,
		MaxQueued:     cfg.MaxQueuedReplies,
		Grace:         cfg.ShutdownGrace,
		FollowUps:     cfg.FollowUps,
		AgentView:     cfg.AgentView,
		AnswerBots:    cfg.AnswerBots,
		Replicas:      shared,
		InboxKey:      bot.InboxKey(cfg.SlackBotToken), // every replica of the bot has the token; Redis does not
		Queue:         pane,                            // a waiting question's place under its thread, with the thinking status
	})
	// Answers left open by a replica that died (or by this one before a restart) are closed.
	sharedWG.Go(func() { orphans.WatchOrphans(sctx, shared) })
	err = routes.Add(
		route.Route{Kind: route.Message, Name: route.MessageRoute, Handler: replies.Handler()},
		route.Route{Kind: route.Action, Name: handlers.ActionRegenerate, Feature: "regenerate", Handler: replies.RegenerateHandler()},
		route.Route{Kind: route.Action, Name: handlers.ActionStop, Feature: "stop", Handler: b.StopHandler()},
		route.Route{Kind: route.Action, Name: handlers.ActionToolAllowOnce, Feature: "tool_approval", Handler: b.ApprovalHandler(approvals)},
		route.Route{Kind: route.Action, Name: handlers.ActionToolAllowThread, Feature: "tool_approval", Handler: b.ApprovalHandler(approvals)},
		route.Route{Kind: route.Action, Name: handlers.ActionToolDeny, Feature: "tool_approval", Handler: b.ApprovalHandler(approvals)},
		route.Route{Kind: route.Event, Name: handlers.EventSessionStopped, Feature: "stop", Handler: b.SessionStopHandler(api)},
		route.Route{Kind: route.Event, Name: handlers.EventAppHomeOpened, Feature: "agent_pane", Handler: pane.PaneHandler(prompts)},
		route.Route{Kind: route.Action, Name: handlers.ActionFeedback, Feature: "feedback", Handler: feedback.Handler()},
		route.Route{Kind: route.View, Name: handlers.ViewFeedback, Feature: "feedback", Handler: feedback.CommentHandler()},
		route.Route{Kind: route.Command, Name: "/imagine", Feature: access.FeatureImagine, Handler: imagine.Handler()},
		route.Route{Kind: route.Action, Name: handlers.ActionImagineAgain, Feature: access.FeatureImagine, Handler: imagine.Handler()},
		route.Route{Kind: route.Command, Name: handlers.CommandSummarize, Feature: handlers.FeatureSummarize, Handler: summarize.SummarizeHandler(api)},
		route.Route{Kind: route.Action, Name: handlers.ActionPostSummary, Feature: handlers.FeatureSummarize, Handler: summarize.PostSummaryHandler(api)},
		route.Route{Kind: route.Shortcut, Name: handlers.ShortcutSummarizeThread, Feature: handlers.FeatureSummarize, Handler: summarize.SummarizeThreadHandler(api)},
	)
	if err != nil {
		return fmt.Errorf("routes: %w", err)
	}
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
	if err := b.Run(runCtx); err != nil {
		return err // main prints it
	}
	if err := context.Cause(runCtx); ctx.Err() == nil && err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// paneOf is the agent pane's Slack calls when the app is declared as an agent (AGENT_VIEW), else nil.
func paneOf(cfg Config, api *bot.SlackAPI) handlers.Pane {
	if !cfg.AgentView {
		return nil
	}
	return api
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
