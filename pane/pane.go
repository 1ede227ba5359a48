// Package pane is the agent pane use case: an app declared as an agent (features.agent_view) has
// Slack's split-pane DM. Opening it sends app_home_opened (tab "messages"): the bot shows its
// suggested prompts there (Pane.Handler). Each message a person writes there is its own thread
// root, answered in its thread (bot sets route.ReplyRequest.ThreadTS), so native streaming, the
// agent session and its Stop apply; the thread is titled from its first question and shows "is
// thinking…" with rotating loading messages until the answer's first words (Pane.Thinking, which
// the answers call). A question that waits for a place shows its place in line there
// (Pane.ShowQueued, which the bot's queue calls).
//
// It owns the assistant calls on a thread (assistant.threads.*, behind Assistant), the statuses'
// budget (gateway.Budgets.Statuses) and the memory of Slack's refusals that all of them share. It
// imports no other use case: the answers see it through an interface of their own.
package pane

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/ttlcache"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

// EventAppHomeOpened is the event Slack sends when a person opens the app (route.Event); its
// route.Request.Text is the tab ("messages": the agent pane).
const EventAppHomeOpened = "app_home_opened"

// FeatureAgentPane is what access rules and metrics call EventAppHomeOpened.
const FeatureAgentPane = "agent_pane"

// Assistant is Slack's assistant calls on a DM thread (assistant.threads.*).
type Assistant interface {
	// SetSuggestedPrompts shows prompts at the top of the DM (threadTS "") or of a thread.
	SetSuggestedPrompts(ctx context.Context, channel, threadTS string, prompts []Prompt) error
	// SetTitle titles a DM thread.
	SetTitle(ctx context.Context, channel, threadTS, title string) error
	// SetStatus shows status under the thread ("": none) with loading messages Slack rotates.
	SetStatus(ctx context.Context, channel, threadTS, status string, loading []string) error
}

// Prompt is a suggested prompt: its title, and the message it sends.
type Prompt struct {
	Title, Message string
}

// MaxPrompts is how many suggested prompts Slack shows.
const MaxPrompts = 4

// ParsePrompts reads SUGGESTED_PROMPTS: prompts separated by ";", each "Title=Message" or a message
// alone (its title is its beginning). At most MaxPrompts; empty items are skipped.
func ParsePrompts(s string) ([]Prompt, error) {
	var out []Prompt
	for item := range strings.SplitSeq(s, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		title, msg, ok := strings.Cut(item, "=")
		title, msg = strings.TrimSpace(title), strings.TrimSpace(msg)
		if !ok {
			title, msg = clip(item, promptTitleLimit), item
		}
		if title == "" || msg == "" {
			return nil, fmt.Errorf("prompt %q: want Title=Message", item)
		}
		out = append(out, Prompt{Title: clip(title, promptTitleLimit), Message: msg})
	}
	if len(out) > MaxPrompts {
		return nil, fmt.Errorf("%d prompts: Slack shows at most %d", len(out), MaxPrompts)
	}
	return out, nil
}

// DefaultPrompts are the suggested prompts when SUGGESTED_PROMPTS is unset.
const DefaultPrompts = "What can you do?=What can you help me with?;" +
	"Draft a message=Help me draft a short, friendly message to my team.;" +
	"Explain simply=Explain a tricky technical idea to me in plain words, with an example."

const (
	promptTitleLimit = 40
	titleLimit       = 60 // characters of a thread's title
	paneTimeout      = 3 * time.Second
	// promptsEvery: a person who opens the pane again within this gets no new call.
	promptsEvery = time.Hour
	// promptsShownSize bounds the people remembered as shown the prompts (within promptsEvery).
	promptsShownSize = 5000
	thinking         = "is thinking…"
)

// loadingMessages rotate under a thread while the model has not written yet.
var loadingMessages = []string{"Reading the conversation…", "Thinking…", "Putting the answer together…"}

// Pane is the agent pane: the suggested prompts (Handler), the thread titles and the assistant
// statuses under a thread ("is thinking…" for an answer, a waiting question's place in line), with
// the memory of Slack's refusals and the statuses' budget that they all share. The answers are given
// it (handlers.ReplyOptions.Pane) and the bot's queue shows places with it. A nil Pane, or one
// without Slack's calls, is off.
type Pane struct {
	pane     Assistant
	statuses *pace.Bucket    // assistant.threads.setStatus (Budgets.Statuses)
	titles   *pace.Bucket    // assistant.threads.setTitle, this process's
	refused  gateway.Refused // Slack refused statuses lately (the app is not an agent, or the place)
	log      *zap.Logger
	// tools is the tool statuses' own budget (ToolRunning), toolObserve hears their outcomes.
	tools       *pace.Bucket
	toolObserve func(outcome string)
}

// New returns the agent pane over Slack's calls a (nil: off), its statuses paced by statuses
// (Budgets.Statuses; nil: a budget of its own).
func New(a Assistant, statuses *pace.Bucket, log *zap.Logger) *Pane {
	if log == nil {
		log = zap.NewNop()
	}
	if statuses == nil {
		statuses = pace.NewBucket(gateway.StatusesPerMinute, gateway.StatusBurst)
	}
	titles := pace.NewBucket(gateway.TitlesPerMinute*pace.RateMargin, gateway.TitleBurst)
	tools := pace.NewBucket(toolStatusesPerMinute, toolStatusBurst)
	return &Pane{pane: a, statuses: statuses, titles: titles, log: log, tools: tools}
}

// On reports whether the agent pane is there: the app is declared as an agent.
func (p *Pane) On() bool { return p != nil && p.pane != nil }

// statusTurn reports whether a status may be set now: not refused lately, and a token at once.
func (p *Pane) statusTurn() bool { return p.refused.Allowed() && p.statuses.TryTake() }

// Handler serves app_home_opened: on the messages tab, the suggested prompts at the top of the
// person's DM with the bot, at most once per person per promptsEvery (on any other tab: nothing).
func (p *Pane) Handler(prompts []Prompt) route.Handler {
	shown := ttlcache.New[bool](promptsShownSize, promptsEvery)
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			if req.Text != "messages" || len(prompts) == 0 || !p.On() || req.Channel == "" {
				return route.Decision{}
			}
			if _, ok := shown.Get(req.User); ok {
				return route.Decision{}
			}
			shown.Put(req.User, true)
			return route.Decision{Run: true}
		},
		RunFunc: func(ctx context.Context, req *route.Request) error {
			ctx, cancel := context.WithTimeout(ctx, paneTimeout)
			defer cancel()
			if err := p.pane.SetSuggestedPrompts(ctx, req.Channel, "", prompts); err != nil {
				return fmt.Errorf("assistant.threads.setSuggestedPrompts: %w", err)
			}
			return nil
		},
	}
}

// Thinking titles the agent pane's thread from its first question (question; "": not titled), and
// shows "is thinking…" under the answer's thread: in the pane, and in channel threads, where Slack
// shows an agent's status too. It reports whether the status was set. The status is the answer's
// first sign of life: set at once, before the thread is read or the model asked, it costs none of
// the scarce budgets (its own, taken only when a token is there at once), and Slack clears it when
// the answer's first message is posted. Both are courtesies: a failure is logged, never the
// answer's; a refusal (the app is not an agent, a channel that does not allow it) stops the statuses
// for a while. It replaces the waiting status of a question that waited for a place (ShowQueued);
// when it cannot, the waiting status stays until Slack clears it with the answer's first message,
// which is no long wait.
func (p *Pane) Thinking(ctx context.Context, channel, threadTS, question string) bool {
	if !p.On() || threadTS == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, paneTimeout)
	defer cancel()
	log := p.log.With(zap.String("channel", channel), zap.String("thread_ts", threadTS))
	if title := threadTitle(question); title != "" {
		p.title(ctx, log, channel, threadTS, title)
	}
	if !p.statusTurn() {
		return false
	}
	if err := p.setStatus(ctx, channel, threadTS, thinking, loadingMessages); err != nil {
		log.Info("no thinking status", zap.Error(err))
		return false
	}
	return true
}

// title titles a thread when a token of the titles' budget is there at once (a title is not worth
// holding an answer's first sign of life for); a 429 pauses the budget.
func (p *Pane) title(ctx context.Context, log *zap.Logger, channel, threadTS, title string) {
	if !p.titles.TryTake() {
		log.Debug("agent pane: thread not titled: no assistant.threads.setTitle token at once")
		return
	}
	err := p.pane.SetTitle(ctx, channel, threadTS, title)
	if ra, limited := gateway.RateLimited(err); limited {
		p.titles.Throttled(ra)
	}
	if err != nil {
		log.Info("agent pane: thread not titled", zap.Error(err))
	}
}

// setStatus sets a thread's assistant status. A refusal is remembered: Slack refuses statuses for
// the app or the place, not for one call, so none is asked for again for a while.
func (p *Pane) setStatus(ctx context.Context, channel, threadTS, status string, loading []string) error {
	err := p.pane.SetStatus(ctx, channel, threadTS, status, loading)
	var refused slack.SlackErrorResponse
	if errors.As(err, &refused) {
		p.refused.Refuse(gateway.DefaultRefusal)
	}
	return err
}

// ShowQueued shows under a thread that its question waits for a place to be answered, place-th in
// line (1: next), as the thread's assistant status ("<App> is waiting: 2 questions ahead of yours"),
// under the thinking status's rules: its budget, a token only when one is free at once, and the
// memory of Slack's refusals. It reports whether the status was set; when not (no pane, no thread,
// no token, statuses refused lately, the call failed) the caller tells the asker another way.
// When the answer starts, Thinking replaces it with "is thinking…"; when that cannot be set, Slack
// clears the waiting status as the answer's first message is posted. Slack also drops a status by
// itself after two minutes without a message, so a longer wait loses its sign.
func (p *Pane) ShowQueued(ctx context.Context, channel, threadTS string, place int) bool {
	if !p.On() || threadTS == "" || place < 1 || !p.statusTurn() {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, paneTimeout)
	defer cancel()
	// No loading messages: Slack would rotate them in the status's place, and the place in line is
	// what the asker is waiting to read.
	if err := p.setStatus(ctx, channel, threadTS, waitingStatus(place), nil); err != nil {
		p.log.Info("no waiting status", zap.String("channel", channel), zap.String("thread_ts", threadTS), zap.Error(err))
		return false
	}
	return true
}

// ClearQueued takes a waiting status down (ShowQueued) from a thread where no answer will be posted
// to clear it (shutdown came first, or there was nothing to answer), so it does not promise an
// answer. It waits for a status token, bounded by ctx and paneTimeout; failing that, Slack drops the
// status after two minutes.
func (p *Pane) ClearQueued(ctx context.Context, channel, threadTS string) {
	if !p.On() || threadTS == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, paneTimeout)
	defer cancel()
	err := gateway.BucketTurn(p.statuses).Wait(ctx)
	if err == nil {
		err = p.setStatus(ctx, channel, threadTS, "", nil)
	}
	if err != nil {
		p.log.Info("waiting status not cleared", zap.String("channel", channel), zap.String("thread_ts", threadTS), zap.Error(err))
	}
}

// waitingStatus is the status under a question's thread while it waits for a place, place-th in
// line (1: next). Slack shows it after the app's name, so it reads as a short sentence.
func waitingStatus(place int) string {
	switch {
	case place <= 1:
		return "is waiting: next in line"
	case place == 2:
		return "is waiting: 1 question ahead of yours"
	}
	return fmt.Sprintf("is waiting: %d questions ahead of yours", place-1)
}

// slackToken is a Slack token in a message's text: <@U…>, <#C…|name>, <https://…|label>.
var slackToken = regexp.MustCompile(`<([^<>|]*)(?:\|([^<>]*))?>`)

// threadTitle is a thread's title from its first question: its first line, links and channels by
// their labels and mentions left out, cut to titleLimit characters.
func threadTitle(text string) string {
	text = slackToken.ReplaceAllStringFunc(text, func(tok string) string {
		m := slackToken.FindStringSubmatch(tok)
		switch {
		case m[2] != "":
			return m[2]
		case strings.HasPrefix(m[1], "@"), strings.HasPrefix(m[1], "!"), strings.HasPrefix(m[1], "#"):
			return ""
		}
		return m[1]
	})
	line, _, _ := strings.Cut(strings.TrimSpace(slackmd.StripControls(text)), "\n")
	line = strings.Join(strings.Fields(line), " ")
	if utf8.RuneCountInString(line) <= titleLimit {
		return line
	}
	return clip(line, titleLimit-1)
}

// clip cuts s to at most n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
