package main

// End-to-end tests of /llmbot: a channel's instructions set from Slack and then in the answers'
// system prompt, and scheduled prompts run by the real wiring against the fake Slack and model,
// after a restart and with two replicas on one real redis-server.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/internal/waittest"
	"github.com/llmbot/llmbot/schedule"
	"github.com/llmbot/llmbot/state"
)

// TestE2EChannelInstructions: /llmbot instructions set is answered privately, announced in the
// channel, and the next answer there has them in its system prompt after the operator's, as the
// channel's block; people not in CHANNEL_EDITORS are told they may not change them.
func TestE2EChannelInstructions(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"SYSTEM_PROMPT": "You are the operator's bot.", "CHANNEL_EDITORS": "U1"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Vier.") })

	e.slack.SlashCommand("C1", "U2", "/llmbot", "instructions set Answer in English.")
	e.lastPrivate(t, "U2's refusal", "U2", func(p fakeslack.ResponseURLPost) bool {
		return strings.Contains(p.Text, "Only the people the operator named")
	})
	e.slack.SlashCommand("C1", "U1", "/llmbot", "instructions set Answer in German. <!channel>")
	e.lastPrivate(t, "U1's confirmation", "U1", func(p fakeslack.ResponseURLPost) bool { return strings.Contains(p.Text, "Saved") })
	var announced fakeslack.Message
	e.waitFor(t, "the announcement in the channel", func() bool {
		for _, m := range e.slack.Messages("C1") {
			if m.BotID != "" && strings.Contains(m.Text, "<@U1> set this channel's instructions") {
				announced = m
				return true
			}
		}
		return false
	})
	if strings.Contains(announced.Text, "<!channel>") || markOf(t, announced).Kind != convo.MarkNotice {
		t.Errorf("announcement %q (mark %+v): want a notice that pings nobody", announced.Text, markOf(t, announced))
	}

	ts := e.slack.PostUserMessage("C1", "U3", "", "<@UBOT> what is 2+2?")
	e.final(t, "C1", ts, 1, 1)
	reqs := e.llm.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests, want 1", len(reqs))
	}
	system := reqs[0].Messages[0].Content
	operator, block := strings.Index(system, "You are the operator's bot."), strings.Index(system, " channel instructions>>>\nAnswer in German.")
	if operator != 0 || block < 0 || !strings.Contains(system, "They are not the operator's") {
		t.Errorf("system prompt %q: want the operator's prompt first, then the channel's block", system)
	}
	e.slack.SlashCommand("C1", "U3", "/llmbot", "instructions show")
	e.lastPrivate(t, "the instructions shown to anyone", "U3", func(p fakeslack.ResponseURLPost) bool {
		return strings.Contains(p.Text, "set by <@U1>") && strings.Contains(p.Text, "> Answer in German.")
	})
}

// stateOwnerForTests is whom the fake Slack's bot's state belongs to (stateOwner): its bot id, as the
// fake's bots.info names no app.
const stateOwnerForTests = "BBOT"

// recordsKeyForTests is the key the wiring seals the records with, derived from the tests' bot token.
func recordsKeyForTests() []byte { return state.DeriveKey(botToken, recordsKeyPurpose) }

// seedMissedOccurrence adds, as a previous life of the bot would have, a schedule in C1 by U1 created
// ten minutes ago that should have run five minutes ago: the bot was not running then.
func seedMissedOccurrence(t *testing.T, rec schedule.Records, prompt string) schedule.Schedule {
	t.Helper()
	at := time.Now().UTC().Add(-5 * time.Minute)
	s := schedule.NewSchedules(rec, recordsKeyForTests(), schedule.Limits{PerChannel: 10, PerPerson: 10})
	sc, err := s.Add(t.Context(), "T1", "C1", "U1", fmt.Sprintf("every day at %d:%02d UTC | %s", at.Hour(), at.Minute(), prompt), time.Now().Add(-10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// scheduledRuns are the bot's top-level messages in C1 that start a run of sc.
func scheduledRuns(fs *fakeslack.Server, sc schedule.Schedule) []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range fs.Messages("C1") {
		if m.BotID != "" && (m.ThreadTS == "" || m.ThreadTS == m.TS) && strings.Contains(m.Text, "`"+sc.ID+"` of <@U1>") {
			out = append(out, m)
		}
	}
	return out
}

// TestE2EScheduledPromptAfterARestart: a schedule whose occurrence passed while the bot was down (its
// state in STATE_DIR) runs once when the bot comes back within SCHEDULE_CATCH_UP: a new message in the
// channel naming it, answered in its thread as U1's question, the prompt the model's user turn. Then
// /llmbot schedule list and delete work on it.
func TestE2EScheduledPromptAfterARestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, err := state.NewMemory("previous-life", filepath.Join(dir, stateOwnerForTests+"-T1"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	sc := seedMissedOccurrence(t, m.Records(), "What broke overnight?")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	// The occurrence may run as the bot starts, before a SetChat: the fake model's default answer is the answer.
	e := startE2E(t, fakeslack.Config{}, map[string]string{"STATE_DIR": dir})
	e.waitFor(t, "the missed occurrence's run", func() bool { return len(scheduledRuns(e.slack, sc)) == 1 })
	head := scheduledRuns(e.slack, sc)[0]
	msgs := e.final(t, "C1", head.TS, 1, 1)
	if msgs[0].Text != "Hello from the fake LLM." {
		t.Errorf("answer %q, want the model's", msgs[0].Text)
	}
	reqs := e.llm.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests, want 1", len(reqs))
	}
	if last := reqs[0].Messages[len(reqs[0].Messages)-1]; last.Role != "user" || !strings.Contains(last.Content, "What broke overnight?") {
		t.Errorf("last message %+v: want the prompt as the user's question", last)
	}

	e.slack.SlashCommand("C1", "U2", "/llmbot", "schedule list")
	e.lastPrivate(t, "the list", "U2", func(p fakeslack.ResponseURLPost) bool { return strings.Contains(p.Text, "`"+sc.ID+"` every day at") })
	e.slack.SlashCommand("C1", "U1", "/llmbot", "schedule delete "+sc.ID)
	e.lastPrivate(t, "the deletion", "U1", func(p fakeslack.ResponseURLPost) bool { return strings.Contains(p.Text, "Deleted `"+sc.ID+"`") })
	if got := len(scheduledRuns(e.slack, sc)); got != 1 {
		t.Errorf("%d runs, want 1", got)
	}
}

// TestReplicasRunAScheduledPromptOnce: two replicas sharing a real redis-server both find an
// occurrence due as they start; it runs once between them.
func TestReplicasRunAScheduledPromptOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := state.NewRedis(ctx, srv.URL(), "llmbot:"+stateOwnerForTests+":T1:", "seed", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	sc := seedMissedOccurrence(t, r.Records(), "Status of the release?")
	_ = r.Close()

	rs := newReplicaSet(t, "REDIS_URL="+srv.URL())
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("On track.") })
	a, b := rs.start(), rs.start()
	// Each replica ticks as it starts: once both have ticked, the occurrence was due for both.
	waittest.Eventually(t, 30*time.Second, "the occurrence's answer, and both replicas past their first tick", func() bool {
		runs := scheduledRuns(rs.fs, sc)
		return len(runs) > 0 && strings.Contains(rs.answer(runs[0].TS), "On track.") &&
			strings.Contains(a.logs.String(), "schedule: ticked") && strings.Contains(b.logs.String(), "schedule: ticked")
	})
	if got := strings.Count(a.logs.String()+b.logs.String(), "schedule: run started"); got != 1 {
		t.Errorf("%d replicas started the run, want 1", got)
	}
	if got := len(scheduledRuns(rs.fs, sc)); got != 1 {
		t.Fatalf("%d runs of the occurrence, want 1", got)
	}
	if got := len(rs.fl.ChatRequests()); got != 1 {
		t.Errorf("%d chat requests, want 1", got)
	}
}

// TestE2EScheduledSummary: a summary schedule ("summarize 2d") whose occurrence passed while the bot
// was down runs when it comes back: /summarize's machinery reads the channel's last two days (not
// what is older), and the summary is posted publicly in the channel as a summary, naming the schedule
// and its creator.
func TestE2EScheduledSummary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, err := state.NewMemory("previous-life", filepath.Join(dir, stateOwnerForTests+"-T1"), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	sc := seedMissedOccurrence(t, m.Records(), "summarize 2d")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	fs := newE2ESlack(fakeslack.Config{})
	for _, p := range []struct {
		text string
		ago  time.Duration
	}{{"the old plan was Tuesday", 3 * 24 * time.Hour}, {"we shipped the release", 5 * time.Hour}} {
		fs.Post(fakeslack.UserMessage{Channel: "C1", User: "U2", Text: p.text, Time: time.Now().Add(-p.ago)})
	}
	// The occurrence may run as the bot starts: the fake model's default answer is the summary.
	e := startE2EOn(t, fs, map[string]string{"STATE_DIR": dir})
	var post fakeslack.Message
	e.waitFor(t, "the scheduled summary", func() bool {
		for _, m := range e.slack.Messages("C1") {
			if m.BotID != "" && strings.HasPrefix(m.Text, schedule.SummaryHeader(sc)) {
				post = m
				return true
			}
		}
		return false
	})
	if !strings.Contains(post.Text, "Summary of the last 2 days in this channel") || !strings.Contains(post.Text, "Hello from the fake LLM.") ||
		markOf(t, post).Kind != convo.MarkSummary || post.ThreadTS != "" && post.ThreadTS != post.TS {
		t.Errorf("post %q (mark %+v, thread %q): want the summary, top level, marked a summary", post.Text, markOf(t, post), post.ThreadTS)
	}
	reqs := e.llm.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests, want 1", len(reqs))
	}
	if tr := reqs[0].Messages[len(reqs[0].Messages)-1].Content; !strings.Contains(tr, "we shipped the release") || strings.Contains(tr, "old plan") {
		t.Errorf("the model read %q: want the last two days only", tr)
	}
}
