package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// TestE2EShutdownManyAnswersUnderSlackLimits: 16 answers are in flight when SIGTERM comes, more
// than Slack's chat.update limit (50 a minute, burst 5) lets the bot close in the 2 s it keeps for
// closing. run still returns nil within the grace period, and no answer is left as a bare
// placeholder or as partial text without a note that it was interrupted: each is closed by its
// final edit, or its placeholder is deleted (or it never posted one) and the asker told privately,
// or a note follows its partial text in the thread.
func TestE2EShutdownManyAnswersUnderSlackLimits(t *testing.T) {
	t.Parallel()
	const n = 16
	const grace = 4 * time.Second
	// Slack publishes its tiers' rates, not their bursts; bursts of 20 here, except chat.update
	// which keeps the bot's own budget's burst of 5.
	limits := fakeslack.SlackLimits(20)
	limits.Methods["chat.update"] = fakeslack.Limit{PerMinute: 50, Burst: 5}
	e := startE2E(t, fakeslack.Config{Limits: limits}, map[string]string{"SHUTDOWN_GRACE": grace.String()})
	long := strings.Repeat(answer+" ", 30)
	e.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "think") {
			return fakellm.Text(long).Paced(time.Minute, 50*time.Millisecond) // no text before shutdown
		}
		return fakellm.Text(long).Paced(50*time.Millisecond, 50*time.Millisecond)
	})
	channels, threads := make([]string, n), make([]string, n)
	for i := range n {
		q := "<@UBOT> tell me"
		if i%2 == 1 {
			q = "<@UBOT> think hard"
		}
		channels[i] = fmt.Sprintf("C%02d", i)
		threads[i] = e.slack.PostUserMessage(channels[i], "U1", "", q)
	}
	shown := func() int { // answers showing text (not the placeholder)
		k := 0
		for i := range n {
			if r := e.botReplies(channels[i], threads[i]); len(r) > 0 && !strings.Contains(r[0], "Thinking") {
				k++
			}
		}
		return k
	}
	// Each asker sees a sign of life: the "is thinking…" status of the thread or, where there is
	// none, a placeholder (under this load an answer whose status shows posts no placeholder).
	e.waitFor(t, "a sign of life in every thread and some answer text", func() bool {
		for i := range n {
			if len(e.botReplies(channels[i], threads[i])) == 0 && e.slack.Status(channels[i], threads[i]) == "" {
				return false
			}
		}
		return shown() >= 3
	})
	t.Logf("%d of %d answers show text at SIGTERM", shown(), n)

	begin := time.Now()
	if err := e.stop(t); err != nil {
		t.Errorf("run returned %v after SIGTERM, want nil (exit 0)", err)
	}
	if took := time.Since(begin); took > grace+3*time.Second { // the grace period and a loaded machine
		t.Errorf("shutdown took %v with a %v grace period", took, grace)
	}

	told := map[string]int{} // channel/thread -> private "please ask again" notes
	for _, m := range e.slack.Ephemerals() {
		if m.User == "U1" && strings.Contains(m.Text, "ask again") {
			told[m.Channel+"/"+m.ThreadTS]++
		}
	}
	var edited, withdrawn, noted int
	for i := range n {
		msgs := e.slack.BotReplies(channels[i], threads[i])
		if len(msgs) == 0 {
			if told[channels[i]+"/"+threads[i]] != 1 {
				t.Errorf("answer %d: placeholder deleted but the asker was told %d times", i, told[channels[i]+"/"+threads[i]])
			}
			withdrawn++
			continue
		}
		last := msgs[len(msgs)-1]
		mark := markOf(t, last)
		switch {
		case strings.Contains(msgs[0].Text, "Thinking"):
			t.Errorf("answer %d: left as a bare placeholder: %q", i, msgs[0].Text)
		case len(msgs) >= 2 && mark.Kind == convo.MarkNotice && strings.Contains(last.Text, "The answer above was interrupted"):
			noted++
		case strings.Contains(last.Text, "Interrupted") && mark.Note != "":
			edited++
		default:
			t.Errorf("answer %d: partial text without a note: %q (mark %+v)", i, last.Text, mark)
		}
	}
	t.Logf("closed by edit %d, withdrawn %d, note in thread %d; 429s: chat.update %d, chat.delete %d, chat.postEphemeral %d",
		edited, withdrawn, noted, e.slack.Count429("chat.update"), e.slack.Count429("chat.delete"), e.slack.Count429("chat.postEphemeral"))
	if withdrawn == 0 {
		t.Errorf("no answer was withdrawn: the thinking answers should have been")
	}
}
