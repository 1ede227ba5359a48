package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/pace"
)

// Slack write budgets besides chat.update (which is EDIT_BUDGET_PER_MINUTE).
const (
	editBurst         = 5
	appendsPerMinute  = 100 // chat.appendStream: Tier 4
	appendBurst       = 10
	postsPerMinute    = 60 // chat.postMessage: about 1 a second per channel
	postBurst         = 3
	slackCallTimeout  = 60 * time.Second // one Web API call, file upload included
	identifyTimeout   = 20 * time.Second
	slackDialTimeout  = 10 * time.Second
	slackHeaderWait   = 30 * time.Second
	slackIdleConnsMax = 20
	imageUploadTime   = time.Minute // added to IMAGE_TIMEOUT for the whole /imagine job
)

// start wires the parts together and runs the bot until ctx ends.
func start(ctx context.Context, cfg Config, log *zap.Logger) error {
	slackClient := slack.New(cfg.SlackBotToken,
		slack.OptionAPIURL(strings.TrimRight(cfg.SlackAPIURL, "/")+"/"), // slack-go appends the method name
		slack.OptionAppLevelToken(cfg.SlackAppToken),
		slack.OptionHTTPClient(slackHTTPClient()),
		slack.OptionLog(zap.NewStdLog(log.Named("slack-go"))),
		// No OptionRetry: writes are paced by package pace, which must see every 429;
		// bot.SlackAPI retries reads itself. No OptionDebug: it shortens Socket Mode connections.
	)
	api := bot.NewSlackAPI(slackClient)

	idCtx, cancel := context.WithTimeout(ctx, identifyTimeout)
	id, err := api.Identify(idCtx)
	cancel()
	if err != nil {
		return explainAuth(err)
	}
	log = log.With(zap.String("bot_user", id.UserID), zap.String("team", id.TeamID))

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
	llmLog := log.Named("llm")
	model, err := llm.New(llm.Config{
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
		ImageTimeout:   cfg.ImageTimeout,
		MaxRetries:     retries,
		Hooks: llm.Hooks{
			Retry: func(op string, attempt int, wait time.Duration, e *llm.Error) {
				llmLog.Warn("model request retried", zap.String("op", op), zap.Int("attempt", attempt),
					zap.Duration("wait", wait), zap.String("kind", string(e.Kind)), zap.Int("status", e.Status))
			},
			TemperatureDropped: func(model string) {
				llmLog.Warn("model rejected TEMPERATURE; sending requests without it", zap.String("model", model))
			},
		},
	})
	if err != nil {
		return fmt.Errorf("model client: %w", err)
	}

	policy, _ := pace.ParsePolicy(cfg.EditPolicy) // validated
	replies := handlers.NewReplies(api, api, api, api, model, log.Named("replies"), handlers.ReplyOptions{
		SystemPrompt: cfg.SystemPrompt,
		BotUserID:    id.UserID,
		BotID:        id.BotID,
		BotName:      id.Name,
		TeamID:       id.TeamID,
		Budget:       cfg.ContextTokens,
		Mode:         handlers.ReplyMode(cfg.ReplyMode),
		FollowUps:    cfg.FollowUps,
		OtherBots:    cfg.AnswerBots,
		Edits:        pace.NewScheduler(cfg.EditBudgetPerMinute, editBurst, pace.WithPolicy(policy)),
		Appends:      pace.NewScheduler(appendsPerMinute, appendBurst, pace.WithPolicy(policy)),
		Posts:        pace.NewKeyed(postsPerMinute, postBurst),
		StallTimeout: cfg.LLMIdleTimeout,
	})
	imagine := handlers.NewImagine(model, api, api, log.Named("imagine"), handlers.ImagineOptions{
		BotName:    id.Name,
		MaxPerUser: cfg.ImaginePerUser,
		Timeout:    cfg.ImageTimeout + imageUploadTime,
	})

	sm := socketmode.New(slackClient, socketmode.OptionLog(zap.NewStdLog(log.Named("socketmode"))))
	b := bot.New(sm, id, replies, imagine, api, log.Named("bot"), bot.Options{
		MaxConcurrent: cfg.MaxConcurrentReplies,
		Grace:         cfg.ShutdownGrace,
		FollowUps:     cfg.FollowUps,
		AnswerBots:    cfg.AnswerBots,
	})
	log.Info("starting",
		zap.String("bot_name", id.Name),
		zap.String("chat_model", cfg.ChatModel),
		zap.String("image_model", cfg.ImageModel),
		zap.String("model_host", hostOf(cfg.OpenAIBaseURL)),
		zap.String("reply_mode", cfg.ReplyMode),
		zap.String("edit_policy", cfg.EditPolicy),
		zap.Float64("edit_budget_per_minute", cfg.EditBudgetPerMinute),
		zap.Int("max_concurrent_replies", cfg.MaxConcurrentReplies))
	if err := b.Run(ctx); err != nil {
		return err // main prints it
	}
	log.Info("stopped")
	return nil
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
