package main

import (
	"fmt"
	"time"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/doctor"
	"github.com/llmbot/llmbot/ledger"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/redact"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/summarize"
	"github.com/llmbot/llmbot/usage"
)

// The team's controls from the settings: usage counted per person, channel and model, budgets,
// redaction before the model, and /usage.

// controlsProblems checks REDACT, REDACT_PATTERNS, PRICES, the budgets and the retention.
func (c Config) controlsProblems(p *problemList) {
	if _, err := redact.ParseKinds(c.Redact); err != nil {
		p.add("REDACT: %v", err)
	}
	if _, err := redact.ParsePatterns(c.RedactPatterns); err != nil {
		p.add("REDACT_PATTERNS: %v", err)
	}
	if _, err := ledger.ParsePrices(c.Prices); err != nil {
		p.add("PRICES: %v", err)
	}
	for _, b := range []struct {
		name  string
		value int64
	}{{"BUDGET_PERSON_DAILY", c.BudgetPersonDaily}, {"BUDGET_PERSON_MONTHLY", c.BudgetPersonMonthly},
		{"BUDGET_CHANNEL_DAILY", c.BudgetChannelDaily}, {"BUDGET_CHANNEL_MONTHLY", c.BudgetChannelMonthly}} {
		if b.value < 0 {
			p.add("%s: %d is below 0 (0: no budget)", b.name, b.value)
		}
	}
	p.atLeast("USAGE_RETENTION_DAYS", c.UsageRetentionDays, 1)
}

// budgets are the BUDGET_* settings.
func (c Config) budgets() ledger.Budgets {
	return ledger.Budgets{PersonDay: c.BudgetPersonDaily, PersonMonth: c.BudgetPersonMonthly,
		ChannelDay: c.BudgetChannelDaily, ChannelMonth: c.BudgetChannelMonthly}
}

// redactor is REDACT and REDACT_PATTERNS' redactor; nil when both are unset (validated).
func (c Config) redactor() *redact.Redactor {
	kinds, _ := redact.ParseKinds(c.Redact)
	patterns, _ := redact.ParsePatterns(c.RedactPatterns)
	if len(kinds) == 0 && len(patterns) == 0 {
		return nil
	}
	r, _ := redact.New(kinds, patterns) // parsed kinds and patterns are valid
	return r
}

func (c Config) retention() time.Duration {
	return time.Duration(c.UsageRetentionDays) * 24 * time.Hour
}

// costly are the features whose requests ask the model: their budgets are checked before they run.
var costly = []string{route.FeatureMention, route.FeatureDM, route.FeatureFollowUp, route.FeatureRegenerate,
	summarize.Feature, access.FeatureImagine}

// controls are the ledger's parts: the book of counts and budgets, the meter at the model seam,
// the gate in the route middleware.
type controls struct {
	book  *ledger.Book
	meter *ledger.Meter
	gate  *ledger.Gate
}

// newControls builds the ledger over the shared state's tallies.
func (p *parts) newControls() controls {
	book := ledger.NewBook(p.shared.tallies, p.cfg.budgets(), p.cfg.retention())
	hooks := p.metrics.LedgerHooks()
	log := p.log.Named("ledger")
	return controls{
		book:  book,
		meter: &ledger.Meter{Book: book, Redactor: p.cfg.redactor(), Hooks: hooks, Log: log},
		gate: ledger.NewGate(ledger.GateOptions{Book: book, Costly: costly, Notifier: p.notices, Note: notes.OverBudget,
			Hooks: hooks, Log: log}),
	}
}

// usage is /usage.
func (p *parts) usage(book *ledger.Book) *usage.Usage {
	prices, _ := ledger.ParsePrices(p.cfg.Prices) // validated
	return usage.New(book, p.api, p.log.Named("usage"), usage.Options{
		Admins: access.ParseIDs(p.cfg.UsageAdmins), Prices: prices, Budgets: p.cfg.budgets()})
}

// doctorControls says which controls are on, for llmbot doctor.
func (c Config) doctorControls() doctor.Controls {
	prices, _ := ledger.ParsePrices(c.Prices)
	d := doctor.Controls{Shared: c.RedisURL != "", Retention: c.UsageRetentionDays,
		Admins: len(access.ParseIDs(c.UsageAdmins)), Prices: len(prices)}
	for _, b := range []struct {
		name  string
		value int64
	}{{"person daily", c.BudgetPersonDaily}, {"person monthly", c.BudgetPersonMonthly},
		{"channel daily", c.BudgetChannelDaily}, {"channel monthly", c.BudgetChannelMonthly}} {
		if b.value > 0 {
			d.Budgets = append(d.Budgets, fmt.Sprintf("%s %s", b.name, notes.Thousands(b.value)))
		}
	}
	if r := c.redactor(); r != nil {
		for _, k := range r.Kinds() {
			d.Redaction = append(d.Redaction, string(k))
		}
	}
	return d
}
