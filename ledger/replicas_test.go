package ledger

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/state"
)

// redisBook is a Book of replica self over the Redis at url, namespace ns.
func redisBook(t testing.TB, url, ns, self string, b Budgets) *Book {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := state.NewRedis(ctx, url, ns, self, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return NewBook(r.Tallies(), b, 30*24*time.Hour)
}

// TestReplicasShareCountsAndBudgets: two replicas on one real redis-server count into the same
// tallies, so a budget spent through one is spent for the other.
func TestReplicasShareCountsAndBudgets(t *testing.T) {
	url, _ := redistest.Start(t)
	budgets := Budgets{PersonDay: 100, ChannelMonth: 1000}
	a := redisBook(t, url, "test:", "a", budgets)
	b := redisBook(t, url, "test:", "b", budgets)
	ctx := t.Context()
	for _, book := range []*Book{a, b} {
		if err := book.Check(ctx, jane); err != nil {
			t.Fatalf("before any use: %v", err)
		}
		if err := book.Record(ctx, jane, Use{Model: "m", Input: 40, Output: 10}); err != nil {
			t.Fatal(err)
		}
	}
	for name, book := range map[string]*Book{"a": a, "b": b} {
		var ob *OverBudget
		if err := book.Check(ctx, jane); !errors.As(err, &ob) || ob.Scope != "person" {
			t.Errorf("replica %s: %v, want the person's daily budget spent", name, err)
		}
		rep, err := book.Report(ctx, Day, "U1", 3)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Mine.Tokens() != 100 || len(rep.Models) != 1 || rep.Models[0].Tokens() != 100 {
			t.Errorf("replica %s sees %+v", name, rep)
		}
	}
	if err := a.Check(ctx, Who{User: "U2", Channel: "C1"}); err != nil {
		t.Errorf("another person in the channel: %v (the channel's budget is not spent)", err)
	}
}

// BenchmarkBookkeeping is what the ledger adds to one answer: the budgets' check before it and
// the count after it, against the shared state (docs/benchmarks.md). LLMBOT_BENCH_REDIS=1 runs it
// against a real redis-server on loopback too.
func BenchmarkBookkeeping(b *testing.B) {
	budgets := Budgets{PersonDay: 1 << 40, PersonMonth: 1 << 40, ChannelDay: 1 << 40, ChannelMonth: 1 << 40}
	mem, err := state.NewMemory("a", "", nil)
	if err != nil {
		b.Fatal(err)
	}
	books := map[string]*Book{"memory": NewBook(mem.Tallies(), budgets, 30*24*time.Hour)}
	if os.Getenv("LLMBOT_BENCH_REDIS") != "" {
		url, _ := redistest.Start(b)
		books["redis"] = redisBook(b, url, "bench:", "a", budgets)
	}
	for name, book := range books {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				if err := book.Check(ctx, jane); err != nil {
					b.Fatal(err)
				}
				if err := book.Record(ctx, jane, Use{Model: "m", Input: 1200, Output: 300}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
