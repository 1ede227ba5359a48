// Package toolinfo is the vocabulary between the answers that offer tools to a model (handlers)
// and the plumbing that reaches them (tools, over MCP): what one tool a channel may use is. It sits
// below both, so that the plumbing depends on no use case and the use cases on no protocol. It is
// also what the answers and the approvals use case say to each other about a call that needs the
// asker's click (Approval, Verdict).
package toolinfo

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/llmbot/llmbot/llm"
)

// Info is one tool a channel may use.
type Info struct {
	llm.Tool           // Name is unique among the channel's tools (what the model calls)
	Server      string // the MCP server it is on (shown to people, metrics)
	AutoApprove bool   // called without asking (the server's auto-approve list)
	// Approvers are who alone may approve its calls (Slack user ids U…/W…, user groups S…: the
	// server's or the tool's approvers in MCP_CONFIG); none: the asker.
	Approvers []string
	// PublicArguments: its approval prompt, arguments included, is posted in the thread for all to
	// see (MCP_CONFIG public_arguments), not shown to whom it concerns alone.
	PublicArguments bool
	// AsksAsker: the tool only asks the person who asked (ask_user). Calling it needs no click,
	// whatever the context holds, and its call waits for that person as an approval does: bounded
	// by the approvals' timeout, not the calls' (Limit).
	AsksAsker bool
	// Beside: a built-in offered only where the channel has other tools (tools.Set). Offering
	// tools changes a model's answers, and some services refuse them: a tool that only helps
	// others must not turn every answer into one with tools.
	Beside bool
}

// Limit is how long one call of the tool may take: callTimeout, or approvalTimeout for a tool that
// waits for the asker (AsksAsker).
func (in Info) Limit(callTimeout, approvalTimeout time.Duration) time.Duration {
	if in.AsksAsker {
		return approvalTimeout
	}
	return callTimeout
}

// Verdict is how the asker's approval of a round's tool calls ended.
type Verdict string

// The verdicts.
const (
	AllowOnce   Verdict = "allow_once"
	AllowThread Verdict = "allow_thread" // and the asker's next calls of these tools in the thread
	AllowAlways Verdict = "allow_always" // and the asker's next calls of these tools anywhere (until revoked)
	Denied      Verdict = "denied"
	TimedOut    Verdict = "timeout"
	Cancelled   Verdict = "cancelled" // the answer stopped meanwhile
)

// Allowed reports whether v lets the calls be made.
func (v Verdict) Allowed() bool { return v == AllowOnce || v == AllowThread || v == AllowAlways }

// Approval asks the person who asked for an answer whether its calls may be made: the answer's
// tool loop asks it, and the approvals use case shows the prompt and waits for the click.
type Approval struct {
	Channel string
	Thread  string // where the prompt is posted: the answer's thread
	// ThreadTS and TS name the answer, as route.ReplyRef does: the click on the prompt may reach
	// another replica, which hands it over by them.
	ThreadTS, TS string
	Asker        string // the only person who may decide
	Calls        []Call
	// Foreign is what the context holds besides the asker's words ("" when nothing), said in the
	// prompt; then neither "Allow for this thread" nor "Always allow" is offered (they would not apply).
	Foreign string
	Wait    time.Duration // for the click; then the calls are denied
	Settle  time.Duration // for the prompt's rewrite with its outcome, once decided
}

// Call is one tool call shown in an Approval.
type Call struct {
	Info
	Args []byte // as the model wrote them (JSON)
}

// Asked is the answer a tool call is made for: who asked, and where. The answers' tool loop puts it
// in the call's context (WithAsked); a built-in tool acts for that person there and nowhere else.
type Asked struct {
	Channel string
	Thread  string // where the answer is written
	// ThreadTS and TS name the answer, as route.ReplyRef does (a click may reach another replica).
	ThreadTS, TS string
	Asker, Team  string
	// ActionToken is the asking event's action_token: Slack's search runs with the asker's
	// permissions through it. A credential: never logged, never shown, never sent to the model.
	// "" when the event carried none.
	ActionToken string
}

type askedKey struct{}

// WithAsked returns ctx carrying a.
func WithAsked(ctx context.Context, a Asked) context.Context {
	return context.WithValue(ctx, askedKey{}, a)
}

// AskedOf is the Asked ctx carries (false: none, the call is made for nobody in particular).
func AskedOf(ctx context.Context) (Asked, bool) {
	a, ok := ctx.Value(askedKey{}).(Asked)
	return a, ok
}

// Builtin is a tool the bot provides itself, beside the MCP servers' (ask_user, slack_search): listed
// with them (its Info's Server is BuiltinServer) and called with the Asked in the context.
type Builtin interface {
	Info() Info
	// Call runs the tool with the model's JSON arguments. As with MCP tools, the result and the
	// error's text go to the model as data, never to Slack.
	Call(ctx context.Context, args json.RawMessage) (string, error)
}

// NotedError is a built-in tool's error with a note for the people in the thread: the answer shows
// Note (Markdown, one line, the tool's own words: no secret, nothing of others) as the call's line
// instead of its plain "failed". The error's text still goes to the model only.
type NotedError struct {
	Err  error
	Note string
}

func (e *NotedError) Error() string { return e.Err.Error() }
func (e *NotedError) Unwrap() error { return e.Err }

// NoteOf is the Note of err's NotedError ("" when it has none).
func NoteOf(err error) string {
	var n *NotedError
	if errors.As(err, &n) {
		return n.Note
	}
	return ""
}

// Offerer is a Builtin offered only to some answers (slack_search: where the asking event carried an
// action token, and Slack has not refused search): tools.Set lists it only when Offered says so for
// the answer whose Asked ctx carries.
type Offerer interface {
	Offered(ctx context.Context) bool
}

// BuiltinServer is the server name of the built-in tools (shown to people, metrics, MCP_CONFIG
// cannot name a server so: see tools.Config).
const BuiltinServer = "llmbot"
