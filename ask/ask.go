// Package ask is the ask_user use case: a built-in tool (toolinfo.Builtin) with which the model
// asks the person who asked for the answer a clarifying question, instead of guessing. The question
// is posted in the answer's thread with one button per option (at most MaxOptions) and "Other…",
// which opens a modal with a free-text input. Only the asker may answer; anyone else is told so
// privately. The chosen option, or the typed text (cut to MaxAnswer characters), goes back to the
// model as the tool's result, which the answers fence as data like every tool result; the question
// is rewritten with the answer ("<@asker> answered: …"), or with "no answer".
//
// The wait is an approval's: the answers' tool loop calls the tool without a click (its Info says
// AsksAsker) and bounds the call by the approvals' timeout and the answer's time for tools; Stop
// ends it. The click may reach another replica: bot hands it to the replica writing the answer by
// the answer's reference (Ref), as it does Stop and the approval buttons; when no replica has the
// answer any more (a restart), the person is told the question lapsed and it is rewritten so.
package ask

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/ttlcache"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
	"github.com/llmbot/llmbot/toolinfo"
)

// Name is the tool's name, as the model calls it.
const Name = "ask_user"

// The question's buttons, its modal and the modal's input. Each option has an action id of its own
// (ActionOption): Slack wants the action ids of one block distinct.
const (
	actionOptionPrefix = "llmbot_ask_option_"
	ActionOther        = "llmbot_ask_other"
	View               = "llmbot_ask_answer" // the "Other…" modal's callback id
	AnswerInput        = "answer"            // the modal's text input
	// Feature is what access rules and metrics call the buttons and the modal.
	Feature = "ask_user"
)

// The bounds of a question (the model's arguments) and of a typed answer.
const (
	MaxOptions   = 5
	maxQuestion  = 300 // characters
	maxOption    = 75  // characters: Slack's limit on a button's label
	MaxAnswer    = 500 // characters of a typed answer that reach the model
	maxArgsBytes = 4096
)

// ActionOption is the action id of the button of option i (0-based).
func ActionOption(i int) string { return actionOptionPrefix + strconv.Itoa(i+1) }

// Actions are the action ids of the option buttons, one route each.
func Actions() []string {
	out := make([]string, MaxOptions)
	for i := range out {
		out[i] = ActionOption(i)
	}
	return out
}

// optionOf is the option index of action (false: not an option's button).
func optionOf(action string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(action, actionOptionPrefix))
	if !strings.HasPrefix(action, actionOptionPrefix) || err != nil || n < 1 || n > MaxOptions {
		return 0, false
	}
	return n - 1, true
}

// Answers reports whether a request named name (an action id or a modal's callback id) answers a
// question: an option's button or the submitted modal.
func Answers(name string) bool {
	_, ok := optionOf(name)
	return ok || name == View
}

// Ref is a question button's value (and its modal's): the answer it belongs to (as route.ReplyRef
// names it), the question and who may answer.
type Ref struct {
	ThreadTS string `json:"thread_ts,omitempty"`
	TS       string `json:"ts"`
	ID       string `json:"id"`
	Asker    string `json:"asker"`
}

// Value is r as a button value.
func (r Ref) Value() string {
	b, _ := json.Marshal(r) // strings only: cannot fail
	return string(b)
}

// ParseRef reads a question button's value.
func ParseRef(value string) (Ref, error) {
	var r Ref
	if err := json.Unmarshal([]byte(value), &r); err != nil || r.TS == "" || r.ID == "" || r.Asker == "" {
		return Ref{}, fmt.Errorf("question button value: %w", route.ErrBadValue)
	}
	return r, nil
}

// Delivered is what became of an answer given to a question.
type Delivered int

const (
	DeliveredHere Delivered = iota // to the question waiting here
	NotAsker                       // the person is not the asker: nothing changes
	Unknown                        // no question waits for it here (another replica's, or over)
	Empty                          // the modal was sent without text: the question still waits
	Refused                        // none of the question's options (a forged click): nothing changes
)

// What people are told.
const (
	TextNotAsker = "Only the person who asked can answer this question."
	TextLapsed   = "That question is no longer waiting for an answer: it was answered or timed out, or the answer that asked it has ended."
	TextFailed   = "I couldn't pass your answer on just now — please try again."
	TextEmpty    = "Nothing was typed, so the question still waits for your answer."
	textLapsed   = "_This question lapsed: the answer that asked it ended before anyone answered._"
)

// Outcomes of a question (Options.Counted).
const (
	OutcomeAsked     = "asked"
	OutcomeAnswered  = "answered" // an option chosen or text typed
	OutcomeTimeout   = "timeout"
	OutcomeCancelled = "cancelled" // the answer stopped meanwhile
	OutcomeFailed    = "failed"    // the question could not be posted
)

// Views opens modals (views.open).
type Views interface {
	OpenModal(ctx context.Context, triggerID string, m gateway.Modal) error
}

// Options configure Ask.
type Options struct {
	// Beside: the tool is offered only where the channel has other tools (ASK_USER=auto).
	Beside bool
	// Settle bounds the question's rewrite once answered (a context that outlives a stop).
	Settle time.Duration
	// Counted, when set, counts a question's outcome (metrics). It must not block.
	Counted func(outcome string)
	// Settled, when set, shares with the other replicas which questions were settled (the state's
	// marks), so that a late click handled by another replica leaves the outcome shown (Lapsed).
	// nil: this process's memory alone.
	Settled Marks
}

// Marks are flags shared by the replicas (state's Keys).
type Marks interface {
	Mark(ctx context.Context, key string, ttl time.Duration) error
	Marked(ctx context.Context, key string) (bool, error)
}

// Ask is the ask_user use case: the tool, the questions waiting in this process, and the handlers of
// their buttons and modal.
type Ask struct {
	w     *gateway.Writer
	views Views
	log   *zap.Logger
	opt   Options

	mu      sync.Mutex
	waiting map[string]*question // by Ref.ID
	// settled are the questions this process rewrote with their outcome (by Ref.ID): a late
	// answer to one of them leaves the outcome shown.
	settled *ttlcache.Cache[bool]
}

// What this process remembers of the questions it settled, and how long the replicas' mark of one
// lasts (markTimeout bounds a call to it).
const (
	settledSize = 1000
	settledTTL  = time.Hour
	markTTL     = 24 * time.Hour
	markTimeout = 3 * time.Second
)

// question is one question waiting for its answer.
type question struct {
	asker   string
	options []string
	answer  chan string // size 1: the first answer wins
}

// New returns Ask posting through w (paced with the other writers by their shared budgets) and
// opening its modal through views.
func New(w *gateway.Writer, views Views, log *zap.Logger, opt Options) *Ask {
	if log == nil {
		log = zap.NewNop()
	}
	if opt.Settle <= 0 {
		opt.Settle = 10 * time.Second
	}
	return &Ask{w: w, views: views, log: log, opt: opt, waiting: map[string]*question{},
		settled: ttlcache.New[bool](settledSize, settledTTL)}
}

const description = "Ask the person who asked you a short clarifying question, when their request is ambiguous " +
	"and guessing would likely give a wrong answer. They see the question with a button per option and can " +
	"also type another answer. Do not use it for what you can find out or reasonably assume. The result is " +
	"their answer, or that they did not answer in time (then go on with a stated assumption)."

var parameters = json.RawMessage(`{"type":"object","properties":{` +
	`"question":{"type":"string","description":"The question, short and plain (at most 300 characters)."},` +
	`"options":{"type":"array","maxItems":5,"items":{"type":"string"},` +
	`"description":"Up to 5 short answers to choose from (each at most 75 characters); the person may also type another."}},` +
	`"required":["question"]}`)

// Info is the tool as the model is offered it: it needs no approval (it only asks the asker).
func (a *Ask) Info() toolinfo.Info {
	return toolinfo.Info{Tool: llm.Tool{Name: Name, Description: description, Parameters: parameters},
		AsksAsker: true, Beside: a.opt.Beside}
}

// args are the tool's arguments.
type args struct {
	Question string   `json:"question"`
	Options  []string `json:"options"`
}

// errInvalid wraps the model's bad arguments: the model is told why, and may call again.
var errInvalid = errors.New("invalid arguments")

// parseArgs reads and checks the model's arguments.
func parseArgs(raw json.RawMessage) (args, error) {
	var in args
	if len(raw) > maxArgsBytes {
		return args{}, fmt.Errorf("%w: more than %d bytes", errInvalid, maxArgsBytes)
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return args{}, fmt.Errorf("%w: want {\"question\": string, \"options\": [string]}", errInvalid)
	}
	in.Question = strings.TrimSpace(slackmd.StripControls(in.Question))
	switch n := utf8.RuneCountInString(in.Question); {
	case n == 0:
		return args{}, fmt.Errorf("%w: the question is empty", errInvalid)
	case n > maxQuestion:
		return args{}, fmt.Errorf("%w: the question has %d characters, at most %d", errInvalid, n, maxQuestion)
	case len(in.Options) > MaxOptions:
		return args{}, fmt.Errorf("%w: %d options, at most %d", errInvalid, len(in.Options), MaxOptions)
	}
	for i, o := range in.Options {
		o = strings.Join(strings.Fields(slackmd.StripControls(o)), " ")
		switch n := utf8.RuneCountInString(o); {
		case n == 0:
			return args{}, fmt.Errorf("%w: option %d is empty", errInvalid, i+1)
		case n > maxOption:
			return args{}, fmt.Errorf("%w: option %d has %d characters, at most %d", errInvalid, i+1, n, maxOption)
		case slices.Contains(in.Options[:i], o):
			return args{}, fmt.Errorf("%w: option %d repeats another", errInvalid, i+1)
		}
		in.Options[i] = o
	}
	return in, nil
}

// Call asks the asker (toolinfo.AskedOf(ctx)) the question in raw and waits for the answer, until ctx
// ends: a deadline is the time for it running out (answered to the model as no answer), a
// cancellation the answer stopping.
func (a *Ask) Call(ctx context.Context, raw json.RawMessage) (string, error) {
	in, err := parseArgs(raw)
	if err != nil {
		return "", err
	}
	asked, ok := toolinfo.AskedOf(ctx)
	if !ok || asked.Asker == "" {
		return "", errors.New("there is nobody to ask here")
	}
	log := a.log.With(zap.String("channel", asked.Channel), zap.String("thread_ts", asked.Thread))
	ref := Ref{ThreadTS: asked.ThreadTS, TS: asked.TS, ID: newID(), Asker: asked.Asker}
	q := &question{asker: asked.Asker, options: in.Options, answer: make(chan string, 1)}
	a.mu.Lock()
	a.waiting[ref.ID] = q
	a.mu.Unlock()
	defer a.end(ref.ID, q) // when the question could not be asked
	text := questionText(asked.Asker, in.Question)
	ts, err := a.w.Post(ctx, gateway.InterimRetry, nil, a.w.PostTurn(asked.Channel), asked.Channel, asked.Thread,
		gateway.Msg{Text: text, Mark: convo.Mark{Kind: convo.MarkNotice}, Buttons: buttons(ref, in.Options)})
	if err != nil {
		a.count(OutcomeFailed)
		log.Warn("question not asked", zap.Error(err))
		return "", errors.New("the question could not be shown to the person who asked")
	}
	a.count(OutcomeAsked)
	begin := time.Now()
	var answer string
	answered := false
	select {
	case answer = <-q.answer:
		answered = true
	case <-ctx.Done():
	}
	// No answer waits here any more before the question is rewritten: one given meanwhile is told it
	// lapsed (Unknown), not taken and dropped. One given as its time ran out counts.
	if late, ok := a.end(ref.ID, q); ok && !answered && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		answer, answered = late, true
	}
	a.markSettled(ctx, ref.ID, log)
	if answered {
		a.count(OutcomeAnswered)
		log.Info("question answered", zap.Duration("waited", time.Since(begin)))
		a.settle(ctx, asked.Channel, ts, text+"\n"+fmt.Sprintf("<@%s> answered: %s", asked.Asker, shown(answer)))
		return "The person who asked answered: " + answer, nil
	}
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		a.count(OutcomeCancelled)
		a.settle(ctx, asked.Channel, ts, text+"\n_The answer was stopped._")
		return "", context.Cause(ctx)
	}
	a.count(OutcomeTimeout)
	log.Info("question not answered in time", zap.Duration("waited", time.Since(begin)))
	a.settle(ctx, asked.Channel, ts, text+"\n_No answer in time._")
	return "The person who asked did not answer in time. Go on without their answer, and say what you assumed.", nil
}

// Answer delivers user's answer to the question ref names, if it waits here: the option of the
// button action, or the text typed in the modal (name View).
func (a *Ask) Answer(ref Ref, user, name, typed string) Delivered {
	if user != ref.Asker {
		return NotAsker
	}
	a.mu.Lock()
	defer a.mu.Unlock() // delivered while the question waits (end)
	q, ok := a.waiting[ref.ID]
	switch {
	case !ok:
		return Unknown
	case user != q.asker: // the button's value names an asker; the question's own decides
		return NotAsker
	}
	var answer string
	if i, isOption := optionOf(name); isOption && i < len(q.options) {
		answer = q.options[i]
	} else if name == View {
		answer = clip(strings.TrimSpace(slackmd.StripControls(typed)), MaxAnswer)
		if answer == "" {
			return Empty
		}
	} else {
		return Refused
	}
	select {
	case q.answer <- answer:
	default: // a second answer: the first counts
	}
	return DeliveredHere
}

// end takes the question id out of those waiting here, marked settled first (so a late answer to it
// is told it lapsed, and Lapsed leaves its outcome shown), and returns the answer given as it ended
// (ok: one was).
func (a *Ask) end(id string, q *question) (answer string, ok bool) {
	a.settled.Put(id, true)
	a.mu.Lock()
	delete(a.waiting, id)
	a.mu.Unlock()
	select {
	case answer = <-q.answer:
		return answer, true
	default:
		return "", false
	}
}

// settle rewrites the question with its outcome and without buttons (best effort, on a context
// that outlives a stop for Settle).
func (a *Ask) settle(ctx context.Context, channel, ts, text string) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opt.Settle)
	defer cancel()
	lane := a.w.EditLane()
	defer lane.Close()
	err := a.w.Update(uctx, gateway.InterimRetry, nil, a.w.EditTurn(lane, pace.Final, time.Now()), channel, ts,
		gateway.Msg{Text: text, Mark: convo.Mark{Kind: convo.MarkNotice}, Buttons: []gateway.Button{}})
	if err != nil {
		a.log.Warn("question not rewritten", zap.Error(err))
	}
}

// Lapsed rewrites the question ref, message ts in channel, which no answer waits for any more (a
// late click after a restart), as lapsed, without its buttons; unless this process settled it
// (answered, timed out or stopped), which its message says already.
// With Options.Settled, a question another replica settled is left too (and one that cannot be told).
func (a *Ask) Lapsed(ctx context.Context, channel, ts string, ref Ref) {
	if _, settled := a.settled.Get(ref.ID); ts == "" || settled {
		return
	}
	if a.opt.Settled != nil {
		mctx, cancel := context.WithTimeout(ctx, markTimeout)
		settled, err := a.opt.Settled.Marked(mctx, settledKey(ref.ID))
		cancel()
		if err != nil || settled {
			return
		}
	}
	a.settle(ctx, channel, ts, textLapsed)
}

// markSettled tells the other replicas the question id was settled here (Options.Settled).
func (a *Ask) markSettled(ctx context.Context, id string, log *zap.Logger) {
	if a.opt.Settled == nil {
		return
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	if err := a.opt.Settled.Mark(mctx, settledKey(id), markTTL); err != nil {
		log.Warn("question's outcome not shared with the other replicas", zap.Error(err))
	}
}

func settledKey(id string) string { return "ask-settled:" + id }

func (a *Ask) count(outcome string) {
	if a.opt.Counted != nil {
		a.opt.Counted(outcome)
	}
}

// questionText is the question as Slack shows it (mrkdwn): the model's words escaped, so that no
// mention, link or formatting of theirs reaches Slack.
func questionText(asker, q string) string {
	return fmt.Sprintf("<@%s>, a question before I go on:\n>%s", asker, strings.ReplaceAll(shown(q), "\n", "\n>"))
}

// shown is text from the model or a person made safe to show in mrkdwn.
func shown(s string) string { return slackmd.EscapeMrkdwn(slackmd.Neutralise(s)) }

// buttons are one button per option, then "Other…".
func buttons(ref Ref, options []string) []gateway.Button {
	v := ref.Value()
	out := make([]gateway.Button, 0, len(options)+1)
	for i, o := range options {
		out = append(out, gateway.Button{ActionID: ActionOption(i), Text: o, Value: v})
	}
	return append(out, gateway.Button{ActionID: ActionOther, Text: "Other…", Value: v})
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// clip cuts s to at most n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
