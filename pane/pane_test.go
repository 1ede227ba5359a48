package pane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/pace"
)

// statusPane is an Assistant that records statuses and answers them with err.
type statusPane struct {
	mu       sync.Mutex
	statuses []string // channel/thread of each SetStatus call
	texts    []string // the status of each call
	err      error
	titles   int   // SetTitle calls
	titleErr error // what SetTitle answers
}

func (p *statusPane) SetSuggestedPrompts(context.Context, string, string, []Prompt) error { return nil }
func (p *statusPane) SetTitle(context.Context, string, string, string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.titles++
	return p.titleErr
}

func (p *statusPane) SetStatus(_ context.Context, channel, threadTS, status string, _ []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statuses = append(p.statuses, channel+"/"+threadTS)
	p.texts = append(p.texts, status)
	return p.err
}

// TestShowQueued: a question waiting for a place shows its place under its thread, with the thinking
// status's budget and refusals: a refusal is remembered (the next question does not ask again), a
// failed call is not; with no token at once, no pane or no thread nothing is asked, and the caller
// is told it was not shown.
func TestShowQueued(t *testing.T) {
	const thread = "1700000000.000001"
	for _, tc := range []struct {
		name     string
		place    int
		threadTS string
		noPane   bool
		noToken  bool
		err      error
		want     bool
		texts    []string // the statuses set by two questions in turn
	}{
		{name: "next in line", place: 1, threadTS: thread, want: true,
			texts: []string{"is waiting: next in line", "is waiting: next in line"}},
		{name: "one ahead", place: 2, threadTS: thread, want: true,
			texts: []string{"is waiting: 1 question ahead of yours", "is waiting: 1 question ahead of yours"}},
		{name: "three ahead", place: 4, threadTS: thread, want: true,
			texts: []string{"is waiting: 3 questions ahead of yours", "is waiting: 3 questions ahead of yours"}},
		{name: "refused: remembered", place: 1, threadTS: thread, err: slack.SlackErrorResponse{Err: "not_allowed"},
			texts: []string{"is waiting: next in line"}},
		{name: "failed: tried again", place: 1, threadTS: thread, err: errors.New("connection reset"),
			texts: []string{"is waiting: next in line", "is waiting: next in line"}},
		{name: "no token at once", place: 1, threadTS: thread, noToken: true},
		{name: "no thread", place: 1},
		{name: "no pane", place: 1, threadTS: thread, noPane: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pane := &statusPane{err: tc.err}
				var slackPane Assistant = pane
				if tc.noPane {
					slackPane = nil
				}
				statuses := pace.NewBucket(1, 2)
				if tc.noToken {
					statuses.TryTake()
					statuses.TryTake()
				}
				r := New(slackPane, statuses, zap.NewNop())
				for i := range 2 {
					if got := r.ShowQueued(t.Context(), "C1", tc.threadTS, tc.place); got != tc.want {
						t.Errorf("question %d: shown %v, want %v", i+1, got, tc.want)
					}
				}
				if !slices.Equal(pane.texts, tc.texts) {
					t.Errorf("statuses %q, want %q", pane.texts, tc.texts)
				}
			})
		})
	}
}

// TestClearQueued: a waiting status is taken down (an empty status) from the thread it was shown in.
func TestClearQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pane := &statusPane{}
		r := New(pane, nil, zap.NewNop())
		r.ClearQueued(t.Context(), "C1", "1700000000.000001")
		if !slices.Equal(pane.statuses, []string{"C1/1700000000.000001"}) || !slices.Equal(pane.texts, []string{""}) {
			t.Errorf("calls %v with statuses %q, want one empty status in C1/1700000000.000001", pane.statuses, pane.texts)
		}
	})
}

// TestTitlesPaced: a burst of new threads titles as many as the titles' budget has at once (Slack's
// Tier 4 draws 429s beyond its burst), the rest as tokens come back; a 429 pauses every title.
func TestTitlesPaced(t *testing.T) {
	for _, tc := range []struct {
		name      string
		titleErr  error
		wantCalls int // SetTitle calls for 30 threads at once, then one more 30 s later
	}{
		{"a burst", nil, gateway.TitleBurst + 1},
		{"a 429 pauses the titles", &slack.RateLimitedError{RetryAfter: time.Minute}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sp := &statusPane{titleErr: tc.titleErr}
				p := New(sp, pace.NewBucket(1000, 100), zap.NewNop())
				for i := range 30 {
					p.Thinking(t.Context(), "D1", fmt.Sprintf("1700000000.%06d", i), "How do token buckets refill?")
				}
				time.Sleep(30 * time.Second)
				p.Thinking(t.Context(), "D1", "1700000001.000000", "And leak?")
				if sp.titles != tc.wantCalls {
					t.Errorf("setTitle calls = %d, want %d", sp.titles, tc.wantCalls)
				}
			})
		})
	}
}

// TestToolRunning: the tool status names the tool (sanitized and cut: the name is an MCP server's),
// is taken down by what it returns even once the answer's context ended, and follows the statuses'
// rules: a refusal is remembered, no token at once sets nothing (and nothing is taken down).
func TestToolRunning(t *testing.T) {
	const thread = "1700000000.000001"
	long := strings.Repeat("x", 60)
	for _, tc := range []struct {
		name     string
		tool     string
		threadTS string
		err      error
		noToken  bool
		texts    []string // statuses of two calls in turn, each taken down
		outcomes []string
	}{
		{name: "shown and taken down", tool: "srv__lookup_order", threadTS: thread,
			texts:    []string{"is running srv__lookup_order…", "", "is running srv__lookup_order…", ""},
			outcomes: []string{ToolStatusShown, ToolStatusShown}},
		{name: "sanitized", tool: "<!channel>\nlookup*", threadTS: thread,
			texts:    []string{"is running channellookup…", "", "is running channellookup…", ""},
			outcomes: []string{ToolStatusShown, ToolStatusShown}},
		{name: "cut", tool: long, threadTS: thread,
			texts:    []string{"is running " + long[:toolNameLimit] + "…", "", "is running " + long[:toolNameLimit] + "…", ""},
			outcomes: []string{ToolStatusShown, ToolStatusShown}},
		{name: "refused: remembered", tool: "lookup", threadTS: thread, err: slack.SlackErrorResponse{Err: "not_allowed"},
			texts: []string{"is running lookup…"}, outcomes: []string{ToolStatusFailed, ToolStatusSkipped}},
		{name: "no token at once", tool: "lookup", threadTS: thread, noToken: true,
			outcomes: []string{ToolStatusSkipped, ToolStatusSkipped}},
		{name: "no thread", tool: "lookup"},
		{name: "no name left", tool: "<>", threadTS: thread},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sp := &statusPane{err: tc.err}
				statuses := pace.NewBucket(1000, 100)
				if tc.noToken {
					for statuses.TryTake() {
					}
				}
				p := New(sp, statuses, zap.NewNop())
				var outcomes []string
				p.OnToolStatus(func(o string) { outcomes = append(outcomes, o) })
				for range 2 {
					ctx, cancel := context.WithCancel(t.Context())
					done := p.ToolRunning(ctx, "C1", tc.threadTS, tc.tool)
					cancel() // stopped while the tool ran: the status still goes
					done()
				}
				if !slices.Equal(sp.texts, tc.texts) {
					t.Errorf("statuses %q, want %q", sp.texts, tc.texts)
				}
				if !slices.Equal(outcomes, tc.outcomes) {
					t.Errorf("outcomes %q, want %q", outcomes, tc.outcomes)
				}
			})
		})
	}
}

// TestToolRunningOwnBudget: an answer calling tool after tool takes at most the tool statuses' own
// burst, leaving the statuses' budget to the other threads' "is thinking…".
func TestToolRunningOwnBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sp := &statusPane{}
		p := New(sp, pace.NewBucket(1000, 100), zap.NewNop())
		for range 3 * toolStatusBurst {
			p.ToolRunning(t.Context(), "C1", "1700000000.000001", "lookup")()
		}
		if n := len(sp.texts); n != 2*toolStatusBurst {
			t.Errorf("%d status calls, want %d (a burst of tool statuses, each taken down)", n, 2*toolStatusBurst)
		}
		if !p.Thinking(t.Context(), "C1", "1700000000.000002", "") {
			t.Error("no thinking status after the tool statuses' burst")
		}
	})
}
