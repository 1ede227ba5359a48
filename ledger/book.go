package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmbot/llmbot/state"
)

// Tallies are the shared state's groups of counters (state.RedisTallies, MemoryTallies,
// FallbackTallies).
type Tallies interface {
	Add(ctx context.Context, ts ...state.Tally) error
	Get(ctx context.Context, group string, fields ...string) ([]int64, error)
	All(ctx context.Context, group string) (map[string]int64, error)
}

// Book is the ledger's counts and budgets over the shared state. Safe for concurrent use.
type Book struct {
	t         Tallies
	budgets   Budgets
	retention time.Duration
	now       func() time.Time
}

// NewBook returns a Book counting into t, keeping a day's counts for retention (a month's for
// retention and a month more, so this month's total outlives its first days).
func NewBook(t Tallies, budgets Budgets, retention time.Duration) *Book {
	return &Book{t: t, budgets: budgets, retention: max(retention, 24*time.Hour), now: time.Now}
}

// Budgets are the budgets b holds.
func (b *Book) Budgets() Budgets { return b.budgets }

// The fields of a period's group: a letter for what is counted, its id, and the measure. Slack's
// ids and model names hold no ':'.
const (
	byPerson  = "u:"
	byChannel = "c:"
	byModel   = "m:"
	total     = "t:"
)

func field(by, id, measure string) string { return by + id + ":" + measure }

// Record counts u for w in today's and this month's groups.
func (b *Book) Record(ctx context.Context, w Who, u Use) error {
	fields := map[string]int64{}
	add := func(by, id string) {
		if id == "" {
			return
		}
		for measure, n := range map[string]int64{"in": u.Input, "out": u.Output, "img": u.Images, "imgb": u.ImageBytes} {
			if n != 0 {
				fields[field(by, id, measure)] += n
			}
		}
		if u.Estimated {
			fields[field(by, id, "est")] += u.Input + u.Output
		}
	}
	add(byPerson, safeID(w.User))
	add(byChannel, safeID(w.Channel))
	add(byModel, safeID(cmp.Or(u.Model, "default")))
	add(total, "all")
	if len(fields) == 0 {
		return nil
	}
	now := b.now()
	err := b.t.Add(ctx,
		state.Tally{Group: Day.group(now), Fields: fields, TTL: b.retention},
		state.Tally{Group: Month.group(now), Fields: fields, TTL: b.retention + 31*24*time.Hour})
	if err != nil {
		return fmt.Errorf("ledger record: %w", err)
	}
	return nil
}

// safeID keeps an id as a field name: Slack's ids and model names, never a ':' or a long string
// (a hostile model name from a channel's settings cannot make fields without bound).
func safeID(id string) string {
	if len(id) > 100 {
		id = id[:100]
	}
	return strings.ReplaceAll(id, ":", "_")
}

// Check returns an *OverBudget when a budget of w's person or channel is spent, today or this
// month; nil otherwise, and nil at once when no budget is set.
func (b *Book) Check(ctx context.Context, w Who) error {
	if !b.budgets.On() {
		return nil
	}
	now := b.now()
	for _, p := range []Period{Day, Month} {
		person, channel := b.budgets.PersonDay, b.budgets.ChannelDay
		if p == Month {
			person, channel = b.budgets.PersonMonth, b.budgets.ChannelMonth
		}
		if (person == 0 || w.User == "") && (channel == 0 || w.Channel == "") {
			continue
		}
		u, c := safeID(w.User), safeID(w.Channel)
		n, err := b.t.Get(ctx, p.group(now), field(byPerson, u, "in"), field(byPerson, u, "out"),
			field(byChannel, c, "in"), field(byChannel, c, "out"))
		if err != nil {
			return fmt.Errorf("ledger check: %w", err)
		}
		switch {
		case person > 0 && w.User != "" && n[0]+n[1] >= person:
			return &OverBudget{Scope: "person", Period: p, Limit: person, Resets: p.Resets(now)}
		case channel > 0 && w.Channel != "" && n[2]+n[3] >= channel:
			return &OverBudget{Scope: "channel", Period: p, Limit: channel, Resets: p.Resets(now)}
		}
	}
	return nil
}

// Totals are what was used in a period by one person, channel or model.
type Totals struct {
	ID                       string
	Input, Output, Estimated int64
	Images, ImageBytes       int64
}

// Tokens are the input and output tokens together.
func (t Totals) Tokens() int64 { return t.Input + t.Output }

// Report is a period's use: the person's own, and for admins the top people, channels and models.
type Report struct {
	Period   Period
	Since    time.Time // the period's start
	Mine     Totals
	All      Totals
	People   []Totals // by tokens, most first
	Channels []Totals
	Models   []Totals
}

// Report reads the period holding now for user. top bounds each list (0: the lists are not
// made, only the person's own figures).
func (b *Book) Report(ctx context.Context, p Period, user string, top int) (Report, error) {
	now := b.now().UTC()
	all, err := b.t.All(ctx, p.group(now))
	if err != nil {
		return Report{}, fmt.Errorf("ledger report: %w", err)
	}
	start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if p == Month {
		start = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	by := totalsBy(all)
	r := Report{Period: p, Since: start, Mine: by[byPerson][safeID(user)], All: by[total]["all"]}
	r.Mine.ID = user
	if top > 0 {
		r.People, r.Channels, r.Models = ranked(by[byPerson], top), ranked(by[byChannel], top), ranked(by[byModel], top)
	}
	return r, nil
}

// totalsBy reads a group's fields into totals by kind ("u:", "c:", "m:", "t:") and id.
func totalsBy(all map[string]int64) map[string]map[string]Totals {
	by := map[string]map[string]Totals{byPerson: {}, byChannel: {}, byModel: {}, total: {}}
	for f, n := range all {
		kind, rest, ok := strings.Cut(f, ":")
		id, measure, ok2 := strings.Cut(rest, ":")
		m, known := by[kind+":"]
		if !ok || !ok2 || !known {
			continue
		}
		t := m[id]
		t.ID = id
		switch measure {
		case "in":
			t.Input += n
		case "out":
			t.Output += n
		case "est":
			t.Estimated += n
		case "img":
			t.Images += n
		case "imgb":
			t.ImageBytes += n
		}
		m[id] = t
	}
	return by
}

// ranked is the top n of m by tokens (then pictures, then id).
func ranked(m map[string]Totals, n int) []Totals {
	out := make([]Totals, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Totals) int {
		return cmp.Or(cmp.Compare(b.Tokens(), a.Tokens()), cmp.Compare(b.Images, a.Images), strings.Compare(a.ID, b.ID))
	})
	return out[:min(n, len(out))]
}
