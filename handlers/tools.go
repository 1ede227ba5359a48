package handlers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/toolinfo"
)

// Tools the model may use while it answers (MCP servers, package tools, behind the Tools interface:
// the handlers never see the protocol).
//
// An answer with tools is a loop of rounds (generate): each round streams the model's text into
// Slack like any answer, after the text of the rounds before it; when the round ends with tool calls,
// they are approved (or not: one prompt, through the Approver, for the calls that need a click), made,
// and their results go back to the model as tool messages, and the next round begins. The loop is
// bounded: at most ToolOptions.MaxCalls calls a round (the model is told the others were too many),
// and after ToolOptions.MaxRounds rounds with calls, or once the answer's approvals and calls have
// taken ToolOptions.MaxToolTime, the model is asked once more without tools, so it must answer.
//
// Only the asker's words are requests. A call runs without a click (its server's auto-approve list,
// or the asker's "Allow for this thread"; always for ask_user, Info.AsksAsker) only while the context is the asker's alone: Build's
// Result.Foreign is empty, and no tool result has come back yet in this answer. Anything else there
// (another person's message, an app's, a file, a forwarded message, a tool's result) may carry
// orders the asker never gave, so every call then waits for the asker's click.
//
// Tool output is data, not instructions: it reaches the model only inside the request's fence
// (convo.Fence, whose boundary the tool never saw), cut to ToolOptions.MaxResult bytes, and never
// reaches Slack; nor does a tool's error text, which goes to the model only. What Slack shows of a
// call is one short line per call in the answer (its name, and how it went), rendered like the
// answer's text (mention safety included).

// Tools lists and calls tools (package tools over MCP, fakes in tests).
type Tools interface {
	// List returns the tools channel may use now for the answer ctx's toolinfo.Asked names (none: no tools).
	List(ctx context.Context, channel string) []toolinfo.Info
	// Call calls the tool name (a toolinfo.Info.Name) with its JSON arguments and returns its output as
	// text. The error's text goes to the model (as data) and the log, never to Slack: it names no
	// secret, but a server may write anything in it.
	Call(ctx context.Context, name string, args json.RawMessage) (string, error)
}

// ToolOptions configure the tools of answers (ReplyOptions.Tools).
type ToolOptions struct {
	Tools           Tools         // nil: no tools
	MaxRounds       int           // rounds of calls per answer; default 5
	MaxCalls        int           // calls made per round; default 8 (the model is told the rest were too many)
	MaxToolTime     time.Duration // an answer's approvals and calls together; default 5 min; then it answers without tools
	ApprovalTimeout time.Duration // how long a round's calls wait for the asker's click; default 2 min; then denied
	CallTimeout     time.Duration // one call; default 60 s
	MaxResult       int           // bytes of a result given to the model; default 16 KiB
	// Observe, when set, hears every call's outcome (metrics). It must not block.
	Observe func(ToolEvent)
}

// ToolEvent is one call's outcome.
type ToolEvent struct {
	Server, Tool string
	// Outcome: "ok", "error" (the tool or its server failed), "denied", "timeout" (no click in
	// time), "invalid" (the model's call could not be made: unknown tool, bad arguments).
	Outcome  string
	Approval time.Duration // the wait for a click (0: none asked)
	Duration time.Duration // the call itself (0: not made)
}

// The defaults of ToolOptions.
const (
	DefaultMaxToolRounds   = 5
	DefaultMaxToolCalls    = 8
	DefaultMaxToolTime     = 5 * time.Minute
	DefaultApprovalTimeout = 2 * time.Minute
	DefaultToolCallTimeout = time.Minute
	DefaultMaxToolResult   = 16 << 10
)

func (o ToolOptions) withDefaults() ToolOptions {
	if o.MaxRounds <= 0 {
		o.MaxRounds = DefaultMaxToolRounds
	}
	if o.MaxCalls <= 0 {
		o.MaxCalls = DefaultMaxToolCalls
	}
	if o.MaxToolTime <= 0 {
		o.MaxToolTime = DefaultMaxToolTime
	}
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = DefaultApprovalTimeout
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultToolCallTimeout
	}
	if o.MaxResult <= 0 {
		o.MaxResult = DefaultMaxToolResult
	}
	return o
}

// round is one model request of an answer: its messages, the tools offered (nil: none), and the
// text Slack shows before this round's (the rounds before it and their calls' lines).
type round struct {
	msgs   []llm.Message
	tools  []llm.Tool
	prefix string
}

// roundResult is what a round's stream gave.
type roundResult struct {
	md, finish string
	calls      []llm.ToolCall
	err        error
}

// generate streams the answer: one round without tools when the channel has none, else the loop of
// rounds. It returns the whole answer text, the last finish reason and the stream's error.
func (a *generation) generate(ctx context.Context, res convo.Result, s roundSink) (string, string, error) {
	msgs := res.Messages
	var infos []toolinfo.Info
	if t := a.r.opt.Tools.Tools; t != nil {
		infos = t.List(toolinfo.WithAsked(ctx, a.asked()), a.req.Channel)
	}
	if len(infos) == 0 {
		r := a.streamRound(ctx, round{msgs: msgs}, s)
		return r.md, r.finish, r.err
	}
	st := &toolState{fence: res.Fence, foreign: res.Foreign, tools: make(map[string]toolinfo.Info, len(infos)),
		left: a.r.opt.Tools.MaxToolTime}
	offer := make([]llm.Tool, len(infos))
	for i, in := range infos {
		st.tools[in.Name], offer[i] = in, in.Tool
	}
	prefix := ""
	for n := 0; ; n++ {
		rd := round{msgs: msgs, tools: offer, prefix: separated(prefix)}
		if n >= a.r.opt.Tools.MaxRounds || st.left <= 0 {
			rd.tools = nil // enough: the model answers with what it has
		}
		r := a.streamRound(ctx, rd, s)
		if lastRound(ctx, rd, r) {
			return rd.prefix + r.md, r.finish, r.err
		}
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: r.md, ToolCalls: r.calls})
		prefix = rd.prefix + r.md
		begin := time.Now()
		for _, c := range a.useTools(ctx, st, r.calls, prefix, s) {
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: c.call.ID, Content: c.result})
			prefix = joinShown(prefix, c.line)
		}
		st.left -= time.Since(begin)
		if ctx.Err() != nil {
			return prefix, "", nil // stopped or shut down while a call ran: outcome says so
		}
	}
}

// toolState is what the rounds of one answer share.
type toolState struct {
	fence convo.Fence // the request's: tool results go in it
	// foreign says what the context holds besides the asker's words ("" while nothing): then no
	// call runs without a click. The first tool result sets it for the rest of the answer.
	foreign string
	tools   map[string]toolinfo.Info // by name, what the model was offered
	left    time.Duration            // of ToolOptions.MaxToolTime
}

// foreignResult is what a tool's result makes the context hold (toolState.foreign).
const foreignResult = "a tool's result"

// toolCall is one call of a round and what became of it.
type toolCall struct {
	call    llm.ToolCall
	info    toolinfo.Info
	args    []byte
	ev      ToolEvent
	decided bool   // not to be made: result and line say why
	ask     bool   // it needs the asker's click
	result  string // what goes back to the model
	line    string // what the answer shows of it ("" for a call the model could not make)
}

// joinShown puts the next block of an answer's text under what Slack shows, a blank line apart.
// What an answer shows only grows (a native stream cannot take text back): the text before is kept
// as it is.
func joinShown(shown, next string) string {
	if strings.TrimSpace(next) == "" {
		return shown
	}
	return separated(shown) + strings.TrimSpace(next)
}

// separated is shown ready for a block under it: ending in a blank line (appended, never trimmed).
func separated(shown string) string {
	switch {
	case shown == "" || strings.HasSuffix(shown, "\n\n"):
		return shown
	case strings.HasSuffix(shown, "\n"):
		return shown + "\n"
	}
	return shown + "\n\n"
}

// useTools carries out a round's calls: checks them, asks the asker once for those that need a
// click, makes the allowed ones one after another, and returns each call's result and line, in the
// calls' order. The round's approvals and calls end when the answer's tool time does.
func (a *generation) useTools(ctx context.Context, st *toolState, calls []llm.ToolCall, shown string, s roundSink) []toolCall {
	tctx, cancel := context.WithTimeout(ctx, st.left)
	defer cancel()
	cs := make([]toolCall, len(calls))
	var ask []*toolCall
	for i, call := range calls {
		cs[i] = a.checkCall(st, call, i)
		if cs[i].ask {
			ask = append(ask, &cs[i])
		}
	}
	if len(ask) > 0 {
		a.askFor(tctx, st, ask, shown, s)
	}
	for i := range cs {
		c := &cs[i]
		if !c.decided {
			a.callTool(ctx, tctx, st, c, shown, s)
		}
		shown = joinShown(shown, c.line)
		a.r.observeTool(c.ev)
	}
	return cs
}

// checkCall decides what it can of call (the index-th of its round) before anyone is asked: a call
// the model cannot make (too many, unknown, bad arguments) is answered at once, and a call needs a
// click unless the context is the asker's alone and its tool is auto-approved or granted (for the
// thread, or always) and has no approvers (whose say no grant of the asker's replaces).
func (a *generation) checkCall(st *toolState, call llm.ToolCall, index int) toolCall {
	info, ok := st.tools[call.Name]
	c := toolCall{call: call, info: info, ev: ToolEvent{Server: info.Server, Tool: call.Name}}
	c.args = bytes.TrimSpace([]byte(call.Arguments))
	if len(c.args) == 0 {
		c.args = []byte("{}")
	}
	var why string
	switch {
	case index >= a.r.opt.Tools.MaxCalls:
		why = fmt.Sprintf("too many tool calls in one round (at most %d); call it again in the next round if you still need it", a.r.opt.Tools.MaxCalls)
	case !ok:
		why = "there is no tool of that name"
	case !json.Valid(c.args):
		why = "the arguments are not valid JSON; call it again with a JSON object"
	}
	if why != "" {
		c.decided, c.ev.Outcome, c.result = true, "invalid", toolError(call.Name, why)
		return c
	}
	c.ask = !info.AsksAsker && (st.foreign != "" || !info.AutoApprove && (len(info.Approvers) > 0 || !a.r.approvals.ThreadAllowed(a.req.Channel, a.threadTS, a.req.User, call.Name)))
	return c
}

// askFor asks the asker once about the calls in ask, and decides them all by the answer.
func (a *generation) askFor(ctx context.Context, st *toolState, ask []*toolCall, shown string, s roundSink) {
	names := make([]string, len(ask))
	tasks := make([]gateway.Task, len(ask))
	for i, c := range ask {
		names[i] = fmt.Sprintf("`%s` (%s)", c.call.Name, c.info.Server)
		tasks[i] = callTask(c)
	}
	a.status(ctx, s, shown, fmt.Sprintf(textToolAsking, strings.Join(names, ", ")), tasks, detailAsking)
	begin := time.Now()
	v := a.host.approve(ctx, ask, st.foreign)
	waited := time.Since(begin)
	for _, c := range ask {
		c.ev.Approval = waited
		if !v.Allowed() { // a standing grant (thread, always) the Approver keeps itself
			c.decided, c.ev.Outcome = true, string(v)
			c.result = toolError(c.call.Name, deniedReason(v))
			c.line = fmt.Sprintf(textToolNotAllowed, c.call.Name, deniedReason(v))
			a.toolDone(ctx, s, callTask(c), c.ev.Outcome)
		}
	}
	a.log.Info("tool calls asked for", zap.Int("calls", len(ask)), zap.String("verdict", string(v)),
		zap.Duration("waited", waited))
}

// callTask is a call's task card in a native stream.
func callTask(c *toolCall) gateway.Task {
	return gateway.Task{ID: "tool_" + c.call.ID, Title: fmt.Sprintf(titleTool, c.call.Name, c.info.Server)}
}

// callTool makes the allowed call c within tctx (the answer's tool time; ctx is the answer's). Its
// result, or its error's text, goes back to the model fenced as data, and from then on the context
// is not the asker's alone. People see only that the call was made, or that it failed.
func (a *generation) callTool(ctx, tctx context.Context, st *toolState, c *toolCall, shown string, s roundSink) {
	log := a.log.With(zap.String("tool", c.call.Name), zap.String("server", c.info.Server))
	task := callTask(c)
	defer func() { a.toolDone(ctx, s, task, c.ev.Outcome) }()
	a.status(ctx, s, shown, fmt.Sprintf(textToolRunning, c.call.Name, c.info.Server), []gateway.Task{task}, "")
	if p := a.r.opt.Pane; p != nil && s.mode() == ModeEdit && !c.info.AsksAsker { // after the line, whose post clears it; a stream shows a task card
		defer p.ToolRunning(ctx, a.req.Channel, a.threadTS, c.call.Name)()
	}
	cctx, cancel := context.WithTimeout(tctx, c.info.Limit(a.r.opt.Tools.CallTimeout, a.r.opt.Tools.ApprovalTimeout))
	defer cancel()
	begin := time.Now()
	out, err := a.r.opt.Tools.Tools.Call(toolinfo.WithAsked(cctx, a.asked()), c.call.Name, json.RawMessage(c.args))
	c.ev.Duration = time.Since(begin)
	st.foreign = cmp.Or(st.foreign, foreignResult)
	if err != nil {
		c.ev.Outcome = "error"
		if errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("no result within %s", a.r.opt.Tools.CallTimeout)
			if tctx.Err() != nil {
				err = errors.New("no result before the answer's time for tools ran out")
			}
		}
		log.Warn("tool call failed", zap.Error(err), zap.Duration("duration", c.ev.Duration))
		c.result = "The tool " + c.call.Name + " failed.\n" + a.r.fenced(st.fence, "the error of the tool "+c.call.Name, err.Error())
		c.line = cmp.Or(toolinfo.NoteOf(err), fmt.Sprintf(textToolFailed, c.call.Name)) // a built-in's own note
		return
	}
	c.ev.Outcome = "ok"
	log.Info("tool called", zap.Duration("duration", c.ev.Duration), zap.Int("bytes", len(out)))
	log.Debug("tool result", zap.String("text", out))
	c.result = a.r.fenced(st.fence, "the result of the tool "+c.call.Name, out)
	c.line = fmt.Sprintf(textToolUsed, c.call.Name, c.info.Server)
}

// What an answer shows of its calls (Markdown, italic lines).
const (
	textToolUsed       = "_Used `%s` (%s)._"
	textToolFailed     = "_`%s` failed._" // why goes to the model only: a server may write anything there
	textToolNotAllowed = "_`%s` was not used: %s._"
	textToolAsking     = "_Waiting for approval to use %s…_"
	textToolRunning    = "_Using `%s` (%s)…_"
	// A native stream shows a task card per call instead of a status line.
	titleTool    = "Using %s (%s)"
	detailAsking = "Waiting for approval."
)

func deniedReason(v toolinfo.Verdict) string {
	switch v {
	case toolinfo.TimedOut:
		return "nobody approved it in time"
	case toolinfo.Cancelled:
		return "the answer was stopped"
	}
	return "it was denied"
}

// toolError is a call's result that tells the model it failed (and why), so it can go on.
func toolError(name, why string) string {
	return "The tool " + name + " could not be used: " + why + "."
}

// fenced is a tool's output (or error) as data for the model: cut to MaxResult bytes and fenced
// as coming from source, so nothing in it can pass for the asker's words.
func (r *Replies) fenced(f convo.Fence, source, out string) string {
	out = strings.ToValidUTF8(out, "\uFFFD")
	if limit := r.opt.Tools.MaxResult; len(out) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + fmt.Sprintf("\n[… %d more bytes cut]", len(out)-cut)
	}
	return f.Wrap(source, out)
}

// status shows a line under the answer so far while calls wait or run; a native stream, which
// cannot take text back, shows the calls' task cards instead (tasks, with details). The write is
// brief: a call does not wait for it.
func (a *generation) status(ctx context.Context, s roundSink, shown, line string, tasks []gateway.Task, details string) {
	if s.mode() != ModeEdit {
		for i := range tasks {
			tasks[i].Status, tasks[i].Details = gateway.TaskInProgress, details
		}
		s.progress(ctx, tasks...)
		return
	}
	wctx, cancel := context.WithTimeout(ctx, statusWait)
	defer cancel()
	s.interim(ctx, wctx, snapshot{md: joinShown(shown, line), since: time.Now()}, newMailbox())
}

// toolDone closes a call's task card in a native stream: complete when the call was made and
// answered, else error.
func (a *generation) toolDone(ctx context.Context, s roundSink, task gateway.Task, outcome string) {
	if s.mode() == ModeEdit {
		return
	}
	task.Status = gateway.TaskComplete
	if outcome != "ok" {
		task.Status, task.Details = gateway.TaskError, outcome
	}
	s.progress(ctx, task)
}

// statusWait bounds the wait for a status line's turn in the edit budget.
const statusWait = 3 * time.Second

func (r *Replies) observeTool(ev ToolEvent) {
	if f := r.opt.Tools.Observe; f != nil {
		f(ev)
	}
}

// textToolsUnavailable ends the first answer after the model's server refused the tools (the
// answer went without them, as will the next ones, without saying so again).
const textToolsUnavailable = "The model service does not take tools, so I answered without them."
