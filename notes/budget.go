package notes

import (
	"strconv"
	"time"

	"github.com/llmbot/llmbot/ledger"
)

// OverBudget is the private note for a request refused because a budget is spent: whose budget,
// of how many tokens, and when it resets (UTC, and how long from now).
func OverBudget(e *ledger.OverBudget, now time.Time) string {
	whose, period := "Your", "daily"
	if e.Scope == "channel" {
		whose = "This channel's"
	}
	if e.Period == ledger.Month {
		period = "monthly"
	}
	return whose + " " + period + " budget of " + Thousands(e.Limit) + " tokens is spent, so this was not sent " +
		"to the model. It resets " + resets(e.Resets, now) + "."
}

// resets says when t is, from now: "at 00:00 UTC (in 5 hours)", or "on 1 January at 00:00 UTC".
func resets(t, now time.Time) string {
	t = t.UTC()
	left := t.Sub(now)
	if left < 24*time.Hour {
		h := int(left.Hours())
		in := "in " + strconv.Itoa(h) + " hours"
		switch {
		case h < 1:
			in = "in " + strconv.Itoa(max(1, int(left.Minutes()))) + " minutes"
		case h == 1:
			in = "in an hour"
		}
		return "at " + t.Format("15:04") + " UTC (" + in + ")"
	}
	return "on " + t.Format("2 January") + " at " + t.Format("15:04") + " UTC"
}

// Thousands writes n with commas between thousands: 1,250,000.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}
