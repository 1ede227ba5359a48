package access_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/route"
)

// fullWiredBot is the bot as cmd/llmbot wires it (wiredBot) with follow-ups on and one place for
// answers, none waiting (MaxQueued 0), which an answer to Alice holds when it returns: the bot is
// full, as an allowed person (Bob) is told. Mallory is denied. thread is the thread of Alice's
// answer in progress: one the bot takes part in.
func fullWiredBot(t *testing.T) (w *wired, policy *access.Policy, ev *botEvents, thread string) {
	t.Helper()
	w = newWired(t)
	fs := w.fs
	w.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"Later."}, HeaderDelay: 20 * time.Second}
	})
	policy, err := access.NewPolicy(access.Rules{DenyUsers: access.ParseIDs("U0MALLORY")})
	if err != nil {
		t.Fatal(err)
	}
	ev = wiredBot(t, w, policy, wiredConfig{Bot: bot.Options{MaxConcurrent: 1, FollowUps: true, Grace: wiredGrace}})

	// Alice asks; the answer takes the only slot (its model request is in progress, so the bot has
	// taken part in the thread since before it asked the model).
	thread = fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> a long one")
	wctx, wcancel := context.WithTimeout(w.ctx, wiredWait)
	defer wcancel()
	if err := w.fl.WaitFor(wctx, func() bool { return w.fl.Counts().Active == 1 }); err != nil {
		t.Fatalf("Alice's answer not started: %v (%+v)", err, w.fl.Counts())
	}

	// The bot is full: Bob, allowed, is told to try again.
	fs.PostUserMessage("C1", "U0BOB", "", "<@UBOT> me too")
	waitFor(t, fs, "Bob's busy note", func() bool { return len(ephemeralsTo(fs, "U0BOB", "C1")) == 1 })
	if got := ephemeralsTo(fs, "U0BOB", "C1")[0].Text; got != bot.BusyText {
		t.Fatalf("Bob, allowed, was told %q while the bot is full, want %q", got, bot.BusyText)
	}
	if got := ev.now().busy; got != 1 {
		t.Fatalf("%d answers refused as busy, want 1 (Bob's)", got)
	}
	return w, policy, ev, thread
}

// README: "a refused person gets one short private explanation", whether or not the bot is busy:
// a refused person's mention or DM that finds the bot full is told the refusal, not "try again in
// a minute" (they would try again, and be refused then), nor nothing; and it is counted once, as
// a refusal (llmbot_access_denied_total), not as busy. The Guard decides before the bot's busy
// check.
func TestWiredDeniedMessageWhenBusyGetsTheRefusal(t *testing.T) {
	tests := []struct {
		name    string
		channel string
		text    string
		feature string
	}{
		{"mention", "C1", "<@UBOT> and me?", access.FeatureMention},
		{"DM", "D1", "and me?", access.FeatureDM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, policy, ev, _ := fullWiredBot(t)
			w.fs.PostUserMessage(tt.channel, "U0MALLORY", "", tt.text)
			want := policy.Check(tt.channel, "U0MALLORY").Message
			waitFor(t, w.fs, "the refusal", func() bool { return len(ephemeralsTo(w.fs, "U0MALLORY", tt.channel)) > 0 })
			if got := ephemeralsTo(w.fs, "U0MALLORY", tt.channel); len(got) != 1 || got[0].Text != want {
				t.Errorf("denied person's %s while the bot is full drew %+v, want the refusal %q once", tt.name, got, want)
			}
			s := ev.now()
			if wantDenials := [][2]string{{tt.feature, string(access.ReasonUserDenied)}}; !slices.Equal(s.denials, wantDenials) {
				t.Errorf("denials counted = %v, want %v", s.denials, wantDenials)
			}
			if s.busy != 1 {
				t.Errorf("%d answers refused as busy, want 1 (Bob's, not Mallory's)", s.busy)
			}
		})
	}
}

// README: the access rules "apply to mentions, DMs, buttons and /imagine": a refused person's
// /imagine that finds the bot full gets the refusal as its ack, not "try again in a minute", and
// it is counted.
func TestWiredDeniedImagineWhenBusyGetsTheRefusal(t *testing.T) {
	w, policy, ev, _ := fullWiredBot(t)
	w.fs.SlashCommand("C1", "U0MALLORY", "/imagine", "a lighthouse")
	waitFor(t, w.fs, "the ack", func() bool { return len(ackTexts(t, w.fs)) == 1 })
	want := policy.Check("C1", "U0MALLORY").Message
	if got := ackTexts(t, w.fs)[0]; got != want {
		t.Errorf("denied person's /imagine while the bot is full acked %q, want the refusal %q", got, want)
	}
	wantDenials := [][2]string{{access.FeatureImagine, string(access.ReasonUserDenied)}}
	if got := ev.now().denials; !slices.Equal(got, wantDenials) {
		t.Errorf("denials counted = %v, want %v", got, wantDenials)
	}
	if got := w.fl.Counts().Image; got != 0 {
		t.Errorf("%d image requests, want none", got)
	}
}

// README: "a refused person's thread messages without a mention (follow-ups) are left alone
// silently", also when the bot is full: a denied person's follow-up in a thread the bot takes
// part in gets nothing (not "try again in a minute"). It is counted as a refusal (the bot would
// have answered it), not as busy.
func TestWiredDeniedFollowUpSilentWhenBusy(t *testing.T) {
	w, _, ev, thread := fullWiredBot(t)
	fs := w.fs

	// Mallory, denied, chats in Alice's thread without a mention, while her answer is written there.
	fs.PostUserMessage("C1", "U0MALLORY", thread, "what about me")
	wantDenials := [][2]string{{access.FeatureFollowUp, string(access.ReasonUserDenied)}}
	ev.waitFor(t, "the follow-up refused", func(s botSeen) bool { return len(s.denials) > 0 })
	time.Sleep(time.Second) // a notice, if any, is sent (right after the refusal) well within this
	for _, e := range ephemeralsTo(fs, "U0MALLORY", "C1") {
		t.Errorf("denied person's follow-up drew a private notice %q; README: follow-ups of refused people are left alone silently", e.Text)
	}
	s := ev.now()
	if !slices.Equal(s.denials, wantDenials) {
		t.Errorf("denials counted = %v, want %v", s.denials, wantDenials)
	}
	wantDecided := decided{access.FeatureFollowUp, "U0MALLORY", route.Decision{}}
	if last := s.decided[len(s.decided)-1]; last != wantDecided {
		t.Errorf("the follow-up was decided %+v, want %+v (refused, nothing said)", last, wantDecided)
	}
	if s.busy != 1 {
		t.Errorf("%d answers refused as busy, want 1 (Bob's, not Mallory's)", s.busy)
	}
}

// llmbot_access_denied_total ("requests refused by access control") counts every thread
// message of a person not on ALLOW_USERS in any channel the bot is in with FOLLOW_UPS on, even in
// threads the bot never took part in: people talking to each other are counted as refused
// follow-ups, so the metric (and any alert on it) is mostly noise. Only messages the bot would
// have answered (Replies.KnownFollowUp) should count.
func TestWiredDeniedMetricIgnoresOtherPeoplesThreads(t *testing.T) {
	w := newWired(t)
	fs := w.fs
	policy, err := access.NewPolicy(access.Rules{AllowUsers: access.ParseIDs("U0ALICE")})
	if err != nil {
		t.Fatal(err)
	}
	ev := wiredBot(t, w, policy, wiredConfig{Bot: bot.Options{FollowUps: true}})

	// Bob and Carol talk in a thread of their own; the bot is in the channel but not in it.
	top := fs.PostUserMessage("C1", "U0BOB", "", "lunch?")
	fs.PostUserMessage("C1", "U0CAROL", top, "sure")
	fs.PostUserMessage("C1", "U0BOB", top, "12:30 then")
	// Then Alice (allowed) asks the bot. Every thread message goes to the route table (FOLLOW_UPS
	// on): her answer showing does not say theirs were decided already, the three decisions do.
	q := fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> hello?")
	waitFor(t, fs, "the answer", func() bool { return len(fs.BotReplies("C1", q)) == 1 })
	ev.waitFor(t, "the three messages decided", func(s botSeen) bool { return len(s.decided) == 3 })

	s := ev.now()
	if len(s.denials) != 0 {
		t.Errorf("access denials counted for a conversation that never addressed the bot: %v", s.denials)
	}
	want := []decided{
		{access.FeatureFollowUp, "U0CAROL", route.Decision{}},
		{access.FeatureFollowUp, "U0BOB", route.Decision{}},
		{access.FeatureMention, "U0ALICE", route.Decision{Run: true}},
	}
	if !slices.Equal(s.decided, want) {
		t.Errorf("decisions = %+v, want %+v (their follow-ups refused silently, her mention answered)", s.decided, want)
	}
}
