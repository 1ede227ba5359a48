// Package route is the vocabulary between the Socket Mode loop (package bot) and what the bot does:
// a Request (a message to answer, a slash command, a button click, a shortcut, another event), the
// one Handler type that serves it, the one Middleware type that wraps handlers (access rules,
// metrics), and the Table where every command, action, shortcut and event is registered once, at
// wiring time.
//
// The loop turns each envelope into a Request, finds its Handler in the Table and calls Accept at
// once, in the loop (no I/O: a slash command's ack carries its answer). Accept decides whether the
// request runs and what the person is told now. Run then does the work in a goroutine of the bot's,
// within its concurrency bound; a Request with Reply set is answered in its thread, one answer at a
// time per thread, and can be stopped.
package route

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/slack-go/slack"
)

// Kind says what brought a request.
type Kind string

// The kinds of requests.
const (
	Message  Kind = "message"  // a mention, a DM or a thread follow-up (Name: MessageRoute)
	Command  Kind = "command"  // a slash command (Name: "/imagine")
	Action   Kind = "action"   // a block action, a button (Name: its action_id)
	Shortcut Kind = "shortcut" // a message or global shortcut (Name: its callback_id)
	// Event is an Events API event that is no message to answer (Name: its type, such as
	// "agent_session_stopped"): Slack's own controls around the bot's answers.
	Event Kind = "event"
	// View is a modal the bot opened, submitted (Name: its callback_id). The modal carries its
	// place (ViewPlace) in its private_metadata.
	View Kind = "view"
)

// MessageRoute is the Name of the one route of Kind Message.
const MessageRoute = "message"

// Features, as access rules and metrics name what a request asks for.
const (
	FeatureMention  = "mention"   // a mention in a channel
	FeatureFollowUp = "follow_up" // a thread message without a mention
	FeatureDM       = "dm"        // a direct message
)

// Request is one thing a person asks of the bot.
type Request struct {
	Kind Kind
	Name string // the route: MessageRoute, the command, the action_id or the callback_id
	// Feature is what access rules and metrics call the request: for messages FeatureMention,
	// FeatureDM or FeatureFollowUp, else the route's Feature.
	Feature string

	Channel, User, Team string
	// UserTeam is the team Slack names as the person's own (an event's user_team, a click's
	// user.team_id); "" when the payload does not say (Team may then be the workspace it came from).
	UserTeam string
	// ThreadTS and MessageTS are, for an action, the thread and the message of the clicked button;
	// for a message shortcut, the message's.
	ThreadTS, MessageTS string
	Text                string // a command's text, an action's value, a message shortcut's message text
	ResponseURL         string // commands, actions and shortcuts: where to answer privately
	TriggerID           string // commands, actions and shortcuts: opens a modal

	// Reply, when set, is answered in its thread: messages carry it, and an action's or a
	// shortcut's Accept sets it (Regenerate, Summarize thread).
	Reply *ReplyRequest
	// From is the replica that received the request from Slack and handed it to this one (a
	// click on an answer this replica writes); "": Slack sent it here.
	From string
	// Values are a submitted modal's inputs, by their action_id.
	Values map[string]string
}

// ViewPlace is where a modal the bot opens belongs, kept in its private_metadata: its submission
// is routed like a click there (the access rules of the channel, the message it is about).
type ViewPlace struct {
	Channel   string `json:"c"`
	ThreadTS  string `json:"t,omitempty"`
	MessageTS string `json:"m,omitempty"`
	Text      string `json:"x,omitempty"` // the opener's own, as a click's value
}

// Metadata is p as a modal's private_metadata (at most 3,000 characters: Text must be short).
func (p ViewPlace) Metadata() string {
	b, _ := json.Marshal(p) // strings only: cannot fail
	return string(b)
}

// ParseViewPlace reads a modal's private_metadata; false when it is none of the bot's.
func ParseViewPlace(metadata string) (ViewPlace, bool) {
	var p ViewPlace
	if err := json.Unmarshal([]byte(metadata), &p); err != nil || p.Channel == "" {
		return ViewPlace{}, false
	}
	return p, true
}

// AnswerID names the answer to the message ts in channel, the same on every replica: the journal
// of answers in progress and the clicks on an answer find it by this name.
func AnswerID(channel, ts string) string { return channel + "/" + ts }

// Decision is what Accept decided.
type Decision struct {
	// Run: the bot runs the request (Handler.Run), now or when there is room.
	Run bool
	// Say is told to the person at once: a slash command's ack, else privately where they are.
	// "": nothing.
	Say string
	// Quiet: when the request cannot run (the bot is full, or restarting), say nothing about it: a
	// follow-up that may not have been meant for the bot at all.
	Quiet bool
	// Now: Run starts at once, without waiting for a place among the model requests: short work with
	// Slack alone that must beat a deadline (a modal opened with a click's trigger, which Slack
	// honours for 3 seconds). Never for work that calls the model.
	Now bool
}

// Handler serves one route.
type Handler interface {
	// Accept decides at once, without I/O, whether req runs and what its person is told now. It
	// runs in the Socket Mode loop, before the envelope's ack for a slash command.
	Accept(req *Request) Decision
	// Run does the work, in a goroutine of the bot's. ctx ends at shutdown (with a cause) or when
	// the person stops the answer.
	Run(ctx context.Context, req *Request) error
}

// Funcs is a Handler made of two functions; a nil RunFunc does nothing.
type Funcs struct {
	AcceptFunc func(req *Request) Decision
	RunFunc    func(ctx context.Context, req *Request) error
}

// Accept calls AcceptFunc.
func (f Funcs) Accept(req *Request) Decision { return f.AcceptFunc(req) }

// Run calls RunFunc.
func (f Funcs) Run(ctx context.Context, req *Request) error {
	if f.RunFunc == nil {
		return nil
	}
	return f.RunFunc(ctx, req)
}

// Middleware wraps a Handler with a concern that applies to every route (access rules, metrics).
type Middleware func(next Handler) Handler

// Route is one registration: requests of Kind named Name go to Handler.
type Route struct {
	Kind    Kind
	Name    string
	Feature string // for access rules and metrics; "" : Name without a leading "/"
	Handler Handler
}

// Table maps routes to their handlers, each wrapped in the Table's middleware. Fill it at wiring
// time, before the bot runs; lookups are then safe from any goroutine.
type Table struct {
	mw     []Middleware
	routes map[key]entry
}

type key struct {
	kind Kind
	name string
}

type entry struct {
	h       Handler
	feature string
}

// NewTable returns an empty Table whose handlers are wrapped in mw, the first outermost.
func NewTable(mw ...Middleware) *Table {
	return &Table{mw: mw, routes: map[key]entry{}}
}

// ErrBadRoute is wrapped by Add's errors.
var ErrBadRoute = errors.New("bad route")

// Add registers routes. A route without a kind, name or handler, or one registered before, is
// refused: a wiring mistake must stop the bot at start, not leave a command that answers nothing.
func (t *Table) Add(routes ...Route) error {
	var errs []error
	for _, r := range routes {
		k := key{r.Kind, r.Name}
		switch {
		case r.Kind == "" || strings.TrimSpace(r.Name) == "":
			errs = append(errs, fmt.Errorf("%w: a %s route without a name", ErrBadRoute, cmp.Or(string(r.Kind), "kindless")))
			continue
		case r.Handler == nil:
			errs = append(errs, fmt.Errorf("%w: %s %q has no handler", ErrBadRoute, r.Kind, r.Name))
			continue
		}
		if _, dup := t.routes[k]; dup {
			errs = append(errs, fmt.Errorf("%w: %s %q registered twice", ErrBadRoute, r.Kind, r.Name))
			continue
		}
		h := r.Handler
		for i := len(t.mw) - 1; i >= 0; i-- {
			h = t.mw[i](h)
		}
		t.routes[k] = entry{h: h, feature: cmp.Or(r.Feature, strings.TrimPrefix(r.Name, "/"))}
	}
	return errors.Join(errs...)
}

// Lookup returns the handler of req's route, with req.Feature filled in when empty; ok is false
// when no route serves it.
func (t *Table) Lookup(req *Request) (h Handler, ok bool) {
	if t == nil {
		return nil, false
	}
	e, ok := t.routes[key{req.Kind, req.Name}]
	if !ok {
		return nil, false
	}
	if req.Feature == "" {
		req.Feature = e.feature
	}
	return e.h, true
}

// Has reports whether a route of kind is named name.
func (t *Table) Has(kind Kind, name string) bool {
	if t == nil {
		return false
	}
	_, ok := t.routes[key{kind, name}]
	return ok
}

// ReplyRequest is a message to answer in its thread (or DM).
type ReplyRequest struct {
	Channel     string
	ChannelType string // "channel", "group", "im", "mpim"
	User, Team  string
	UserTeam    string // the team Slack names as the person's own (user_team); "": not said
	TS          string // the triggering message
	// ThreadTS is the thread to answer in: for a top-level mention in a channel, the message's own ts.
	// "" = a top-level DM: answer in the DM, context = recent history.
	ThreadTS string
	Text     string // raw Slack text
	// ActionToken is the event's action_token (Slack's search with the asker's permissions): a
	// credential, never logged or shown; "" when the event carried none.
	ActionToken string
	Files       []slack.File
	// Attachments of the triggering message: a forwarded (shared) message, unfurls. A new thread is
	// not read, so they come with the request.
	Attachments []slack.Attachment
	FollowUp    bool // no mention: answer only if the thread involves the bot
	// Edited: the message was edited to add the bot's mention; not answered when the bot answered it
	// already.
	Edited bool
	// Regenerate: answer the message TS again (a Regenerate button). User is the person who
	// pressed it; the question is read from the thread (Text and Files are not used) and the
	// context is the thread up to it, so earlier answers to it are not replayed.
	Regenerate bool
	// Replace, on a Regenerate, is the ts of the message whose button was pressed (the old answer's
	// last message): the new answer is written in place of that answer. "": in a new message.
	Replace string
	// Task, when set, is something the bot does with the thread instead of answering the message
	// TS (TaskSummarize: summarise it; set by a message shortcut, and by Regenerate on
	// what it wrote). The whole thread is read and the task's instruction stands in for the
	// question; TS only names the message the shortcut was used on. User is the person who asked.
	Task string
	// ModelDone, when set, is called once the answer asks the model no more (its last writes may
	// still be under way): its place among MAX_CONCURRENT_REPLIES goes to the next question in line.
	ModelDone func()
}

// InDM reports whether the request comes from a direct message with the bot (channel type "im", or a
// channel ID starting with D when the type is not known).
func (r ReplyRequest) InDM() bool { return r.ChannelType == "im" || strings.HasPrefix(r.Channel, "D") }

// ChannelType guesses a channel's type from its id, for events that do not carry it.
func ChannelType(channel string) string {
	switch {
	case strings.HasPrefix(channel, "D"):
		return "im"
	case strings.HasPrefix(channel, "G"):
		return "group"
	}
	return "channel"
}

// Feature is what access rules and metrics call the request.
func (r ReplyRequest) Feature() string {
	switch {
	case r.FollowUp:
		return FeatureFollowUp
	case r.InDM():
		return FeatureDM
	}
	return FeatureMention
}
