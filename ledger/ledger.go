// Package ledger counts what the model is asked for and holds it to the team's budgets, at one
// seam: a decorator of the chat client (Chat) and of the image client (Imager) the use cases call,
// so answers, every tool round, summaries and pictures are all counted without a use case doing
// it. Who asked and where come from the request's context (With, put there by the route layer).
//
// A request is checked against the budgets before it is sent (an *OverBudget error, and nothing
// goes to the model), redacted (package redact, when the team asks for it), and counted after it:
// the tokens the provider reports (its usage chunk, or a non-streamed answer's usage), else an
// estimate marked as such. The counts are numbers only, kept by day and by month in the shared
// state (state.Tally: a Redis hash per period, so every replica counts into the same ones and
// holds the same budgets), per person, per channel and per model, for a retention period.
package ledger

import (
	"context"
	"strconv"
	"time"
)

// Who is who asked and where: the person, the channel and the place (the route's feature:
// "mention", "dm", "follow_up", "summarize", "imagine", ...).
type Who struct {
	User, Channel, Place string
}

type whoKey struct{}

// With returns ctx carrying w: every model request made within it is counted for w.
func With(ctx context.Context, w Who) context.Context { return context.WithValue(ctx, whoKey{}, w) }

// WhoOf is the Who ctx carries; a request without one is counted as the bot's own ("", "",
// "other") and checked against no person's or channel's budget.
func WhoOf(ctx context.Context) Who {
	w, _ := ctx.Value(whoKey{}).(Who)
	if w.Place == "" {
		w.Place = "other"
	}
	return w
}

// Budgets are the token budgets (input and output tokens together, estimated ones included); 0 is
// no budget.
type Budgets struct {
	PersonDay, PersonMonth, ChannelDay, ChannelMonth int64
}

// On reports whether any budget is set.
func (b Budgets) On() bool {
	return b.PersonDay > 0 || b.PersonMonth > 0 || b.ChannelDay > 0 || b.ChannelMonth > 0
}

// Period is a day or a month, in UTC.
type Period int

// The periods counted.
const (
	Day Period = iota
	Month
)

// group is the tally group of t's period.
func (p Period) group(t time.Time) string {
	t = t.UTC()
	if p == Month {
		return "usage:m:" + t.Format("2006-01")
	}
	return "usage:d:" + t.Format("2006-01-02")
}

// Resets is when the period holding t ends.
func (p Period) Resets(t time.Time) time.Time {
	t = t.UTC()
	y, m, d := t.Date()
	if p == Month {
		return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// OverBudget is the error of a request refused because a budget is spent: nothing was sent to the
// model. Its text is for logs; people are told notes.OverBudget.
type OverBudget struct {
	Scope  string // "person" or "channel"
	Period Period
	Limit  int64
	Resets time.Time
}

func (e *OverBudget) Error() string {
	p := "daily"
	if e.Period == Month {
		p = "monthly"
	}
	return "over budget: " + e.Scope + " " + p + " " + strconv.FormatInt(e.Limit, 10) + " tokens"
}

// Use is what one request cost.
type Use struct {
	Model      string
	Input      int64
	Output     int64
	Estimated  bool  // no usage came from the provider: the tokens are an estimate
	Images     int64 // pictures made
	ImageBytes int64 // their size
}
