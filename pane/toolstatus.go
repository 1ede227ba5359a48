package pane

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
)

// The tool status line: "is running lookup_order…" under an answer's thread while one of its tool
// calls runs (an answer written by editing: a native stream shows task cards instead).
const (
	toolStatusFormat = "is running %s…"
	// toolNameLimit is how much of a tool's name the status shows: the name comes from an MCP
	// server, which may list anything.
	toolNameLimit = 40
	// toolStatusesPerMinute and toolStatusBurst are the tool statuses' own budget, on top of the
	// statuses' (Budgets.Statuses): an answer calling tool after tool must not take the tokens of
	// the other threads' "is thinking…".
	toolStatusesPerMinute = 30
	toolStatusBurst       = 5
)

// The outcomes a tool status is counted by (OnToolStatus).
const (
	ToolStatusShown   = "shown"   // set, and later taken down
	ToolStatusSkipped = "skipped" // no token at once, or statuses refused lately: nothing asked
	ToolStatusFailed  = "failed"  // Slack did not take it
)

// OnToolStatus makes f hear each tool status's outcome (ToolStatus*: metrics). Call it before the
// answers start; f must not block.
func (p *Pane) OnToolStatus(f func(outcome string)) {
	if p != nil {
		p.toolObserve = f
	}
}

// ToolRunning shows "is running <tool>…" as the status line of channel's thread threadTS while a
// tool call runs, and returns what takes it down again (call it when the call ends: the answer
// then goes on, and its edits do not clear a status as a posted message does). It needs the pane
// (the app is an agent) and a thread; it is set only when a token of its own budget and of the
// statuses' is there at once and statuses were not refused lately (a refusal is remembered as the
// other statuses' are). It is a courtesy: a failure is logged, never the answer's. The returned
// func waits for a statuses turn (within paneTimeout, even when ctx was cancelled: a Stop must not
// leave "is running" behind); when the status was not set it does nothing.
func (p *Pane) ToolRunning(ctx context.Context, channel, threadTS, tool string) (done func()) {
	done = func() {}
	name := toolName(tool)
	if !p.On() || threadTS == "" || name == "" {
		return done
	}
	log := p.log.With(zap.String("channel", channel), zap.String("thread_ts", threadTS), zap.String("tool", name))
	if !p.refused.Allowed() || !p.tools.TryTake() || !p.statuses.TryTake() {
		p.observeTool(ToolStatusSkipped)
		return done
	}
	sctx, cancel := context.WithTimeout(ctx, paneTimeout)
	defer cancel()
	if err := p.setStatus(sctx, channel, threadTS, fmt.Sprintf(toolStatusFormat, name), nil); err != nil {
		log.Info("no tool status", zap.Error(err))
		p.observeTool(ToolStatusFailed)
		return done
	}
	p.observeTool(ToolStatusShown)
	return func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), paneTimeout)
		defer cancel()
		err := gateway.BucketTurn(p.statuses).Wait(cctx)
		if err == nil {
			err = p.setStatus(cctx, channel, threadTS, "", nil)
		}
		if err != nil {
			log.Info("tool status not cleared (Slack drops it after two minutes)", zap.Error(err))
		}
	}
}

func (p *Pane) observeTool(outcome string) {
	if p.toolObserve != nil {
		p.toolObserve(outcome)
	}
}

// toolName is a tool's name as a status shows it: letters, digits and "_-." only (an MCP name has
// no others; anything else a server lists, mentions and line breaks included, is dropped), cut to
// toolNameLimit characters.
func toolName(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_-.", r) {
			return r
		}
		return -1
	}, s)
	if r := []rune(s); len(r) > toolNameLimit {
		return string(r[:toolNameLimit]) // the status's own "…" follows
	}
	return s
}
