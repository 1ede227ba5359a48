package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/watch"
)

// longThreadResult is what one -long-thread run measured.
type longThreadResult struct {
	messages, contextTokens int
	textBytes               int   // of the thread's messages
	idleRSS, peakRSS        int64 // KB
	// The model's requests: the summary's and the answer's, their size (estimated tokens, as the
	// bot counts them), and what they carry.
	summaries, answers           int
	summaryTokens, answerTokens  int
	beginning, firstKept         bool   // the summary request has the parent / the first replies
	middleNote                   string // its note for the replies left out between
	summarised, newest, question bool   // the answer's request has the summary / the newest reply / the question
	// Times from the question: to the summary request, the answer request, the answer's final text.
	toSummary, toAnswerReq, toAnswer time.Duration
	replies                          repliesCalls
	followUp                         followUpResult
}

// followUpResult is a follow-up mention's answer in the same thread: how long it took, and the
// summary requests and conversations.replies calls it made.
type followUpResult struct {
	took             time.Duration
	summaries, calls int
}

// repliesCalls are the conversations.replies calls (each a page), reads (first pages) and 429s.
type repliesCalls struct{ calls, reads, limited int }

// Markers the fake model answers with and looks for.
const (
	longSummary  = "SUMMARY: the thread plans the migration of the billing database."
	longAnswer   = "ANSWER: on Friday, after the dry run."
	longQuestion = "[long] when do we ship the migration?"
)

// longMessage is message i of the thread (0: its parent), about 200 characters.
func longMessage(i int) string {
	if i == 0 {
		return "THREAD-START: we plan the migration of the billing database to the new cluster here."
	}
	return fmt.Sprintf("%s %s", longTag(i), strings.Repeat(fmt.Sprintf("detail %d of the plan, ", i%97), 7))
}

// longTag is how reply i begins.
func longTag(i int) string { return fmt.Sprintf("reply %04d:", i) }

// runLongThread puts a thread of n messages in the fake Slack (history from before the bot
// started: no events), starts the bot, mentions it once at the end of the thread and measures the
// answer: its requests' sizes against CONTEXT_TOKENS, whether the summary request got the
// thread's beginning, the times, the conversations.replies calls (Tier 3, enforced unless
// -read-limits=false) and the bot's RSS.
func runLongThread(ctx context.Context, set settings, n int) (*longThreadResult, error) {
	slack := fakeslack.New(fakeslack.Config{})
	defer slack.Close()
	slack.SetLimits(set.limits())
	model := fakellm.New()
	defer model.Close()
	res := &longThreadResult{messages: n, contextTokens: contextTokens(set.botEnv)}
	start := time.Now().Add(-time.Duration(n+1) * time.Second)
	parent := slack.Post(fakeslack.UserMessage{Channel: "C0001", User: "U0001", Text: longMessage(0), Time: start})
	res.textBytes = len(longMessage(0))
	for i := 1; i < n; i++ {
		text := longMessage(i)
		res.textBytes += len(text)
		slack.Post(fakeslack.UserMessage{Channel: "C0001", User: fmt.Sprintf("U%04d", 1+i%7), ThreadTS: parent, Text: text,
			Time: start.Add(time.Duration(i) * time.Second)})
	}
	var mu sync.Mutex
	var asked time.Time
	model.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		text, tokens := longRequest(r)
		// The requests, for a look with -keep.
		_ = os.WriteFile(filepath.Join(set.workDir, fmt.Sprintf("request-%d.txt", res.summaries+res.answers)), []byte(text), 0o600)
		if len(r.Messages) > 0 && strings.Contains(r.Messages[0].Content, "Write a summary") {
			if res.summaries++; res.summaries > 1 {
				res.summaryTokens = max(res.summaryTokens, tokens)
				return fakellm.Text(longSummary).Paced(set.firstToken, set.tokenInterval)
			}
			res.toSummary, res.summaryTokens = time.Since(asked), tokens
			res.beginning = strings.Contains(text, longMessage(0))
			res.firstKept = strings.Contains(text, longTag(1)) && strings.Contains(text, longTag(2))
			if i := strings.Index(text, " in between are left out]"); i >= 0 {
				res.middleNote = text[strings.LastIndex(text[:i], "[") : i+len(" in between are left out]")]
			}
			return fakellm.Text(longSummary).Paced(set.firstToken, set.tokenInterval)
		}
		if res.answers++; res.answers > 1 {
			res.answerTokens = max(res.answerTokens, tokens)
			return fakellm.Text(longAnswer).Paced(set.firstToken, set.tokenInterval)
		}
		res.toAnswerReq, res.answerTokens = time.Since(asked), tokens
		res.summarised = strings.Contains(text, longSummary)
		res.newest = strings.Contains(text, longTag(n-1))
		res.question = strings.Contains(text, longQuestion)
		return fakellm.Text(longAnswer).Paced(set.firstToken, set.tokenInterval)
	})
	env := append(fakesEnv(slack, model), "HOME="+set.workDir)
	env = append(env, set.botEnv...) // later entries win (os/exec keeps the last of a key)
	logPath := filepath.Join(set.workDir, fmt.Sprintf("bot-long-thread-%d.log", n))
	bot, err := startConnected(ctx, set.botPath, env, logPath, slack)
	if err != nil {
		return nil, err
	}
	defer bot.stop(10 * time.Second)
	if err := watch.Sleep(ctx, set.settle); err != nil {
		return nil, err
	}
	if res.idleRSS, err = memKB(bot.pid(), "VmRSS"); err != nil {
		return nil, err
	}
	mu.Lock()
	asked = time.Now()
	mu.Unlock()
	slack.PostUserMessage("C0001", "U0001", parent, "<@"+slack.Config().BotUserID+"> "+longQuestion)
	answered := func(n int) func() bool {
		return func() bool {
			k := 0
			for _, m := range slack.BotReplies("C0001", parent) {
				if strings.Contains(m.Text, longAnswer) {
					k++
				}
			}
			return k >= n || !bot.running()
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	waitErr := slack.WaitFor(wctx, answered(1))
	cancel()
	mu.Lock()
	res.toAnswer = time.Since(asked)
	mu.Unlock()
	if waitErr == nil {
		waitErr = followUp(ctx, slack, parent, &mu, res, answered(2))
	}
	for _, c := range slack.CallsTo("conversations.replies") {
		res.replies.calls++
		if c.Params.Get("cursor") == "" {
			res.replies.reads++
		}
		if c.Error == "ratelimited" {
			res.replies.limited++
		}
	}
	if !bot.running() {
		return res, fmt.Errorf("the bot exited during the run (log: %s)", logPath)
	}
	if res.peakRSS, err = memKB(bot.pid(), "VmHWM"); err != nil {
		return nil, err
	}
	if waitErr != nil {
		return res, fmt.Errorf("no answer in %v (log: %s): %w", res.toAnswer.Round(time.Second), logPath, waitErr)
	}
	return res, nil
}

// followUp asks a follow-up mention in the thread once the first answer's last writes have landed
// (3 s), and measures its answer (done: answered).
func followUp(ctx context.Context, slack *fakeslack.Server, parent string, mu *sync.Mutex, res *longThreadResult, done func() bool) error {
	if err := watch.Sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	calls := len(slack.CallsTo("conversations.replies"))
	mu.Lock()
	summaries := res.summaries
	mu.Unlock()
	asked := time.Now()
	slack.PostUserMessage("C0001", "U0002", parent, "<@"+slack.Config().BotUserID+"> [long] and who signs off?")
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := slack.WaitFor(wctx, done)
	mu.Lock()
	defer mu.Unlock()
	res.followUp = followUpResult{took: time.Since(asked), summaries: res.summaries - summaries,
		calls: len(slack.CallsTo("conversations.replies")) - calls}
	if err != nil {
		return fmt.Errorf("no answer to the follow-up: %w", err)
	}
	return nil
}

// longRequest is a chat request's text and its size as the bot estimates it.
func longRequest(r fakellm.ChatRequest) (string, int) {
	var b strings.Builder
	tokens := 0
	for _, m := range r.Messages {
		b.WriteString(m.Content + "\n")
		tokens += convo.EstimateTokens(m.Content)
	}
	return b.String(), tokens
}

// contextTokens is the bot's CONTEXT_TOKENS: from -bot-env, else its default.
func contextTokens(env []string) int {
	n := 12000
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "CONTEXT_TOKENS="); ok {
			if k, err := strconv.Atoi(v); err == nil {
				n = k
			}
		}
	}
	return n
}

// writeLongThread prints a -long-thread run's figures.
func writeLongThread(w io.Writer, r *longThreadResult) {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "**no**"
	}
	fmt.Fprintf(w, "| thread | CONTEXT_TOKENS | summary requests, the largest | answer requests (and the follow-up's), the largest | summary has the beginning | middle | answer has summary, newest, question |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---:|---|---|---|\n")
	fmt.Fprintf(w, "| %d messages (%d KB of text) | %d | %d, %d tokens | %d, %d tokens | parent %s, first replies %s | %s | %s, %s, %s |\n\n",
		r.messages, r.textBytes>>10, r.contextTokens, r.summaries, r.summaryTokens, r.answers, r.answerTokens,
		yes(r.beginning), yes(r.firstKept), r.middleNote, yes(r.summarised), yes(r.newest), yes(r.question))
	fmt.Fprintf(w, "| question → summary request | → answer request | → answer's text | conversations.replies calls (pages) / reads / 429s | follow-up: answer's text, summary requests, conversations.replies calls | RSS idle / peak MB |\n")
	fmt.Fprintf(w, "|---:|---:|---:|---|---|---|\n")
	fmt.Fprintf(w, "| %v | %v | %v | %d / %d / %d | %v, %d, %d | %.1f / %.1f |\n",
		r.toSummary.Round(10*time.Millisecond), r.toAnswerReq.Round(10*time.Millisecond), r.toAnswer.Round(10*time.Millisecond),
		r.replies.calls, r.replies.reads, r.replies.limited, r.followUp.took.Round(10*time.Millisecond), r.followUp.summaries,
		r.followUp.calls, float64(r.idleRSS)/1024, float64(r.peakRSS)/1024)
}
