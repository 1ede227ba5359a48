// Package approvals is the tool approvals use case: the prompt that asks whoever may decide (the
// person who asked for an answer, or the tool's approvers from MCP_CONFIG) whether its tool calls
// may be made, the wait for their click, the approval buttons' clicks (Decide), and the standing
// grants a click gives: "Allow for this thread" (shared marks) and "Always allow this tool (for
// me)" (sealed shared records, listed and revoked with /llmbot tools). The answers' tool loop asks
// through toolinfo.Approval; bot routes the clicks here.
//
// The calls of one round that need a click (the tool loop decides which: those not on their
// server's auto-approve list nor granted, and every call while the context holds more than the
// asker's words) are asked in one prompt per set of approvers: each tool, its server and its
// arguments (indented, cut). The prompt goes privately to whom it concerns (an ephemeral), and the
// thread sees who must approve which tool, with Show approval; public_arguments keeps it public.
// No click within the Approval's Wait denies the calls. The model is told the outcome either way,
// and the thread's line is rewritten to say it.
//
// The click may reach another replica than the one writing the answer: bot hands it over the way it
// hands over Stop (the button's value names the answer), and Decide delivers it here. A pending
// approval is kept in the shared records until decided; after a restart its line is rewritten as
// lapsed (WatchLapsed).
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
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
	"github.com/llmbot/llmbot/toolinfo"
)

// The approval buttons' action ids.
const (
	ActionToolAllowOnce   = "llmbot_tool_allow_once"
	ActionToolAllowThread = "llmbot_tool_allow_thread"
	ActionToolAllowAlways = "llmbot_tool_allow_always"
	ActionToolDeny        = "llmbot_tool_deny"
	// FeatureToolApproval is what access rules and metrics call the four buttons.
	FeatureToolApproval = "tool_approval"
)

// ApprovalRef is an approval button's value: the answer it belongs to (as in route.ReplyRef) and the call.
type ApprovalRef struct {
	ThreadTS string `json:"thread_ts,omitempty"`
	TS       string `json:"ts"`    // the message the answer answers (route.AnswerID with the channel)
	ID       string `json:"id"`    // the call's approval
	Asker    string `json:"asker"` // the only person who may decide, unless Approvers
	// Approvers: the call has approvers (MCP_CONFIG), whom the replica waiting for the click knows.
	Approvers bool `json:"ap,omitempty"`
	// Private: the button is on a prompt shown to one person (an ephemeral), replaced once clicked.
	Private bool `json:"pv,omitempty"`
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
	case ActionToolAllowAlways:
		return string(toolinfo.AllowAlways)
	case ActionToolDeny:
		return string(toolinfo.Denied)
	case ActionToolShowApproval:
		return verdictShow
	}
	return ""
}

// Decided is what became of a click on an approval button.
type Decided int

const (
	DecidedHere        Decided = iota // delivered to the call waiting here
	DecidedNotAsker                   // the clicker is not the asker: nothing changes
	DecidedUnknown                    // no call waits for it here (another replica's, or over)
	DecidedNotApprover                // the call has approvers and the clicker is not one: nothing changes
	DecidedNotOffered                 // a choice the prompt does not offer (a forged click): nothing changes
)

// Text is what the clicker is told privately ("" for DecidedHere and DecidedUnknown).
func (d Decided) Text() string {
	switch d {
	case DecidedNotAsker:
		return TextNotAskerApproval
	case DecidedNotApprover:
		return TextNotApprover
	case DecidedNotOffered:
		return TextApprovalOver
	}
	return ""
}

// What people are told about approvals.
const (
	TextNotAskerApproval = "Only the person who asked can approve or deny this tool call."
	TextNotApprover      = "Only the approvers named on this approval can approve or deny this tool call."
	TextNotApproverNamed = "Only %s can approve or deny this tool call." // the approvers (Refusal)
	TextApprovalOver     = "That tool call is no longer waiting for an answer: the request lapsed (ask again)."
	TextApprovalFailed   = "I couldn't pass your answer on just now — please click again."
)

// Approvals is the tool approvals use case: the calls waiting for a click in this process, which
// the approval buttons' clicks reach through Decide, and the tools people allowed for a thread
// ("Allow for this thread"), kept for every replica. The answers that ask for a click (Approve) and
// the click handler share one Approvals.
type Approvals struct {
	mu      sync.Mutex
	waiting map[string]waiter // by ApprovalRef.ID
	// done are the approvals decided here whose pending record is not removed yet (a failed
	// Delete): never lapsed, and removed again by each sweep until it works.
	done decidedIDs
	// suspects are the pending approvals the last sweep found lapsed (the sweeps' alone).
	suspects map[string]bool

	allowed *ttlcache.Cache[bool] // channel/thread/user/tool -> allowed for the thread, in this process
	// marks keep the grants for the other replicas, named with grantKey (grantMark); nil marks or
	// an empty key: grants are kept in this process only.
	marks    Marks
	grantKey []byte
	always   always                    // "Always allow this tool", in the shared records (none: not offered)
	groups   *ttlcache.Cache[[]string] // user groups' members, briefly
	opt      Options
	log      *zap.Logger
}

// Options are what Approvals may be given besides the thread grants' marks.
type Options struct {
	// Records keep "Always allow this tool" and the pending approvals, sealed under Key
	// (state.DeriveKey of the bot token); nil or no key: "Always allow" is not offered, and a
	// pending approval is not kept beyond this process.
	Records Records
	Key     []byte
	// Answers and Lines let WatchLapsed rewrite the lines of the approvals whose answer ended
	// without them (a restart): the journal of open answers, and a writer in the bot's budgets.
	Answers Answers
	Lines   *gateway.Writer
	Claims  Claims // one replica rewrites a lapsed line (nil: this one, as if alone)
	// Leases name the replica waiting for an approval, which alone lapses it while alive (nil:
	// an approval lapses once its answer is closed).
	Leases Leases
	Groups Groups // reads the approvers' user groups; nil: an approver group denies
	// Private shows the prompts, arguments included, to whom they concern alone (the thread sees
	// who must approve which tool); nil: every prompt is public, as with public_arguments.
	Private Ephemerals
	// Decided counts each prompt's outcome: its verdict, and whether approvers (not the asker) decided.
	Decided func(v toolinfo.Verdict, approvers bool)
}

// waiter is a prompt waiting for its click: the first click wins (ch holds one).
type waiter struct {
	ch        chan decision
	asker     string   // who asked for the answer: who decides without deciders (never the button's word)
	deciders  deciders // nil: the asker alone
	approvers []string // as MCP_CONFIG names them (people, user groups), for Refusal
	standing  bool     // Allow for this thread and Always allow are offered
	always    bool     // Always allow is offered
	// show shows the prompt privately to a person who may decide (Show approval); nil: the prompt
	// is public. shows are those in progress, which the prompt waits for once decided.
	show  func(user string)
	shows *shows
}

// decision is a click: the verdict and who gave it.
type decision struct {
	v  toolinfo.Verdict
	by string
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
	return NewWith(marks, grantKey, log, Options{})
}

// NewWith is New with the always grants, the user groups' reader and the outcomes' counter.
func NewWith(marks Marks, grantKey []byte, log *zap.Logger, o Options) *Approvals {
	if log == nil {
		log = zap.NewNop()
	}
	if o.Decided == nil {
		o.Decided = func(toolinfo.Verdict, bool) {}
	}
	p := &Approvals{allowed: ttlcache.New[bool](grantCacheSize, grantTTL), marks: marks, grantKey: grantKey, log: log,
		groups: newGroupCache(), opt: o}
	if o.Records != nil && len(o.Key) > 0 {
		p.always = always{rec: o.Records, key: o.Key}
	}
	return p
}

// Decide delivers the click of user on an approval button (action, see VerdictOf) to the call that
// waits for it here.
func (p *Approvals) Decide(ref ApprovalRef, user, action string) Decided {
	if !ref.Approvers && user != ref.Asker {
		return DecidedNotAsker
	}
	v := toolinfo.Verdict(VerdictOf(action))
	if v == "" {
		return DecidedUnknown
	}
	p.mu.Lock()
	w, ok := p.waiting[ref.ID]
	p.mu.Unlock()
	switch {
	case !ok:
		return DecidedUnknown
	case w.deciders == nil && user != w.asker:
		return DecidedNotAsker
	case w.deciders != nil && !w.deciders[user]:
		return DecidedNotApprover
	case v == toolinfo.AllowThread && !w.standing, v == toolinfo.AllowAlways && !w.always, v == verdictShow && w.show == nil:
		return DecidedNotOffered
	case v == verdictShow:
		w.shows.start(w.show, user, p.log)
		return DecidedHere
	}
	select {
	case w.ch <- decision{v: v, by: user}:
	default: // a second click: the first decided
	}
	return DecidedHere
}

// Refusal is what the clicker is told of a click d refused: who may decide where the replica
// waiting for it knows (the approvers), else d.Text().
func (p *Approvals) Refusal(ref ApprovalRef, d Decided) string {
	p.mu.Lock()
	w, ok := p.waiting[ref.ID]
	p.mu.Unlock()
	if d == DecidedNotApprover && ok && len(w.approvers) > 0 {
		return fmt.Sprintf(TextNotApproverNamed, mentions(w.approvers))
	}
	return d.Text()
}

// Lapsed counts a click on a prompt no replica waits for any more (restarted, or over).
func (p *Approvals) Lapsed() { p.opt.Decided("lapsed", false) }

func (p *Approvals) add(id string, w waiter) chan decision {
	w.ch = make(chan decision, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		p.waiting = map[string]waiter{}
	}
	p.waiting[id] = w
	return w.ch
}

func (p *Approvals) remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.waiting, id)
}

// Approve asks whoever may decide whether q's calls may be made, in one prompt posted through w
// (the answer's paced writer, whose budgets it shares), and waits for the answer: a click (Decide),
// q's Wait running out, or ctx ending (a deadline is the answer's time for tools running out). Calls
// with different approvers are asked in turn, one prompt each; the first that is not allowed ends
// it. The standing grants a verdict gives (Allow for this thread, Always allow) are kept here.
func (p *Approvals) Approve(ctx context.Context, w *gateway.Writer, q toolinfo.Approval) toolinfo.Verdict {
	v := toolinfo.Denied
	for _, calls := range groupCalls(q.Calls) {
		g := q
		g.Calls = calls
		if v = p.approveGroup(ctx, w, g); !v.Allowed() {
			break
		}
	}
	return v
}

// approveGroup asks about calls that share their approvers (groupCalls).
func (p *Approvals) approveGroup(ctx context.Context, w *gateway.Writer, q toolinfo.Approval) toolinfo.Verdict {
	log := p.log.With(zap.String("channel", q.Channel), zap.String("thread_ts", q.Thread))
	d, err := p.resolve(ctx, q.Calls)
	if err != nil {
		log.Warn("tool approvers not found: denied", zap.Error(err))
		post(ctx, w, q, unresolvedText(q.Calls), nil)
		p.opt.Decided("unresolved", true)
		return toolinfo.Denied
	}
	wt := waiter{asker: q.Asker, deciders: d, approvers: approversOf(q.Calls[0]), standing: d == nil && q.Foreign == ""}
	wt.always = wt.standing && p.always.rec != nil
	ref := ApprovalRef{ThreadTS: q.ThreadTS, TS: q.TS, ID: newApprovalID(), Asker: q.Asker, Approvers: d != nil}
	approvers := approversOf(q.Calls[0])
	prompt := approvalText(q.Asker, approvers, q.Calls, q.Foreign)
	shown, buttons := prompt, approvalButtons(ref, wt) // what the thread's message says
	sctx, stopShows := context.WithCancel(ctx)         // the private prompts' posts end with the wait
	defer stopShows()
	if p.private(q.Calls) {
		pref := ref
		pref.Private = true
		wt.show, wt.shows = p.shower(sctx, w, q, prompt, approvalButtons(pref, wt), log), newShows()
		shown = waitingLine(q.Asker, approvers, q.Calls)
		buttons = []gateway.Button{{ActionID: ActionToolShowApproval, Text: "Show approval", Value: ref.Value()}}
	}
	ch := p.add(ref.ID, wt)
	ts, err := post(ctx, w, q, shown, buttons)
	if err != nil {
		p.remove(ref.ID)
		log.Warn("tool approval not asked: denied", zap.Error(err))
		return toolinfo.Denied
	}
	p.remember(q, ref.ID, ts, log)
	if wt.show != nil { // while the wait runs: its time is not spent on the posts
		wt.shows.first(wt.show, q.Asker, approvers)
	}
	dec := wait(ctx, ch, q.Wait)
	// Decided: a later click is told the request is over (not taken for this one), and no sweep
	// lapses it while its line is settled and its record removed (settled).
	p.done.add(ref.ID) // first: never neither waiting nor decided, for a sweep
	p.remove(ref.ID)
	stopShows()
	wt.shows.stop()
	p.keep(q, dec.v, log)
	settleLine(ctx, w, q, ts, shown+"\n"+verdictLine(dec, q.Asker), log)
	p.forget(ref.ID, log)
	p.opt.Decided(dec.v, d != nil)
	return dec.v
}

// wait is the click on ch, or how the wait ended without one.
func wait(ctx context.Context, ch chan decision, d time.Duration) decision {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case dec := <-ch:
		return dec
	case <-t.C:
		return decision{v: toolinfo.TimedOut}
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return decision{v: toolinfo.TimedOut} // the answer's time for tools ran out
		}
		return decision{v: toolinfo.Cancelled}
	}
}

// noticeMark marks the approvals' messages in the thread: notices, not answers.
var noticeMark = convo.Mark{Kind: convo.MarkNotice}

// post posts text (with buttons, or none) in the answer's thread as a notice.
func post(ctx context.Context, w *gateway.Writer, q toolinfo.Approval, text string, bs []gateway.Button) (string, error) {
	return w.Post(ctx, gateway.InterimRetry, nil, w.PostTurn(q.Channel), q.Channel, q.Thread, gateway.Msg{Text: text,
		Mark: noticeMark, Buttons: bs})
}

// unresolvedText says that calls were not made: their approvers' user group could not be read.
func unresolvedText(calls []toolinfo.Call) string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = "`" + safeName(c.Name) + "`"
	}
	return fmt.Sprintf("_%s needs the approval of %s, and I couldn't read who is in their user group just now: not used._",
		strings.Join(names, ", "), strings.Join(approversOf(calls[0]), ", "))
}

// keep keeps the standing grant v gives for q's calls, if the prompt offered it (Decide refuses a
// choice it did not offer; Foreign is checked again all the same).
func (p *Approvals) keep(q toolinfo.Approval, v toolinfo.Verdict, log *zap.Logger) {
	if q.Foreign != "" {
		return
	}
	for _, c := range q.Calls {
		switch v {
		case toolinfo.AllowThread:
			p.AllowThread(q.Channel, q.Thread, q.Asker, c.Name)
		case toolinfo.AllowAlways:
			if p.always.rec == nil {
				return // not offered without records
			}
			ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
			err := p.always.put(ctx, q.Asker, Grant{Tool: c.Name, Server: c.Server, At: time.Now().UTC()})
			cancel()
			if err != nil {
				log.Warn("tool not always allowed: not kept", zap.String("tool", c.Name), zap.Error(err))
			}
		}
	}
}

// verdictLine is the prompt's outcome; it names who decided when it was not the asker (an approver).
func verdictLine(d decision, asker string) string {
	by := ""
	if d.by != "" && d.by != asker {
		by = " by <@" + d.by + ">"
	}
	switch d.v {
	case toolinfo.AllowOnce:
		return "_Allowed once" + by + "._"
	case toolinfo.AllowThread:
		return "_Allowed for this thread" + by + "._"
	case toolinfo.AllowAlways:
		return "_Always allowed" + by + " (`/llmbot tools` lists and revokes)._"
	case toolinfo.TimedOut:
		return "_Not answered in time: denied._"
	case toolinfo.Cancelled:
		return "_The answer was stopped._"
	}
	return "_Denied" + by + "._"
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
func approvalText(asker string, approvers []string, calls []toolinfo.Call, foreign string) string {
	safe := func(s string) string { return slackmd.EscapeMrkdwn(slackmd.Neutralise(s)) }
	var b strings.Builder
	who := "<@" + asker + ">"
	if len(approvers) > 0 {
		who = mentions(approvers)
	}
	if len(calls) == 1 {
		fmt.Fprintf(&b, "%s, may I use this tool?", who)
	} else {
		fmt.Fprintf(&b, "%s, may I use these %d tools?", who, len(calls))
	}
	if len(approvers) > 0 {
		fmt.Fprintf(&b, " <@%s> asked for it; only the approvers named here may decide.", asker)
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

// approvalButtons are the prompt's buttons: Allow for this thread and Always allow only where w
// offers them.
func approvalButtons(ref ApprovalRef, w waiter) []gateway.Button {
	v := ref.Value()
	bs := []gateway.Button{{ActionID: ActionToolAllowOnce, Text: "Allow once", Value: v, Style: "primary"}}
	if w.standing {
		bs = append(bs, gateway.Button{ActionID: ActionToolAllowThread, Text: "Allow for this thread", Value: v})
	}
	if w.always {
		bs = append(bs, gateway.Button{ActionID: ActionToolAllowAlways, Text: "Always allow (for me)", Value: v})
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
//
// It is also true where user always allows tool (Always allow this tool, until revoked): the
// answers ask it only while the context is the asker's alone, so neither grant ever lets a call
// through when the context holds anything else.
func (p *Approvals) ThreadAllowed(channel, threadTS, user, tool string) bool {
	key := channel + "/" + threadTS + "/" + user + "/" + tool
	if _, ok := p.allowed.Get(key); ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if mark, shared := p.grantMark(key); shared {
		if marked, err := p.marks.Marked(ctx, mark); err == nil && marked {
			p.allowed.Put(key, true)
			return true
		}
	}
	return p.alwaysAllowed(ctx, user, tool)
}

// alwaysAllowed reports whether user always allows tool (not cached: a revocation holds at once on
// every replica).
func (p *Approvals) alwaysAllowed(ctx context.Context, user, tool string) bool {
	if p.always.rec == nil {
		return false
	}
	ok, err := p.always.has(ctx, user, tool)
	if err != nil {
		p.log.Warn("always-allowed tools not read: asking", zap.Error(err))
	}
	return ok
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
