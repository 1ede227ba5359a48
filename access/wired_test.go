package access_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/llm"
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

func newWired(t *testing.T) *wired {
	t.Helper()
	w := &wired{fs: fakeslack.New(fakeslack.Config{}), fl: fakellm.New()}
	t.Cleanup(w.fs.Close)
	t.Cleanup(w.fl.Close)
	w.fl.SetAPIKey("sk-wired-test")
	w.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Sure thing.") })
	ctx, cancel := context.WithTimeout(t.Context(), 2*wiredWait)
	t.Cleanup(cancel)
	w.ctx = ctx
	w.sc = slack.New("xoxb-test", slack.OptionAPIURL(w.fs.URL()), slack.OptionAppLevelToken("xapp-test"),
		slack.OptionHTTPClient(&http.Client{Timeout: wiredWait}))
	w.api = bot.NewSlackAPI(w.sc)
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

// The real bot with a Guard, against the fake Slack and model service: a denied user in a
// channel and in a DM is told privately and gets no answer, an allowed one is answered, and
// /imagine stops at the daily quota.
func TestWiredGuard(t *testing.T) {
	w := newWired(t)
	fs, api, id, model := w.fs, w.api, w.id, w.model
	log := zaptest.NewLogger(t)
	policy, err := access.NewPolicy(access.Rules{DenyUsers: access.ParseIDs("U0MALLORY")})
	if err != nil {
		t.Fatal(err)
	}
	guard := access.NewGuard(access.GuardOptions{Policy: policy, Quota: access.NewQuota(1, 0), Notify: api})
	replies := handlers.NewReplies(api, api, api, api, model, log, handlers.ReplyOptions{
		BotUserID: id.UserID, BotID: id.BotID, BotName: id.Name, TeamID: id.TeamID,
	})
	imagine := handlers.NewImagine(model, api, api, log, handlers.ImagineOptions{BotName: id.Name})
	b := bot.New(w.sc, id, guard.Replier(replies), guard.Imaginer(imagine), api, log, bot.Options{})
	w.run(t, b)

	// Denied in a channel: one private notice in the thread, no answer.
	denied := fs.PostUserMessage("C1", "U0MALLORY", "", "<@UBOT> hello?")
	waitFor(t, fs, "the notice in the channel", func() bool { return len(ephemeralsTo(fs, "U0MALLORY", "C1")) == 1 })
	if e := ephemeralsTo(fs, "U0MALLORY", "C1")[0]; e.Text != access.DefaultRefusal || e.ThreadTS != denied {
		t.Errorf("notice = %q in thread %q, want the refusal in thread %q", e.Text, e.ThreadTS, denied)
	}
	// Denied in a DM: the same, in the DM.
	fs.PostUserMessage("D1", "U0MALLORY", "", "hello?")
	waitFor(t, fs, "the notice in the DM", func() bool { return len(ephemeralsTo(fs, "U0MALLORY", "D1")) == 1 })

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
}

// botEvents counts what the bot reports through its Hooks, for tests to wait on what cannot be
// seen in the fake Slack: a reply that has ended (Done is called once its slot and its thread are
// free again; the answer shows in Slack before that) and work refused because the bot was full.
type botEvents struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	replies int           // replies finished, whatever their outcome (also refused by the Guard)
	busy    int           // requests refused because MaxConcurrent was reached
}

func newBotEvents() *botEvents { return &botEvents{changed: make(chan struct{})} }

// hooks are the bot.Hooks that count into e (they never block).
func (e *botEvents) hooks() bot.Hooks {
	return bot.Hooks{
		Busy: func() { e.update(func() { e.busy++ }) },
		Done: func(kind string, _ error, _ time.Duration) {
			if kind == "reply" {
				e.update(func() { e.replies++ })
			}
		},
	}
}

func (e *botEvents) update(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f()
	close(e.changed)
	e.changed = make(chan struct{})
}

// waitFor waits, at most wiredWait, until cond holds for the replies finished and the busy refusals.
func (e *botEvents) waitFor(tb testing.TB, what string, cond func(replies, busy int) bool) {
	tb.Helper()
	timeout := time.After(wiredWait)
	for {
		e.mu.Lock()
		replies, busy, changed := e.replies, e.busy, e.changed
		e.mu.Unlock()
		if cond(replies, busy) {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			tb.Fatalf("waiting for %s: %d replies finished, %d refused as busy", what, replies, busy)
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
