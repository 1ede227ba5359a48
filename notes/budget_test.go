package notes

import (
	"fmt"
	"testing"
	"time"

	"github.com/llmbot/llmbot/ledger"
)

func TestOverBudget(t *testing.T) {
	now := time.Date(2026, 12, 2, 19, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		e    ledger.OverBudget
		want string
	}{
		{ledger.OverBudget{Scope: "person", Period: ledger.Day, Limit: 100000, Resets: ledger.Day.Resets(now)},
			"Your daily budget of 100,000 tokens is spent, so this was not sent to the model. It resets at 00:00 UTC (in 5 hours)."},
		{ledger.OverBudget{Scope: "channel", Period: ledger.Month, Limit: 2500000, Resets: ledger.Month.Resets(now)},
			"This channel's monthly budget of 2,500,000 tokens is spent, so this was not sent to the model. It resets on 1 January at 00:00 UTC."},
		{ledger.OverBudget{Scope: "person", Period: ledger.Day, Limit: 10, Resets: now.Add(20 * time.Minute)},
			"Your daily budget of 10 tokens is spent, so this was not sent to the model. It resets at 19:20 UTC (in 20 minutes)."},
	} {
		if got := OverBudget(&tc.e, now); got != tc.want {
			t.Errorf("OverBudget(%+v)\n got %q\nwant %q", tc.e, got, tc.want)
		}
	}
}

// TestModelNoteOfABudget: a budget spent in the middle of an answer ends it with the same note.
func TestModelNoteOfABudget(t *testing.T) {
	err := fmt.Errorf("round 2: %w", &ledger.OverBudget{Scope: "person", Period: ledger.Day, Limit: 5, Resets: time.Now().Add(3 * time.Hour)})
	if got, want := Model(err, true)[:len("Your daily budget of 5 tokens is spent")], "Your daily budget of 5 tokens is spent"; got != want {
		t.Errorf("Model = %q", Model(err, true))
	}
}
