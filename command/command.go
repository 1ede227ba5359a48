// Package command is the bot's one slash command, /llmbot, whose subcommands are rows of a table:
// each use case that people steer from Slack (a channel's instructions, its scheduled prompts) gives
// its row (a Sub), and the wiring registers the Command once as a route. Help and unknown
// subcommands are answered in the command's ack; a subcommand runs at once (it does Slack and
// shared-state work, never the model) and its answer goes to the person privately through the
// command's response_url. Access rules and metrics wrap the route like any other.
package command

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/route"
)

// Name is the slash command; Feature is what access rules and metrics call it.
const (
	Name    = "/llmbot"
	Feature = "llmbot"
)

// Call is one use of a subcommand.
type Call struct {
	Team, Channel, User string
	Args                string // the text after the subcommand's name, trimmed
	Now                 time.Time
}

// Sub is one subcommand: a row of the table.
type Sub struct {
	Name  string
	Usage []string // its help lines, each "/llmbot <name> ...: what it does" (the first ": " ends the syntax)
	// Run does the work and returns what the person is told privately. An error is logged and the
	// person told that it went wrong; what they got wrong is a text, not an error.
	Run func(ctx context.Context, c Call) (string, error)
}

// Responder answers a slash command privately through its response_url.
type Responder interface {
	Respond(ctx context.Context, responseURL, text string) error
}

// Command is /llmbot.
type Command struct {
	subs []Sub
	resp Responder
	log  *zap.Logger
}

// ErrBadSub is wrapped by New's errors: a wiring mistake.
var ErrBadSub = errors.New("bad subcommand")

// New returns /llmbot with subs. A sub without a name or Run, or one named twice, is refused.
func New(resp Responder, log *zap.Logger, subs ...Sub) (*Command, error) {
	var errs []error
	for i, s := range subs {
		switch {
		case s.Name == "" || strings.ContainsAny(s.Name, " \t\n") || s.Run == nil:
			errs = append(errs, fmt.Errorf("%w: %q", ErrBadSub, s.Name))
		case s.Name == "help" || slices.ContainsFunc(subs[:i], func(o Sub) bool { return o.Name == s.Name }):
			errs = append(errs, fmt.Errorf("%w: %q named twice", ErrBadSub, s.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Command{subs: subs, resp: resp, log: log}, nil
}

// Help is what /llmbot help says.
func (c *Command) Help() string {
	lines := []string{"*" + Name + "* — steer me in this channel:"}
	for _, s := range c.subs {
		for _, u := range s.Usage {
			syntax, what, _ := strings.Cut(u, ": ")
			lines = append(lines, "• `"+syntax+"`: "+what)
		}
	}
	lines = append(lines, "• `"+Name+" help`: this list")
	return strings.Join(lines, "\n")
}

// split is the subcommand's name (lower case) and its arguments.
func split(text string) (name, args string) {
	text = strings.TrimSpace(text)
	name, args, _ = strings.Cut(text, " ")
	return strings.ToLower(name), strings.TrimSpace(args)
}

func (c *Command) find(name string) (Sub, bool) {
	i := slices.IndexFunc(c.subs, func(s Sub) bool { return s.Name == name })
	if i < 0 {
		return Sub{}, false
	}
	return c.subs[i], true
}

// Accept answers help and unknown subcommands in the ack; any other runs at once.
func (c *Command) Accept(req *route.Request) route.Decision {
	name, _ := split(req.Text)
	if name == "" || name == "help" {
		return route.Decision{Say: c.Help()}
	}
	if _, ok := c.find(name); !ok {
		return route.Decision{Say: fmt.Sprintf("I don't know `%s %s`.\n%s", Name, strings.ReplaceAll(name, "`", "'"), c.Help())}
	}
	return route.Decision{Run: true, Now: true}
}

// respondTimeout bounds the private answer once the work is done.
const respondTimeout = 10 * time.Second

// Run runs the subcommand and tells the person its answer.
func (c *Command) Run(ctx context.Context, req *route.Request) error {
	name, args := split(req.Text)
	sub, ok := c.find(name)
	if !ok {
		return nil // Accept answered it
	}
	text, err := sub.Run(ctx, Call{Team: req.Team, Channel: req.Channel, User: req.User, Args: args, Now: time.Now()})
	if err != nil {
		c.log.Error("llmbot command failed", zap.String("sub", name), zap.String("channel", req.Channel), zap.String("user", req.User), zap.Error(err))
		text = "Something went wrong — please try again."
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), respondTimeout)
	defer cancel()
	if err := c.resp.Respond(rctx, req.ResponseURL, text); err != nil {
		return fmt.Errorf("llmbot %s: respond: %w", name, err)
	}
	return nil
}
