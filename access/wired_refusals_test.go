package access_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakellm"
)

// README: "a refused person's thread messages without a mention (follow-ups) are left alone
// silently", and a refused person gets one short private explanation. When every slot is taken,
// the bot's busy check runs before the Guard: a denied person's follow-up in a thread the bot
// takes part in must still get nothing (not "try again in a minute"), and their mention the
// refusal (not "try again", nor silence).
func TestWiredDeniedFollowUpSilentWhenBusy(t *testing.T) {
	w := newWired(t)
	fs, api, id, model := w.fs, w.api, w.id, w.model
	slow := make(chan struct{})
	w.fl.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		select {
		case <-slow:
			return fakellm.Reply{Tokens: []string{"Later."}, HeaderDelay: 20 * time.Second}
		default:
			return fakellm.Text("Sure thing.")
		}
	})
	log := zaptest.NewLogger(t)
	policy, err := access.NewPolicy(access.Rules{DenyUsers: access.ParseIDs("U0MALLORY")})
	if err != nil {
		t.Fatal(err)
	}
	guard := access.NewGuard(access.GuardOptions{Policy: policy, Notify: api})
	replies := handlers.NewReplies(api, api, api, api, model, log, handlers.ReplyOptions{
		BotUserID: id.UserID, BotID: id.BotID, BotName: id.Name, TeamID: id.TeamID, FollowUps: true,
	})
	ev := newBotEvents()
	b := bot.New(w.sc, id, guard.Replier(replies), nil, api, log, bot.Options{ // as cmd/llmbot wires it
		MaxConcurrent: 1, FollowUps: true, KnownFollowUp: replies.KnownFollowUp, Refusal: guard.Refusal,
		Hooks: ev.hooks(), Grace: wiredGrace,
	})
	w.run(t, b)

	// Alice's thread: answered, so the bot takes part in it. Waited for until the reply has ended
	// (its slot is free again): the bot's reply shows in the thread ("Thinking…") before the model
	// is asked, and the final text before the slot is given back. Before that, close(slow) could
	// come before this answer's model request (then this answer, not the next, would hold the slot
	// with "Later.", and the next be refused as busy), or the next mention could find the slot
	// still taken (refused as busy: no answer would ever start, and the wait below time out).
	thread := fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> hello?")
	ev.waitFor(t, "the answer to end", func(replies, _ int) bool { return replies == 1 })
	if r := fs.BotReplies("C1", thread); len(r) != 1 || r[0].Text != "Sure thing." {
		t.Fatalf("Alice's question got %+v, want the answer %q", r, "Sure thing.")
	}

	// Alice asks elsewhere; the answer takes the only slot.
	close(slow)
	fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> a long one")
	wctx, wcancel := context.WithTimeout(w.ctx, wiredWait)
	defer wcancel()
	if err := w.fl.WaitFor(wctx, func() bool { return w.fl.Counts().Active == 1 }); err != nil {
		t.Fatalf("second answer not started: %v (%+v)", err, w.fl.Counts())
	}

	// Mallory, denied, chats in Alice's thread without a mention: refused because the bot is full.
	fs.PostUserMessage("C1", "U0MALLORY", thread, "what about me")
	ev.waitFor(t, "the follow-up refused as busy", func(_, busy int) bool { return busy == 1 })
	time.Sleep(time.Second) // the busy notice, if any, is sent (right after the refusal) well within this
	for _, e := range ephemeralsTo(fs, "U0MALLORY", "C1") {
		t.Errorf("denied person's follow-up drew a private notice %q; README: follow-ups of refused people are left alone silently", e.Text)
	}

	// Mallory mentions the bot while it is still full: told the refusal, as when it is not full
	// (not silence, and not "try again in a minute").
	fs.PostUserMessage("C1", "U0MALLORY", "", "<@UBOT> and now?")
	want := policy.Check("C1", "U0MALLORY").Message
	ev.waitFor(t, "the mention refused as busy", func(_, busy int) bool { return busy == 2 })
	waitFor(t, fs, "the refusal", func() bool { return len(ephemeralsTo(fs, "U0MALLORY", "C1")) > 0 })
	if got := ephemeralsTo(fs, "U0MALLORY", "C1"); len(got) != 1 || got[0].Text != want {
		t.Errorf("denied person's mention while the bot is full drew %+v, want the refusal %q once", got, want)
	}
}

// llmbot_access_denied_total ("requests refused by access control") counts every thread
// message of a person not on ALLOW_USERS in any channel the bot is in with FOLLOW_UPS on, even in
// threads the bot never took part in: people talking to each other are counted as refused
// follow-ups, so the metric (and any alert on it) is mostly noise. Only messages the bot would
// have answered (Replies.KnownFollowUp) should count.
func TestWiredDeniedMetricIgnoresOtherPeoplesThreads(t *testing.T) {
	w := newWired(t)
	fs, api, id, model := w.fs, w.api, w.id, w.model
	log := zaptest.NewLogger(t)
	policy, err := access.NewPolicy(access.Rules{AllowUsers: access.ParseIDs("U0ALICE")})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var denials [][2]string
	var replies *handlers.Replies
	guard := access.NewGuard(access.GuardOptions{Policy: policy, Notify: api, KnownFollowUp: func(req handlers.ReplyRequest) bool {
		return replies.KnownFollowUp(req) // as cmd/llmbot wires it
	}, Denied: func(feature, reason string) {
		mu.Lock()
		defer mu.Unlock()
		denials = append(denials, [2]string{feature, reason})
	}})
	replies = handlers.NewReplies(api, api, api, api, model, log, handlers.ReplyOptions{
		BotUserID: id.UserID, BotID: id.BotID, BotName: id.Name, TeamID: id.TeamID, FollowUps: true,
	})
	ev := newBotEvents()
	b := bot.New(w.sc, id, guard.Replier(replies), nil, api, log, bot.Options{FollowUps: true, KnownFollowUp: replies.KnownFollowUp,
		Hooks: ev.hooks()})
	w.run(t, b)

	// Bob and Carol talk in a thread of their own; the bot is in the channel but not in it.
	top := fs.PostUserMessage("C1", "U0BOB", "", "lunch?")
	fs.PostUserMessage("C1", "U0CAROL", top, "sure")
	fs.PostUserMessage("C1", "U0BOB", top, "12:30 then")
	// Then Alice (allowed) asks the bot. Every thread message goes to the guarded Replier (FOLLOW_UPS
	// on), each in a goroutine of its own: her answer showing does not say theirs were refused
	// already, the end of all three replies does.
	q := fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> hello?")
	waitFor(t, fs, "the answer", func() bool { return len(fs.BotReplies("C1", q)) == 1 })
	ev.waitFor(t, "the three replies to end", func(replies, _ int) bool { return replies == 3 })

	mu.Lock()
	defer mu.Unlock()
	if len(denials) != 0 {
		t.Errorf("access denials counted for a conversation that never addressed the bot: %v", denials)
	}
}

// fullWiredBot is the bot as cmd/llmbot wires it (Guard around the Replier and Imaginer,
// Options.Refusal from the policy, Denied counted), with one slot, which an answer to Alice holds
// when it returns. Mallory is denied.
func fullWiredBot(t *testing.T) (*wired, *access.Policy, func() [][2]string) {
	t.Helper()
	w := newWired(t)
	fs, api, id, model := w.fs, w.api, w.id, w.model
	w.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"Later."}, HeaderDelay: 20 * time.Second}
	})
	log := zaptest.NewLogger(t)
	policy, err := access.NewPolicy(access.Rules{DenyUsers: access.ParseIDs("U0MALLORY")})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var denials [][2]string
	var replies *handlers.Replies
	guard := access.NewGuard(access.GuardOptions{Policy: policy, Notify: api,
		KnownFollowUp: func(req handlers.ReplyRequest) bool { return replies.KnownFollowUp(req) },
		Denied: func(feature, reason string) {
			mu.Lock()
			defer mu.Unlock()
			denials = append(denials, [2]string{feature, reason})
		}})
	replies = handlers.NewReplies(api, api, api, api, model, log, handlers.ReplyOptions{
		BotUserID: id.UserID, BotID: id.BotID, BotName: id.Name, TeamID: id.TeamID,
	})
	imagine := handlers.NewImagine(model, api, api, log, handlers.ImagineOptions{BotName: id.Name})
	b := bot.New(w.sc, id, guard.Replier(replies), guard.Imaginer(imagine), api, log, bot.Options{
		MaxConcurrent: 1, KnownFollowUp: replies.KnownFollowUp, Refusal: guard.Refusal, Grace: wiredGrace,
	})
	w.run(t, b)

	fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> a long one")
	wctx, wcancel := context.WithTimeout(w.ctx, wiredWait)
	defer wcancel()
	if err := w.fl.WaitFor(wctx, func() bool { return w.fl.Counts().Active == 1 }); err != nil {
		t.Fatalf("Alice's answer not started: %v (%+v)", err, w.fl.Counts())
	}
	return w, policy, func() [][2]string {
		mu.Lock()
		defer mu.Unlock()
		return append([][2]string(nil), denials...)
	}
}

// README: the access rules "apply to mentions, DMs, buttons and /imagine", and "a refused person
// gets one short private explanation": a refused person's /imagine that finds the bot full gets
// the refusal, not "try again in a minute" (they would try again, and be refused then).
func TestWiredDeniedImagineWhenBusyGetsTheRefusal(t *testing.T) {
	w, policy, _ := fullWiredBot(t)
	w.fs.SlashCommand("C1", "U0MALLORY", "/imagine", "a lighthouse")
	waitFor(t, w.fs, "the ack", func() bool { return len(ackTexts(t, w.fs)) == 1 })
	want := policy.Check("C1", "U0MALLORY").Message
	if got := ackTexts(t, w.fs)[0]; got != want {
		t.Errorf("denied person's /imagine while the bot is full acked %q, want the refusal %q", got, want)
	}
}

// llmbot_access_denied_total counts "requests refused by access control" (GuardOptions.Denied),
// also a refusal the bot tells because it is full (Guard.Refusal): the same refusal counts however
// busy the bot is.
func TestWiredDeniedMentionWhenBusyIsCounted(t *testing.T) {
	w, policy, denials := fullWiredBot(t)
	w.fs.PostUserMessage("C1", "U0MALLORY", "", "<@UBOT> and me?")
	want := policy.Check("C1", "U0MALLORY").Message
	waitFor(t, w.fs, "the refusal", func() bool { return len(ephemeralsTo(w.fs, "U0MALLORY", "C1")) > 0 })
	if got := ephemeralsTo(w.fs, "U0MALLORY", "C1"); len(got) != 1 || got[0].Text != want {
		t.Fatalf("denied person's mention while the bot is full drew %+v, want the refusal %q once", got, want)
	}
	if got := denials(); len(got) != 1 || got[0] != [2]string{access.FeatureMention, string(access.ReasonUserDenied)} {
		t.Errorf("denials counted = %v, want [[%s %s]]", got, access.FeatureMention, access.ReasonUserDenied)
	}
}
