package approvals

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/toolinfo"
)

// ActionToolShowApproval is the public line's button that shows the prompt again to whoever may
// decide (an ephemeral vanishes when Slack is reloaded).
const ActionToolShowApproval = "llmbot_tool_show_approval"

// verdictShow is what VerdictOf says of ActionToolShowApproval: no verdict, a request for the prompt.
const verdictShow = "show"

// Ephemerals show a prompt to one person and replace the one they clicked (*bot.ApprovalSlack).
type Ephemerals interface {
	PostEphemeral(ctx context.Context, channel, user, threadTS string, m gateway.Msg) error
	RespondPrivate(ctx context.Context, responseURL string, m gateway.Private) error
}

// showTimeout bounds the post of a private prompt, and the replacement of a clicked one.
const showTimeout = 10 * time.Second

// private reports whether calls' prompt is shown privately: Ephemerals are wired and not every
// call's arguments are public (MCP_CONFIG public_arguments).
func (p *Approvals) private(calls []toolinfo.Call) bool {
	if p.opt.Private == nil {
		return false
	}
	for _, c := range calls {
		if !c.PublicArguments {
			return true
		}
	}
	return false
}

// shower is how the prompt (text, with the decision buttons bs) is shown to one person: an
// ephemeral in the answer's thread, in the answer's chat.postEphemeral budget, until ctx ends (the
// wait for the click: a Stop does not wait for the posts).
func (p *Approvals) shower(ctx context.Context, w *gateway.Writer, q toolinfo.Approval, text string, bs []gateway.Button, log *zap.Logger) func(user string) {
	turn := gateway.Turn{Wait: func(context.Context) error { return nil }, Throttled: func(time.Duration) {}}
	if w.Budgets.Ephemerals != nil {
		turn = gateway.BucketTurn(w.Budgets.Ephemerals)
	}
	return func(user string) {
		sctx, cancel := context.WithTimeout(ctx, showTimeout)
		defer cancel()
		err := w.Do(sctx, gateway.InterimRetry, nil, turn, func(ctx context.Context) error {
			return p.opt.Private.PostEphemeral(ctx, q.Channel, user, q.Thread, gateway.Msg{Text: text, Buttons: bs})
		})
		if err != nil {
			log.Warn("tool approval prompt not shown", zap.String("user", user), zap.Error(err))
		}
	}
}

// maxShows bounds the Show approval clicks of one prompt shown at a time (more are dropped: the
// clicker clicks again).
const maxShows = 4

// shows are a prompt's Show approval posts in progress: at most maxShows, and none once stopped
// (the prompt decided), which waits for them. A nil *shows (a public prompt) shows nothing.
type shows struct {
	mu      sync.Mutex
	stopped bool
	wg      sync.WaitGroup
	slots   chan struct{}
}

func newShows() *shows { return &shows{slots: make(chan struct{}, maxShows)} }

// start shows the prompt to user through show in its own goroutine, unless maxShows are in
// progress or the prompt is decided.
func (s *shows) start(show func(string), user string, log *zap.Logger) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	select {
	case s.slots <- struct{}{}:
	default:
		log.Debug("tool approval prompt not shown again: enough in progress", zap.String("user", user))
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slots }()
		show(user)
	}()
}

// first shows the prompt to whom it concerns at once (showFirst), in its own goroutine.
func (s *shows) first(show func(string), asker string, approvers []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		showFirst(show, asker, approvers)
	}()
}

// stop starts no more posts and waits for those in progress (their context ended).
func (s *shows) stop() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.wg.Wait()
}

// showFirst shows the private prompt to whom it concerns at once: the asker, or each approver
// named by id (a user group's members are not shown it one by one: they use Show approval).
func showFirst(show func(string), asker string, approvers []string) {
	if len(approvers) == 0 {
		show(asker)
		return
	}
	for _, id := range approvers {
		if !strings.HasPrefix(id, "S") {
			show(id)
		}
	}
}

// waitingLine is the public line while the prompt is private: who must approve, which tools, not
// the arguments, and how to get the prompt again.
func waitingLine(asker string, approvers []string, calls []toolinfo.Call) string {
	who := "<@" + asker + ">"
	if len(approvers) > 0 {
		who = mentions(approvers)
	}
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = fmt.Sprintf("`%s` (%s)", safeName(c.Name), safeName(c.Server))
	}
	return fmt.Sprintf("_Waiting for %s to approve %s. The arguments are shown to them alone; "+
		"lost the prompt? *Show approval* sends it again._", who, strings.Join(names, ", "))
}

// Chose replaces the private prompt that was clicked (through the click's response_url) with the
// choice made, so that it keeps no buttons; the thread's line says what became of it. Best effort.
func (p *Approvals) Chose(ref ApprovalRef, responseURL, action string) {
	v := toolinfo.Verdict(VerdictOf(action))
	if !ref.Private || p.opt.Private == nil || responseURL == "" || v == "" || v == verdictShow {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), showTimeout)
	defer cancel()
	text := "Your answer to the tool approval: " + verdictLine(decision{v: v}, "") + " The thread says what became of it."
	if err := p.opt.Private.RespondPrivate(ctx, responseURL, gateway.Private{Text: text, ReplaceOriginal: true}); err != nil {
		p.log.Warn("private tool approval prompt not replaced", zap.Error(err))
	}
}

// settleLine rewrites the thread's message of an approval (the prompt, or the public line) with the
// outcome and without buttons (best effort, on a context that outlives a stop for q.Settle).
func settleLine(ctx context.Context, w *gateway.Writer, q toolinfo.Approval, ts, text string, log *zap.Logger) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.Settle)
	defer cancel()
	lane := w.EditLane()
	defer lane.Close()
	err := w.Update(uctx, gateway.InterimRetry, nil, w.EditTurn(lane, pace.Final, time.Now()), q.Channel, ts,
		gateway.Msg{Text: text, Mark: noticeMark, Buttons: []gateway.Button{}})
	if err != nil {
		log.Warn("tool approval prompt not updated", zap.Error(err))
	}
}
