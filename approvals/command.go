package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/llmbot/llmbot/command"
	"github.com/llmbot/llmbot/slackmd"
)

// Command is the row of "/llmbot tools": the tools the person always allows ("Always allow this
// tool"), and revoking them. It answers the person alone, wherever it is typed: the grants are theirs.
func (p *Approvals) Command() command.Sub {
	return command.Sub{
		Name: "tools",
		Usage: []string{
			command.Name + " tools: the tools you always allow me to use without asking",
			command.Name + " tools revoke <tool>: ask you again before using it (`all`: every tool)",
		},
		Run: toolsCommand{p.always}.run,
	}
}

// toolsCommand serves /llmbot tools over the always grants.
type toolsCommand struct{ always always }

// ErrNoAlways: the grants are not kept (no records wired).
var ErrNoAlways = errors.New("always-allowed tools are not kept")

func (p toolsCommand) run(ctx context.Context, c command.Call) (string, error) {
	if p.always.rec == nil {
		return "", ErrNoAlways
	}
	verb, tool, _ := strings.Cut(c.Args, " ")
	tool = strings.TrimSpace(strings.Trim(strings.TrimSpace(tool), "`"))
	switch strings.ToLower(verb) {
	case "", "list", "show":
		return p.listText(ctx, c.User)
	case "revoke":
		return p.revokeText(ctx, c.User, tool)
	}
	return "Use `" + command.Name + " tools` or `" + command.Name + " tools revoke <tool>`.", nil
}

func (p toolsCommand) listText(ctx context.Context, user string) (string, error) {
	gs, err := p.always.list(ctx, user)
	if err != nil || len(gs) == 0 {
		return "You always allow no tool: I ask you before each call that needs approval.", err
	}
	lines := []string{"You always allow me to use these tools without asking (`" + command.Name + " tools revoke <tool>` to be asked again):"}
	for _, g := range gs {
		lines = append(lines, fmt.Sprintf("• `%s` of *%s*, since <!date^%d^{date_short_pretty}|%s>", safeName(g.Tool),
			slackmd.EscapeMrkdwn(slackmd.Neutralise(g.Server)), g.At.Unix(), g.At.Format("2006-01-02")))
	}
	return strings.Join(lines, "\n"), nil
}

func (p toolsCommand) revokeText(ctx context.Context, user, tool string) (string, error) {
	switch tool {
	case "":
		return "Name the tool: `" + command.Name + " tools revoke <tool>` (`" + command.Name + " tools` lists them).", nil
	case "all":
		gs, err := p.always.list(ctx, user)
		if err != nil {
			return "", err
		}
		for _, g := range gs {
			if _, err := p.always.revoke(ctx, user, g.Tool); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("Revoked %d tools: I will ask you before using them again.", len(gs)), nil
	}
	ok, err := p.always.revoke(ctx, user, tool)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "You do not always allow `" + safeName(tool) + "` (`" + command.Name + " tools` lists those you do).", nil
	}
	return "Revoked: I will ask you before using `" + safeName(tool) + "` again.", nil
}

// safeName is a tool's name inside inline code in mrkdwn.
func safeName(s string) string {
	return strings.ReplaceAll(slackmd.EscapeMrkdwn(slackmd.Neutralise(s)), "`", "'")
}
