package ledger

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// notices records private notes.
type notices struct {
	mu   sync.Mutex
	told []string
}

func (n *notices) Ephemeral(_ context.Context, channel, user, threadTS, text string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.told = append(n.told, channel+"/"+user+"/"+threadTS+": "+text)
	return nil
}

// TestGate: every request runs with its Who in its context; a costly one whose budget is spent
// is told so privately and does not run; a free one runs whatever the budget.
func TestGate(t *testing.T) {
	mem, err := state.NewMemory("a", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := NewBook(mem.Tallies(), Budgets{PersonDay: 100}, 24*time.Hour)
	n := &notices{}
	g := NewGate(GateOptions{Book: b, Costly: []string{"mention", "imagine"}, Notifier: n,
		Note: func(e *OverBudget, _ time.Time) string { return "spent: " + e.Scope }})
	var ran []Who
	h := g.Middleware(route.Funcs{
		AcceptFunc: func(*route.Request) route.Decision { return route.Decision{Run: true} },
		RunFunc: func(ctx context.Context, req *route.Request) error {
			ran = append(ran, WhoOf(ctx))
			return nil
		},
	})
	mention := &route.Request{Feature: "mention", User: "U1", Channel: "C1",
		Reply: &route.ReplyRequest{Channel: "C1", ThreadTS: "1.1", TS: "1.2"}}
	usage := &route.Request{Feature: "usage", User: "U1", Channel: "C1"}
	if err := h.Run(t.Context(), mention); err != nil {
		t.Fatal(err)
	}
	if err := b.Record(t.Context(), Who{User: "U1", Channel: "C1"}, Use{Input: 100}); err != nil {
		t.Fatal(err)
	}
	if err := h.Run(t.Context(), mention); !errors.Is(err, route.ErrIgnored) {
		t.Errorf("a mention over budget: %v, want ignored", err)
	}
	if err := h.Run(t.Context(), usage); err != nil {
		t.Errorf("/usage over budget: %v, want it to run", err)
	}
	want := []Who{{User: "U1", Channel: "C1", Place: "mention"}, {User: "U1", Channel: "C1", Place: "usage"}}
	if len(ran) != 2 || ran[0] != want[0] || ran[1] != want[1] {
		t.Errorf("ran %+v, want %+v", ran, want)
	}
	if len(n.told) != 1 || n.told[0] != "C1/U1/1.1: spent: person" {
		t.Errorf("told %q", n.told)
	}
}
