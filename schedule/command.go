package schedule

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmbot/llmbot/command"
	"github.com/llmbot/llmbot/slackmd"
)

// Command is the row of "/llmbot schedule": add <when> | <prompt>, list, delete <id>. editors, besides a
// schedule's creator, may delete any schedule (none named: only its creator).
func (s *Schedules) Command(editors []string) command.Sub {
	return command.Sub{
		Name: "schedule",
		Usage: []string{
			command.Name + " schedule add every weekday at 9:00 Europe/Berlin | <prompt>: ask me <prompt> here at those times, as you",
			command.Name + " schedule add every monday at 9:00 | summarize 7d: post a summary of this channel's last 7 days here at those times",
			command.Name + " schedule list: this channel's scheduled prompts and their next runs",
			command.Name + " schedule delete <id>: stop one (its creator)",
		},
		Run: func(ctx context.Context, c command.Call) (string, error) {
			verb, rest, _ := strings.Cut(c.Args, " ")
			switch strings.ToLower(verb) {
			case "add":
				return s.add(ctx, c, rest)
			case "", "list":
				return s.list(ctx, c)
			case "delete", "remove":
				return s.delete(ctx, c, rest, editors)
			}
			return "Use `" + command.Name + " schedule add <when> | <prompt>`, `list` or `delete <id>`.", nil
		},
	}
}

func (s *Schedules) add(ctx context.Context, c command.Call, text string) (string, error) {
	sc, err := s.Add(ctx, c.Team, c.Channel, c.User, text, c.Now)
	if why, ok := IsRefusal(err); ok {
		return why, nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Scheduled `%s`: %s, next %s. It runs here as if you asked; `%s schedule delete %s` stops it.",
		sc.ID, sc.When, slackDate(sc.Next(c.Now)), command.Name, sc.ID), nil
}

func (s *Schedules) list(ctx context.Context, c command.Call) (string, error) {
	in, err := s.In(ctx, c.Channel)
	if err != nil {
		return "", err
	}
	if len(in) == 0 {
		return "This channel has no scheduled prompts. `" + command.Name + " schedule add every weekday at 9:00 | <prompt>` adds one.", nil
	}
	lines := []string{"This channel's scheduled prompts:"}
	for _, sc := range in {
		lines = append(lines, fmt.Sprintf("• `%s` %s, by <@%s>, next %s: %s", sc.ID, sc.When, sc.Creator, slackDate(sc.Next(c.Now)), short(sc.Prompt)))
	}
	return strings.Join(lines, "\n"), nil
}

func (s *Schedules) delete(ctx context.Context, c command.Call, id string, editors []string) (string, error) {
	sc, err := s.Delete(ctx, c.Channel, id, func(sc Schedule) bool {
		return sc.Creator == c.User || slices.Contains(editors, c.User)
	})
	if why, ok := IsRefusal(err); ok {
		return why, nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Deleted `%s` (%s).", sc.ID, sc.When), nil
}

// slackDate shows t in the reader's own time zone (Slack's date formatting), with a UTC fallback.
func slackDate(t time.Time) string {
	return fmt.Sprintf("<!date^%d^{date_short_pretty} at {time}|%s>", t.Unix(), t.UTC().Format("2006-01-02 15:04 UTC"))
}

// short is a prompt on one line, at most 80 characters, safe to show: no mention, no markup.
func short(p string) string {
	p = strings.Join(strings.Fields(p), " ")
	if utf8.RuneCountInString(p) > 80 {
		p = string([]rune(p)[:79]) + "…"
	}
	return slackmd.EscapeMrkdwn(slackmd.Neutralise(p))
}
