package instructions

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/llmbot/llmbot/command"
)

// Command is the row of "/llmbot instructions": show, set <text>, clear.
func (in *Instructions) Command() command.Sub {
	return command.Sub{
		Name: "instructions",
		Usage: []string{
			command.Name + " instructions show: this channel's standing instructions for me",
			command.Name + " instructions set <text>: replace them (the channel is told who did)",
			command.Name + " instructions clear: remove them (the channel is told who did)",
		},
		Run: in.run,
	}
}

func (in *Instructions) run(ctx context.Context, c command.Call) (string, error) {
	verb, text, _ := strings.Cut(c.Args, " ")
	switch strings.ToLower(verb) {
	case "", "show":
		return in.show(ctx, c.Channel)
	case "set":
		if strings.TrimSpace(text) == "" {
			return "Write the instructions after `set`: `" + command.Name + " instructions set Answer in the customer's language.`", nil
		}
		return in.change(ctx, c, text, "Saved; the channel was told.")
	case "clear":
		return in.change(ctx, c, "", "Cleared; the channel was told.")
	}
	return "Use `" + command.Name + " instructions show`, `set <text>` or `clear`.", nil
}

func (in *Instructions) show(ctx context.Context, channel string) (string, error) {
	s, ok, err := in.Get(ctx, channel)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "This channel has no instructions for me. `" + command.Name + " instructions set <text>` sets them.", nil
	}
	return fmt.Sprintf("This channel's instructions for me, set by <@%s> <!date^%d^{date_short_pretty}|%s>:\n%s",
		s.By, s.SetAt.Unix(), s.SetAt.Format("2006-01-02"), Quote(s.Text)), nil
}

func (in *Instructions) change(ctx context.Context, c command.Call, text, done string) (string, error) {
	var r *Refusal
	switch err := in.Change(ctx, c.Channel, c.User, text, c.Now); {
	case errors.As(err, &r):
		return r.Text, nil
	case err != nil:
		return "", err
	}
	return done, nil
}
