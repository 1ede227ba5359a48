package usage

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmbot/llmbot/ledger"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// responses records what the command answered.
type responses struct {
	mu   sync.Mutex
	sent []string
}

func (r *responses) Respond(_ context.Context, url, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, url+" "+text)
	return nil
}

// book is a ledger over an in-memory shared state with some use in it.
func book(t *testing.T) *ledger.Book {
	t.Helper()
	mem, err := state.NewMemory("a", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := ledger.NewBook(mem.Tallies(), ledger.Budgets{PersonDay: 50000}, 90*24*time.Hour)
	for _, u := range []struct {
		w   ledger.Who
		use ledger.Use
	}{
		{ledger.Who{User: "U1", Channel: "C1"}, ledger.Use{Model: "gpt-4o", Input: 12000, Output: 800}},
		{ledger.Who{User: "U1", Channel: "D1"}, ledger.Use{Model: "gpt-4o-mini", Input: 3000, Output: 200, Estimated: true}},
		{ledger.Who{User: "U2", Channel: "C1"}, ledger.Use{Model: "gpt-4o", Input: 40000, Output: 2500}},
		{ledger.Who{User: "U2", Channel: "C2"}, ledger.Use{Model: "dall-e-3", Input: 12, Estimated: true, Images: 1, ImageBytes: 900000}},
	} {
		if err := b.Record(t.Context(), u.w, u.use); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestAnswers: a person sees their own use and budget; an admin also sees everyone's, the top
// lists and the cost; every answer is private (the command's response_url).
func TestAnswers(t *testing.T) {
	opt := Options{Admins: []string{"U9"}, Budgets: ledger.Budgets{PersonDay: 50000},
		Prices: ledger.Prices{"gpt-4o": {Input: 2.5, Output: 10}, "gpt-4o-mini": {Input: 0.15, Output: 0.6}}}
	for _, tc := range []struct{ name, user, golden string }{
		{"a person", "U1", "person.golden"},
		{"an admin", "U9", "admin.golden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &responses{}
			u := New(book(t), out, nil, opt)
			u.now = func() time.Time { return time.Now().UTC().Truncate(24 * time.Hour).Add(19 * time.Hour) }
			h := u.Handler()
			req := &route.Request{Kind: route.Command, Name: Command, User: tc.user, Channel: "C1", ResponseURL: "https://hooks.example/r"}
			if d := h.Accept(req); !d.Run || !d.Now || d.Say != "" {
				t.Fatalf("Accept = %+v, want a run at once without an ack text", d)
			}
			if err := h.Run(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			if len(out.sent) != 1 || !strings.HasPrefix(out.sent[0], "https://hooks.example/r ") {
				t.Fatalf("answers %q, want one to the response_url", out.sent)
			}
			golden(t, tc.golden, strings.TrimPrefix(out.sent[0], "https://hooks.example/r "))
		})
	}
}

// failing is a ledger that cannot be read.
type failing struct{}

func (failing) Report(context.Context, ledger.Period, string, int) (ledger.Report, error) {
	return ledger.Report{}, errors.New("redis down")
}

// TestUnreadable: when the ledger cannot be read the person is told so, not left in silence.
func TestUnreadable(t *testing.T) {
	out := &responses{}
	req := &route.Request{Kind: route.Command, Name: Command, User: "U1", ResponseURL: "u"}
	if err := New(failing{}, out, nil, Options{}).Handler().Run(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if len(out.sent) != 1 || !strings.Contains(out.sent[0], "could not be read") {
		t.Errorf("answers %q", out.sent)
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./usage -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("answer differs from %s:\n%s", path, got)
	}
}
