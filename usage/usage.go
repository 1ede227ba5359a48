// Package usage is the /usage command: a person sees their own use of the model today and this
// month (and where a budget holds, how much of it is left); the people named as admins also see
// everyone's, the top people, channels and models, and the cost from the price table. The answer
// is private (the command's response_url) and reads the ledger only: no model request.
package usage

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/ledger"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/route"
)

// Command is the slash command, and Feature what access rules and metrics call it.
const (
	Command = "/usage"
	Feature = "usage"
)

// Reports reads the ledger (*ledger.Book).
type Reports interface {
	Report(ctx context.Context, p ledger.Period, user string, top int) (ledger.Report, error)
}

// Responder answers a command privately through its response_url.
type Responder interface {
	Respond(ctx context.Context, responseURL, text string) error
}

// Options configure the command.
type Options struct {
	Admins  []string      // user ids who also see everyone's use
	Prices  ledger.Prices // per model; empty: no cost shown
	Budgets ledger.Budgets
	Top     int // how many people, channels and models an admin sees (default 5)
}

// Usage serves /usage.
type Usage struct {
	r   Reports
	out Responder
	log *zap.Logger
	opt Options
	now func() time.Time
}

// New returns the /usage use case.
func New(r Reports, out Responder, log *zap.Logger, opt Options) *Usage {
	if log == nil {
		log = zap.NewNop()
	}
	if opt.Top <= 0 {
		opt.Top = 5
	}
	return &Usage{r: r, out: out, log: log, opt: opt, now: time.Now}
}

// answerTimeout bounds the reads and the private answer.
const answerTimeout = 10 * time.Second

// Handler serves Command: it runs at once (it asks no model, so it waits for no place among the
// answers) and answers privately.
func (u *Usage) Handler() route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			if req.ResponseURL == "" {
				return route.Decision{}
			}
			return route.Decision{Run: true, Now: true}
		},
		RunFunc: u.run,
	}
}

func (u *Usage) run(ctx context.Context, req *route.Request) error {
	ctx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	admin := slices.Contains(u.opt.Admins, req.User)
	top := 0
	if admin {
		top = u.opt.Top
	}
	day, err := u.r.Report(ctx, ledger.Day, req.User, 0)
	var month ledger.Report
	if err == nil {
		month, err = u.r.Report(ctx, ledger.Month, req.User, top)
	}
	text := "Your use could not be read just now, please try again in a minute."
	if err != nil {
		u.log.Warn("usage: report not read", zap.Error(err))
	} else {
		text = Render(day, month, u.opt, admin, u.now())
	}
	if err := u.out.Respond(ctx, req.ResponseURL, text); err != nil {
		return fmt.Errorf("usage respond: %w", err)
	}
	return nil
}

// Render is the answer: the person's day and month, and for an admin everyone's month.
func Render(day, month ledger.Report, opt Options, admin bool, now time.Time) string {
	var b strings.Builder
	b.WriteString("*Your use of the model*\n")
	line(&b, "Today", day.Mine, opt.Budgets.PersonDay, ledger.Day.Resets(now), now)
	line(&b, "This month", month.Mine, opt.Budgets.PersonMonth, ledger.Month.Resets(now), now)
	if month.Mine.Estimated > 0 {
		b.WriteString("_Some figures are estimates: the model service did not report them._\n")
	}
	if admin {
		everyone(&b, month, opt.Prices)
	}
	return strings.TrimRight(b.String(), "\n")
}

// line writes one period's figures, and its budget when one holds.
func line(b *strings.Builder, label string, t ledger.Totals, budget int64, resets, now time.Time) {
	fmt.Fprintf(b, "• %s: %s tokens (%s in, %s out)", label, notes.Thousands(t.Tokens()),
		notes.Thousands(t.Input), notes.Thousands(t.Output))
	if t.Images > 0 {
		fmt.Fprintf(b, ", %s", pictures(t.Images))
	}
	if budget > 0 {
		left := max(0, budget-t.Tokens())
		fmt.Fprintf(b, "; %s of your %s left, renewed %s", notes.Thousands(left), notes.Thousands(budget), when(resets, now))
	}
	b.WriteString("\n")
}

func pictures(n int64) string {
	if n == 1 {
		return "1 picture"
	}
	return strconv.FormatInt(n, 10) + " pictures"
}

func when(t, now time.Time) string {
	if t.Sub(now) < 24*time.Hour {
		return "at " + t.UTC().Format("15:04") + " UTC"
	}
	return "on " + t.UTC().Format("2 January")
}

// everyone writes the month's totals, top lists and cost, for admins.
func everyone(b *strings.Builder, month ledger.Report, prices ledger.Prices) {
	fmt.Fprintf(b, "\n*Everyone this month*: %s tokens", notes.Thousands(month.All.Tokens()))
	if month.All.Images > 0 {
		fmt.Fprintf(b, ", %s", pictures(month.All.Images))
	}
	b.WriteString("\n")
	list(b, "People", month.People, func(id string) string { return "<@" + id + ">" })
	list(b, "Channels", month.Channels, channel)
	if len(prices) == 0 {
		list(b, "Models", month.Models, func(id string) string { return "`" + id + "`" })
		return
	}
	var total float64
	var unpriced []string
	parts := make([]string, 0, len(month.Models))
	for _, m := range month.Models {
		c, ok := prices.Cost(m.ID, m)
		entry := "`" + m.ID + "` " + notes.Thousands(m.Tokens())
		if ok {
			total += c
			entry += " (" + money(c) + ")"
		} else {
			unpriced = append(unpriced, "`"+m.ID+"`")
		}
		parts = append(parts, entry)
	}
	if len(parts) > 0 {
		b.WriteString("• Models: " + strings.Join(parts, " · ") + "\n")
	}
	fmt.Fprintf(b, "• Cost of these models: %s", money(total))
	if len(unpriced) > 0 {
		b.WriteString(" (no price for " + strings.Join(unpriced, ", ") + ")")
	}
	b.WriteString("\n")
}

func list(b *strings.Builder, label string, ts []ledger.Totals, name func(string) string) {
	if len(ts) == 0 {
		return
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = name(t.ID) + " " + notes.Thousands(t.Tokens())
	}
	b.WriteString("• " + label + ": " + strings.Join(parts, " · ") + "\n")
}

// channel names a channel for Slack; a DM is not a channel anyone else can open.
func channel(id string) string {
	if strings.HasPrefix(id, "D") {
		return "a DM (" + id + ")"
	}
	return "<#" + id + ">"
}

// money is a cost in the price table's currency: cents, and under a cent said so.
func money(c float64) string {
	if c > 0 && c < 0.005 {
		return "under 0.01"
	}
	return strconv.FormatFloat(c, 'f', 2, 64)
}
