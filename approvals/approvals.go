// Package approvals is the tool approvals use case: the prompt that asks the person who asked for
// an answer whether its tool calls may be made, the wait for their click, the approval buttons'
// clicks (Decide) and the tools people allowed for a thread ("Allow for this thread"), kept for every
// replica. The answers' tool loop asks through toolinfo.Approval; bot routes the clicks here.
//
// The calls of one round that need a click (the tool loop decides which: those not on their server's
// auto-approve list nor allowed for the thread, and every call while the context holds more than
// the asker's words) are shown in the thread in one prompt: each tool, its server and its arguments
// (indented, cut), with Allow once / Allow for this thread / Deny for them all (without Allow for
// this thread when the context holds more than the asker's words: it would not apply). Only the
// person who asked may decide; anyone else who clicks is told so privately. No click within the
// Approval's Wait denies them. The model is told the outcome either way, and the prompt is
// rewritten to say it.
//
// The click may reach another replica than the one writing the answer: bot hands it over the way it
// hands over Stop (the button's value names the answer), and Decide delivers it here.
package approvals

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/ttlcache"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
	"github.com/llmbot/llmbot/toolinfo"
)

// The approval buttons' action ids.
const (
	ActionToolAllowOnce   = "llmbot_tool_allow_once"
	ActionToolAllowThread = "llmbot_tool_allow_thread"
	ActionToolDeny        = "llmbot_tool_deny"
	// FeatureToolApproval is what access rules and metrics call the three buttons.
	FeatureToolApproval = "tool_approval"
)

// ApprovalRef is an approval button's value: the answer it belongs to (as in route.ReplyRef) and the call.
type ApprovalRef struct {
	ThreadTS string `json:"thread_ts,omitempty"`
	TS       string `json:"ts"`    // the message the answer answers (route.AnswerID with the channel)
	ID       string `json:"id"`    // the call's approval
	Asker    string `json:"asker"` // the only person who may decide
}

// Value is r as a button value.
func (r ApprovalRef) Value() string {
	b, _ := json.Marshal(r) // strings only: cannot fail
	return string(b)
}

// ParseApprovalRef reads an approval button's value.
func ParseApprovalRef(value string) (ApprovalRef, error) {
	var r ApprovalRef
	if err := json.Unmarshal([]byte(value), &r); err != nil || r.TS == "" || r.ID == "" {
		return ApprovalRef{}, fmt.Errorf("approval button value: %w", route.ErrBadValue)
	}
	return r, nil
}

// VerdictOf is the verdict of an approval button's action id ("" for another action).
func VerdictOf(action string) string {
	switch action {
	case ActionToolAllowOnce:
		return string(toolinfo.AllowOnce)
	case ActionToolAllowThread:
		return string(toolinfo.AllowThread)
	case ActionToolDeny:
		return string(toolinfo.Denied)
	}
	return ""
}

// Decided is what became of a click on an approval button.
type Decided int

const (
	DecidedHere     Decided = iota // delivered to the call waiting here
	DecidedNotAsker                // the clicker is not the asker: nothing changes
	DecidedUnknown                 // no call waits for it here (another replica's, or over)
)

// What people are told about approvals.
const (
	TextNotAskerApproval = "Only the person who asked can approve or deny this tool call."
	TextApprovalOver     = "That tool call is no longer waiting for an answer."
	TextApprovalFailed   = "I couldn't pass your answer on just now — please click again."
)

// Approvals is the tool approvals use case: the calls waiting for a click in this process, which
// the approval buttons' clicks reach through Decide, and the tools people allowed for a thread
// ("Allow for this thread"), kept for every replica. The answers that ask for a click (Approve) and
// the click handler share one Approvals.
type Approvals struct {
	mu      sync.Mutex
	waiting map[string]chan toolinfo.Verdict // by ApprovalRef.ID; size 1: the first click wins

	allowed *ttlcache.Cache[bool] // channel/thread/user/tool -> allowed for the thread, in this process
	// marks keep the grants for the other replicas, named with grantKey (grantMark); nil marks or
	// an empty key: grants are kept in this process only.
	marks    Marks
	grantKey []byte
	log      *zap.Logger
}

// Marks are flags every replica sees (the state package's marks).
type Marks interface {
	Mark(ctx context.Context, key string, ttl time.Duration) error
	Marked(ctx context.Context, key string) (bool, error)
}

// Grants ("Allow for this thread") last as long as the answers remember a thread they take part in,
// and a look at the shared marks is as short as theirs: the tool loop waits for it.
const (
	grantCacheSize = 10000
	grantTTL       = 6 * time.Hour
	markTimeout    = time.Second
)

// New returns Approvals keeping thread grants in marks under marks named with grantKey
// (state.DeriveKey of the bot token, so that whoever can write to the shared store cannot make a
// grant up); nil marks or an empty key: grants are kept in this process only.
func New(marks Marks, grantKey []byte, log *zap.Logger) *Approvals {
	if log == nil {
		log = zap.NewNop()
	}
	return &Approvals{allowed: ttlcache.New[bool](grantCacheSize, grantTTL), marks: marks, grantKey: grantKey, log: log}
}

// Decide delivers the click of user on an approval button (action, see VerdictOf) to the call that
// waits for it here.
func (p *Approvals) Decide(ref ApprovalRef, user, action string) Decided {
	if user != ref.Asker {
		return DecidedNotAsker
	}
	v := toolinfo.Verdict(VerdictOf(action))
	if v == "" {
		return DecidedUnknown
	}
	p.mu.Lock()
	ch, ok := p.waiting[ref.ID]
	p.mu.Unlock()
	if !ok {
		return DecidedUnknown
	}
	select {
	case ch <- v:
	default: // a second click: the first decided
	}
	return DecidedHere
}

func (p *Approvals) add(id string) chan toolinfo.Verdict {
	ch := make(chan toolinfo.Verdict, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		p.waiting = map[string]chan toolinfo.Verdict{}
	}
	p.waiting[id] = ch
	return ch
}

func (p *Approvals) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.waiting, id)
}

// Approve asks the asker whether q's calls may be made, in one prompt posted through w (the
// answer's paced writer, whose budgets it shares), and waits for the answer: a click (Decide), q's
// Wait running out, or ctx ending (a deadline is the answer's time for tools running out).
func (p *Approvals) Approve(ctx context.Context, w *gateway.Writer, q toolinfo.Approval) toolinfo.Verdict {
	log := p.log.With(zap.String("channel", q.Channel), zap.String("thread_ts", q.Thread))
	ref := ApprovalRef{ThreadTS: q.ThreadTS, TS: q.TS, ID: newApprovalID(), Asker: q.Asker}
	ch := p.add(ref.ID)
	defer p.remove(ref.ID)
	prompt := approvalText(q.Asker, q.Calls, q.Foreign)
	ts, err := w.Post(ctx, gateway.InterimRetry, nil, w.PostTurn(q.Channel), q.Channel, q.Thread, gateway.Msg{Text: prompt,
		Mark: convo.Mark{Kind: convo.MarkNotice}, Buttons: approvalButtons(ref, q.Foreign == "")})
	if err != nil {
		log.Warn("tool approval not asked: denied", zap.Error(err))
		return toolinfo.Denied
	}
	t := time.NewTimer(q.Wait)
	defer t.Stop()
	var v toolinfo.Verdict
	select {
	case v = <-ch:
	case <-t.C:
		v = toolinfo.TimedOut
	case <-ctx.Done():
		v = toolinfo.Cancelled
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			v = toolinfo.TimedOut // the answer's time for tools ran out
		}
	}
	settlePrompt(ctx, w, q, ts, prompt, v, log)
	return v
}

// settlePrompt rewrites the approval prompt with its outcome and without buttons (best effort, on a
// context that outlives a stop for q.Settle).
func settlePrompt(ctx context.Context, w *gateway.Writer, q toolinfo.Approval, ts, prompt string, v toolinfo.Verdict, log *zap.Logger) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.Settle)
	defer cancel()
	lane := w.EditLane()
	defer lane.Close()
	text := prompt + "\n" + verdictLine(v)
	err := w.Update(uctx, gateway.InterimRetry, nil, w.EditTurn(lane, pace.Final, time.Now()), q.Channel, ts,
		gateway.Msg{Text: text, Mark: convo.Mark{Kind: convo.MarkNotice}, Buttons: []gateway.Button{}})
	if err != nil {
		log.Warn("tool approval prompt not updated", zap.Error(err))
	}
}

func verdictLine(v toolinfo.Verdict) string {
	switch v {
	case toolinfo.AllowOnce:
		return "_Allowed once._"
	case toolinfo.AllowThread:
		return "_Allowed for this thread._"
	case toolinfo.TimedOut:
		return "_Not answered in time: denied._"
	case toolinfo.Cancelled:
		return "_The answer was stopped._"
	}
	return "_Denied._"
}

// maxShownArgs bounds the arguments an approval prompt shows, of all its calls together (a section
// block holds 3,000 characters); each call shows at least minShownArgs.
const (
	maxShownArgs = 1500
	minShownArgs = 120
)

// approvalText is the prompt (mrkdwn). The tools' names, their servers and the arguments come from
// the model and the servers, so they are escaped (no mention, link or control reaches Slack) and the
// arguments cannot close their code block. foreign (Build's words, not a person's) says why a call
// that would run without a click is asked for.
func approvalText(asker string, calls []toolinfo.Call, foreign string) string {
	safe := func(s string) string { return slackmd.EscapeMrkdwn(slackmd.Neutralise(s)) }
	var b strings.Builder
	if len(calls) == 1 {
		fmt.Fprintf(&b, "<@%s>, may I use this tool?", asker)
	} else {
		fmt.Fprintf(&b, "<@%s>, may I use these %d tools?", asker, len(calls))
	}
	each := max(maxShownArgs/len(calls), minShownArgs)
	for _, c := range calls {
		shown := strings.ReplaceAll(safe(prettyArgs(c.Args, each)), "```", "`\u200b``")
		fmt.Fprintf(&b, "\n`%s` of *%s*\n```\n%s\n```", strings.ReplaceAll(safe(c.Name), "`", "'"), safe(c.Server), shown)
	}
	if foreign != "" {
		fmt.Fprintf(&b, "\n_Asked because this conversation holds %s, not only your words: tools run without asking only on yours._", foreign)
	}
	return b.String()
}

// approvalButtons are the prompt's buttons; forThread offers Allow for this thread too.
func approvalButtons(ref ApprovalRef, forThread bool) []gateway.Button {
	v := ref.Value()
	bs := []gateway.Button{{ActionID: ActionToolAllowOnce, Text: "Allow once", Value: v, Style: "primary"}}
	if forThread {
		bs = append(bs, gateway.Button{ActionID: ActionToolAllowThread, Text: "Allow for this thread", Value: v})
	}
	return append(bs, gateway.Button{ActionID: ActionToolDeny, Text: "Deny", Value: v, Style: "danger"})
}

func newApprovalID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// ThreadAllowed reports whether the asker allowed tool for the whole thread (Allow for this thread).
// It is the asker's word: another person asking in the thread is asked again. The word is kept for
// every replica (the shared marks): the thread's next answer may be another replica's.
func (p *Approvals) ThreadAllowed(channel, threadTS, user, tool string) bool {
	key := channel + "/" + threadTS + "/" + user + "/" + tool
	mark, shared := p.grantMark(key)
	if _, ok := p.allowed.Get(key); ok || !shared {
		return ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	marked, err := p.marks.Marked(ctx, mark)
	if err == nil && marked {
		p.allowed.Put(key, true)
	}
	return err == nil && marked
}

// grantMark is the shared mark that grants key ("Allow for this thread"): named by an HMAC of key
// under the grant key, so a mark written into the shared store by anyone but a replica of
// this bot grants nothing. false: grants are not shared (no marks or no key).
func (p *Approvals) grantMark(key string) (string, bool) {
	if p.marks == nil || len(p.grantKey) == 0 {
		return "", false
	}
	m := hmac.New(sha256.New, p.grantKey)
	m.Write([]byte(key))
	return "tool-allowed:" + hex.EncodeToString(m.Sum(nil)), true
}

// AllowThread keeps the asker's word that tool may be called in the thread without asking again.
func (p *Approvals) AllowThread(channel, threadTS, user, tool string) {
	key := channel + "/" + threadTS + "/" + user + "/" + tool
	p.allowed.Put(key, true)
	mark, shared := p.grantMark(key)
	if !shared {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if err := p.marks.Mark(ctx, mark, grantTTL); err != nil {
		p.log.Warn("tool allowed for the thread on this replica only", zap.Error(err))
	}
}

// clipRunes cuts s to at most n runes, with an ellipsis.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// prettyArgs shows a call's arguments to people: indented JSON, cut to n runes.
func prettyArgs(args []byte, n int) string {
	var b bytes.Buffer
	if json.Indent(&b, args, "", "  ") != nil {
		b.Reset()
		b.Write(args)
	}
	return clipRunes(cmp.Or(b.String(), "{}"), n)
}
