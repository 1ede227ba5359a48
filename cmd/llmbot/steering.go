package main

import (
	"context"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/command"
	"github.com/llmbot/llmbot/doctor"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/instructions"
	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/schedule"
	"github.com/llmbot/llmbot/state"
)

// recordsKeyPurpose names the key the channels' instructions and schedules are sealed with in the
// shared state (state.Seal), derived from the bot token, which Redis never sees.
const recordsKeyPurpose = "llmbot records v1"

// steering is what /llmbot serves: the channels' standing instructions and their scheduled prompts.
type steering struct {
	instructions *instructions.Instructions
	schedules    *schedule.Schedules
	command      *command.Command
	// What a scheduled summary posts and tells with (the route schedule.EventSummary).
	schedulePosts schedule.Poster
	scheduleTell  schedule.Teller
	scheduleLog   *zap.Logger
}

// steering builds /llmbot and its use cases over the shared state's records.
func (p *parts) steering() (steering, error) {
	cfg := p.cfg
	key := state.DeriveKey(cfg.SlackBotToken, recordsKeyPurpose)
	editors := access.ParseIDs(cfg.ChannelEditors) // validated
	posts := pacedPosts{w: gateway.Writer{Budgets: p.budgets, Msgs: p.api}}
	in := instructions.New(p.shared.records, key, posts, instructions.Options{MaxLength: cfg.ChannelInstructionsMax, Editors: editors})
	sc := schedule.NewSchedules(p.shared.records, key, scheduleLimits(cfg))
	// Redis never sees the token the grants' keys are derived from.
	p.approvals = approvals.NewWith(p.shared.marks, state.DeriveKey(cfg.SlackBotToken, "llmbot thread grants v1"), p.log.Named("approvals"),
		approvals.Options{Records: p.shared.records, Key: state.DeriveKey(cfg.SlackBotToken, "llmbot tool approvals v1"),
			Groups: p.approvalSlack, Private: p.approvalSlack,
			Answers: p.shared.replicas.Journal, Leases: p.shared.replicas.Leases, Claims: p.shared.claims, Lines: &gateway.Writer{Budgets: p.budgets, Msgs: gateway.WriteThrough(p.api, p.threads)}, Decided: ops.NewApprovalMetrics(p.metrics).Decided})
	cmd, err := command.New(p.api, p.log.Named("llmbot"), in.Command(), sc.Command(editors), p.approvals.Command())
	if err != nil {
		return steering{}, err
	}
	p.instructions = in
	return steering{instructions: in, schedules: sc, command: cmd,
		schedulePosts: posts, scheduleTell: noticeTeller{p.notices}, scheduleLog: p.log.Named("schedule")}, nil
}

func scheduleLimits(cfg Config) schedule.Limits {
	return schedule.Limits{PerChannel: cfg.SchedulesPerChannel, PerPerson: cfg.SchedulesPerPerson}
}

// startSchedules runs the scheduled prompts' occurrences, each asked through b as its creator,
// until ctx ends or stop is called; the returned stop ends the runner and waits for it. (It must
// not wait for ctx alone: when the bot stops by itself, a Socket Mode connection of another app,
// ctx is still running, and start would hang in its defers instead of returning the error.)
func (p *parts) startSchedules(ctx context.Context, s steering, b *bot.Bot) (stop func()) {
	posts := pacedPosts{w: gateway.Writer{Budgets: p.budgets, Msgs: p.api}}
	runner := schedule.NewRunner(s.schedules, p.shared.claims, schedule.NewAsker(posts, b), noticeTeller{p.notices},
		p.log.Named("schedule"), schedule.RunnerOptions{CatchUp: p.cfg.ScheduleCatchUp, Ran: p.metrics.ScheduledRun})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runner.Run(ctx) // returns nil when ctx ends
	}()
	return func() { cancel(); <-done }
}

// pacedPosts posts through the paced writer: a turn in the channel's post budget, 429s waited out.
type pacedPosts struct{ w gateway.Writer }

func (p pacedPosts) Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (string, error) {
	return p.w.Post(ctx, gateway.InterimRetry, nil, p.w.PostTurn(channel), channel, threadTS, m)
}

// noticeTeller tells a person privately through the process's notices.
type noticeTeller struct{ n *gateway.Notices }

func (t noticeTeller) Tell(ctx context.Context, channel, user, text string) error {
	return t.n.Ephemeral(ctx, channel, user, "", text)
}

// doctorSchedules reads the scheduled prompts as the bot would (its app and team's shared state:
// Redis, or STATE_DIR), for doctor's list; each with its next run.
func doctorSchedules(cfg Config) func(ctx context.Context) ([]doctor.Scheduled, error) {
	return func(ctx context.Context) ([]doctor.Scheduled, error) {
		httpClient := slackHTTPClient()
		api := bot.NewSlackAPI(slack.New(cfg.SlackBotToken, slack.OptionAPIURL(strings.TrimRight(cfg.SlackAPIURL, "/")+"/"),
			slack.OptionHTTPClient(httpClient)), httpClient, 0)
		id, err := api.Identify(ctx)
		if err != nil {
			return nil, err
		}
		id.AppID = api.AppID(ctx, id.BotID)
		rec, closeRec, err := doctorRecords(ctx, cfg, id)
		if err != nil {
			return nil, err
		}
		defer closeRec()
		all, err := schedule.NewSchedules(rec, state.DeriveKey(cfg.SlackBotToken, recordsKeyPurpose), scheduleLimits(cfg)).All(ctx)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		out := make([]doctor.Scheduled, 0, len(all))
		for _, s := range all {
			out = append(out, doctor.Scheduled{ID: s.ID, Channel: s.Channel, Creator: s.Creator, When: s.When, Next: s.Next(now)})
		}
		return out, nil
	}
}

// doctorRecords opens the records of the bot's shared state for reading, and how to close them.
func doctorRecords(ctx context.Context, cfg Config, id bot.Identity) (schedule.Records, func(), error) {
	owner := stateOwner(id)
	if cfg.RedisURL != "" {
		r, err := state.NewRedis(ctx, cfg.RedisURL, "llmbot:"+owner+":"+id.TeamID+":", "doctor", zap.NewNop())
		if err != nil {
			return nil, nil, err
		}
		return r.Records(), func() { _ = r.Close() }, nil
	}
	m, err := state.NewMemory("doctor", stateDir(cfg.StateDir, owner+"-"+id.TeamID), zap.NewNop())
	if err != nil {
		return nil, nil, err
	}
	return m.Records(), func() { _ = m.Close() }, nil
}
