package access_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/followup"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/imagine"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/summarize"
)

const wiredWait = 15 * time.Second // bound of every wait below

// wiredGrace is the bot's shutdown grace period (bot.Options.Grace) in the tests that leave an
// answer holding a slot when they end: the bot is stopped once the assertions are done, and the
// default 8 s would only make the test wait 6 s for an answer that is never coming.
const wiredGrace = time.Second

// wired is the fake Slack and model service with the real Slack adapter and model client that the
// wired tests build their bot from.
type wired struct {
	fs    *fakeslack.Server
	fl    *fakellm.Server
	sc    *slack.Client
	api   *bot.SlackAPI
	id    bot.Identity
	model *llm.Client
	ctx   context.Context // ends with the test, at most 2*wiredWait on
}

func newWired(t *testing.T) *wired { return newWiredSlack(t, fakeslack.Config{}) }

// newWiredSlack is newWired with a fake Slack of cfg (a workspace of an Enterprise Grid org).
func newWiredSlack(t *testing.T, cfg fakeslack.Config) *wired {
	t.Helper()
	w := &wired{fs: fakeslack.New(cfg), fl: fakellm.New()}
	t.Cleanup(w.fs.Close)
	t.Cleanup(w.fl.Close)
	w.fl.SetAPIKey("sk-wired-test")
	w.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Sure thing.") })
	ctx, cancel := context.WithTimeout(t.Context(), 2*wiredWait)
	t.Cleanup(cancel)
	w.ctx = ctx
	w.sc = slack.New("xoxb-test", slack.OptionAPIURL(w.fs.URL()), slack.OptionAppLevelToken("xapp-test"),
		slack.OptionHTTPClient(&http.Client{Timeout: wiredWait}))
	w.api = bot.NewSlackAPI(w.sc, nil, 0)
	var err error
	if w.id, err = w.api.Identify(ctx); err != nil {
		t.Fatal(err)
	}
	if w.model, err = llm.New(llm.Config{BaseURL: w.fl.URL(), APIKey: "sk-wired-test", ChatModel: "gpt-test", ImageModel: "image-test"}); err != nil {
		t.Fatal(err)
	}
	return w
}

// run runs b until the test ends, then stops it and waits for it.
func (w *wired) run(t *testing.T, b *bot.Bot) {
	t.Helper()
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wiredWait):
			t.Error("the bot did not stop")
		}
	})
}

// wiredConfig is what the wired tests vary in the bot wiredBot builds.
type wiredConfig struct {
	Quota int // /imagine pictures a day per person (access.NewQuota); 0: unlimited
	// Bot: MaxConcurrent, MaxQueued, Grace, FollowUps (also the answers': as cmd/llmbot sets
	// both from FOLLOW_UPS). Hooks are wiredBot's.
	Bot bot.Options
	// External and Guests are EXTERNAL_USERS and GUEST_USERS ("": their defaults).
	External, Guests string
	Buttons          bool // Stop and Regenerate on answers (BUTTONS)
}

// wiredBot builds the bot as cmd/llmbot wires it (handlers, Guard with policy, a quota and the
// standing of people (Members, looking them up in the fake Slack), one route table for every
// route, the Guard's refusals counted), runs it until the test ends and
// returns what it reports. The table's only addition is botEvents.observe in front, which records
// each request's Decision and changes nothing; ops' metrics middleware is left out.
func wiredBot(t *testing.T, w *wired, policy *access.Policy, cfg wiredConfig) *botEvents {
	t.Helper()
	api, id, model := w.api, w.id, w.model
	log := zaptest.NewLogger(t)
	budgets := gateway.NewBudgets(gateway.DefaultEditsPerMinute, pace.PolicyFair)
	approve := approvals.New(nil, nil, log.Named("approvals"))
	replyOpts := handlers.ReplyOptions{
		BotUserID: id.UserID, BotID: id.BotID, BotName: id.Name, TeamID: id.TeamID,
		FollowUps: followup.New(followup.Options{On: cfg.Bot.FollowUps, BotUserID: id.UserID, BotID: id.BotID}),
		Buttons:   cfg.Buttons, Budgets: budgets, Approvals: approve,
		Names: gateway.NewNames(api, budgets.Lookups, id.UserID),
	}
	replies := handlers.NewReplies(api, api, api, api, model, log.Named("replies"), replyOpts)
	summaries := summarize.New(api, api, replyOpts.Names, model, replies, log.Named("summarize"), summarize.Options{
		BotUserID: id.UserID, BotID: id.BotID, BotName: id.Name, Buttons: cfg.Buttons, Budgets: budgets})
	notices := gateway.NewNotices(api, budgets)
	im := imagine.New(model, api, api, log.Named("imagine"), imagine.Options{BotName: id.Name})
	ev := newBotEvents()
	members, err := access.NewMembers(access.MembersOptions{Team: id.TeamID, Enterprise: id.EnterpriseID,
		Workspace: id.TeamName, External: cfg.External, Guests: cfg.Guests, Directory: api})
	if err != nil {
		t.Fatal(err)
	}
	guard := access.NewGuard(access.GuardOptions{Policy: policy, Quota: access.NewQuota(cfg.Quota, 0),
		Denied: ev.denied, KnownFollowUp: replies.KnownFollowUp, Members: members, Notifier: notices,
		Log: log.Named("access")})
	routes := route.NewTable(ev.observe, guard.Middleware)
	opt := cfg.Bot
	opt.Hooks = ev.hooks()
	b := bot.New(w.sc, id, routes, notices, log.Named("bot"), opt)
	if err := routes.Add(
		route.Route{Kind: route.Message, Name: route.MessageRoute, Handler: replies.Handler()},
		route.Route{Kind: route.Action, Name: route.ActionRegenerate, Feature: "regenerate", Handler: replies.RegenerateHandler()},
		route.Route{Kind: route.Action, Name: route.ActionStop, Feature: "stop", Handler: b.StopHandler()},
		route.Route{Kind: route.Command, Name: "/imagine", Feature: access.FeatureImagine, Handler: im.Handler()},
		route.Route{Kind: route.Action, Name: imagine.ActionImagineAgain, Feature: access.FeatureImagine, Handler: im.Handler()},
		route.Route{Kind: route.Action, Name: approvals.ActionToolAllowOnce, Feature: "tool_approval", Handler: b.ApprovalHandler(approve)},
		route.Route{Kind: route.Command, Name: summarize.Command, Feature: summarize.Feature, Handler: summaries.SummarizeHandler(api)},
		route.Route{Kind: route.Shortcut, Name: summarize.ShortcutThread, Feature: summarize.Feature, Handler: summaries.SummarizeThreadHandler(api)},
	); err != nil {
		t.Fatal(err)
	}
	w.run(t, b)
	return ev
}

// The real bot with a Guard, against the fake Slack and model service: a denied user in a
// channel and in a DM is told privately and gets no answer, an allowed one is answered, and
// /imagine stops at the daily quota. Every refusal is counted.
func TestWiredGuard(t *testing.T) {
	w := newWired(t)
	fs := w.fs
	policy, err := access.NewPolicy(access.Rules{DenyUsers: access.ParseIDs("U0MALLORY")})
	if err != nil {
		t.Fatal(err)
	}
	ev := wiredBot(t, w, policy, wiredConfig{Quota: 1})

	// Denied in a channel: one private notice in the thread, no answer.
	denied := fs.PostUserMessage("C1", "U0MALLORY", "", "<@UBOT> hello?")
	waitFor(t, fs, "the notice in the channel", func() bool { return len(ephemeralsTo(fs, "U0MALLORY", "C1")) == 1 })
	if e := ephemeralsTo(fs, "U0MALLORY", "C1")[0]; e.Text != access.DefaultRefusal || e.ThreadTS != denied {
		t.Errorf("notice = %q in thread %q, want the refusal in thread %q", e.Text, e.ThreadTS, denied)
	}
	// Denied in a DM: the same, in the DM.
	fs.PostUserMessage("D1", "U0MALLORY", "", "hello?")
	waitFor(t, fs, "the notice in the DM", func() bool { return len(ephemeralsTo(fs, "U0MALLORY", "D1")) == 1 })
	if e := ephemeralsTo(fs, "U0MALLORY", "D1")[0]; e.Text != access.DefaultRefusal {
		t.Errorf("notice in the DM = %q, want the refusal", e.Text)
	}

	// Allowed: answered. Then nothing more reached the denied user.
	allowed := fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> hello?")
	waitFor(t, fs, "the allowed answer", func() bool {
		r := fs.BotReplies("C1", allowed)
		return len(r) == 1 && r[0].Text == "Sure thing."
	})
	if r := fs.BotReplies("C1", denied); len(r) != 0 {
		t.Errorf("the denied mention got public replies: %+v", r)
	}
	if msgs := fs.Messages("D1"); len(msgs) != 1 {
		t.Errorf("the DM has %d messages, want only the person's (no answer)", len(msgs))
	}
	if n := w.fl.Counts().Chat; n != 1 {
		t.Errorf("%d chat requests, want 1 (the allowed one)", n)
	}

	// /imagine: the first picture is made, the second is refused by the quota in the ack.
	fs.SlashCommand("C1", "U0ALICE", "/imagine", "a lighthouse")
	waitFor(t, fs, "the picture", func() bool { return len(fs.Files()) == 1 })
	fs.SlashCommand("C1", "U0ALICE", "/imagine", "another lighthouse")
	waitFor(t, fs, "both acks", func() bool { return len(ackTexts(t, fs)) == 2 })
	texts := ackTexts(t, fs)
	if !strings.HasPrefix(texts[0], "Generating") {
		t.Errorf("first /imagine ack = %q, want Generating…", texts[0])
	}
	if !strings.Contains(texts[1], "You've made your 1 /imagine picture for today") {
		t.Errorf("second /imagine ack = %q, want the quota message", texts[1])
	}
	if got := w.fl.Counts().Image; got != 1 {
		t.Errorf("%d image requests, want 1", got)
	}
	want := [][2]string{
		{access.FeatureMention, string(access.ReasonUserDenied)},
		{access.FeatureDM, string(access.ReasonUserDenied)},
		{access.FeatureImagine, string(access.ReasonQuota)},
	}
	if got := ev.now().denials; !slices.Equal(got, want) {
		t.Errorf("denials counted = %v, want %v", got, want)
	}
}

// botEvents records what the wired bot reports, for tests to wait on what cannot be seen in the
// fake Slack: the Decision of every request (observe), the Guard's refusals (GuardOptions.Denied),
// a reply that has ended (Hooks.Done is called once its slot and its thread are free again; the
// answer shows in Slack before that) and answers refused because the bot was full (Hooks.Busy).
type botEvents struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	seen    botSeen
}

// botSeen is what botEvents recorded so far.
type botSeen struct {
	decided []decided   // every request the route table served, in the loop's order
	denials [][2]string // feature, reason: every refusal the Guard counted
	replies int         // replies finished, whatever their outcome
	busy    int         // answers refused because MaxConcurrent + MaxQueued were reached
}

// decided is one request's Accept, as the bot got it.
type decided struct {
	feature, user string
	d             route.Decision
}

func newBotEvents() *botEvents { return &botEvents{changed: make(chan struct{})} }

// hooks are the bot.Hooks that count into e (they never block).
func (e *botEvents) hooks() bot.Hooks {
	return bot.Hooks{
		Busy: func() { e.update(func(s *botSeen) { s.busy++ }) },
		Done: func(kind string, _ error, _ time.Duration) {
			if kind == "reply" {
				e.update(func(s *botSeen) { s.replies++ })
			}
		},
	}
}

// denied is GuardOptions.Denied.
func (e *botEvents) denied(feature, reason string) {
	e.update(func(s *botSeen) { s.denials = append(s.denials, [2]string{feature, reason}) })
}

// observe is a route.Middleware that records each request's Decision and changes nothing.
func (e *botEvents) observe(next route.Handler) route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			d := next.Accept(req)
			e.update(func(s *botSeen) { s.decided = append(s.decided, decided{req.Feature, req.User, d}) })
			return d
		},
		RunFunc: next.Run,
	}
}

func (e *botEvents) update(f func(*botSeen)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(&e.seen)
	close(e.changed)
	e.changed = make(chan struct{})
}

// now returns a copy of what was recorded so far.
func (e *botEvents) now() botSeen {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.seen
	s.decided, s.denials = slices.Clone(s.decided), slices.Clone(s.denials)
	return s
}

// waitFor waits, at most wiredWait, until cond holds for what was recorded.
func (e *botEvents) waitFor(tb testing.TB, what string, cond func(botSeen) bool) {
	tb.Helper()
	timeout := time.After(wiredWait)
	for {
		e.mu.Lock()
		changed := e.changed
		e.mu.Unlock()
		s := e.now()
		if cond(s) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			tb.Fatalf("waiting for %s: %d decisions, denials %v, %d replies finished, %d refused as busy",
				what, len(s.decided), s.denials, s.replies, s.busy)
		}
	}
}

func waitFor(tb testing.TB, fs *fakeslack.Server, what string, cond func() bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wiredWait)
	defer cancel()
	if err := fs.WaitFor(ctx, cond); err != nil {
		tb.Fatalf("waiting for %s: %v", what, err)
	}
}

func ephemeralsTo(fs *fakeslack.Server, user, channel string) []fakeslack.Ephemeral {
	var out []fakeslack.Ephemeral
	for _, e := range fs.Ephemerals() {
		if e.User == user && e.Channel == channel {
			out = append(out, e)
		}
	}
	return out
}

// ackTexts returns the text of every slash command ack payload, in order.
func ackTexts(tb testing.TB, fs *fakeslack.Server) []string {
	tb.Helper()
	var out []string
	for _, a := range fs.Acks() {
		if a.Type != "slash_commands" || len(a.Payload) == 0 {
			continue
		}
		var p struct{ Text string }
		if err := json.Unmarshal(a.Payload, &p); err != nil {
			tb.Fatalf("ack payload %s: %v", a.Payload, err)
		}
		out = append(out, p.Text)
	}
	return out
}
