package schedule

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/state"
)

// asked is one occurrence an Asker was asked to run.
type asked struct {
	id string
	at time.Time
}

// fakeAsker records the runs it is asked to start; err, when set, is what each returns.
type fakeAsker struct {
	mu   sync.Mutex
	runs []asked
	err  error
}

func (f *fakeAsker) Ask(_ context.Context, sc Schedule, at time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, asked{sc.ID, at})
	return f.err
}

func (f *fakeAsker) got() []asked {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]asked(nil), f.runs...)
}

// told is one private note.
type told struct{ channel, user, text string }

type fakeTeller struct {
	mu    sync.Mutex
	notes []told
}

func (f *fakeTeller) Tell(_ context.Context, channel, user, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, told{channel, user, text})
	return nil
}

func (f *fakeTeller) got() []told {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]told(nil), f.notes...)
}

// outcomes counts Ran's outcomes.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) ran(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[outcome]++
}

func (o *outcomes) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

// memoryStore is a state.Memory of one process, as the wiring gives it without Redis.
func memoryStore(t *testing.T, dir string) *state.Memory {
	t.Helper()
	m, err := state.NewMemory("test-replica", dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// running runs r until the test's bubble or the returned stop ends it.
func running(t *testing.T, r *Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func newTestRunner(t *testing.T, s *Schedules, claims Claims, ask Asker, tell Teller, o *outcomes, catchUp time.Duration) *Runner {
	return NewRunner(s, claims, ask, tell, zaptest.NewLogger(t), RunnerOptions{CatchUp: catchUp, Ran: o.ran})
}

func mustAdd(t *testing.T, s *Schedules, channel, creator, text string, now time.Time) Schedule {
	t.Helper()
	sc, err := s.Add(t.Context(), "T1", channel, creator, text, now)
	if err != nil {
		t.Fatalf("Add(%q): %v", text, err)
	}
	return sc
}

var errAskFailed = errors.New("post: channel_not_found")

// testKey seals the tests' schedules.
var testKey = state.DeriveKey("xoxb-test", "llmbot records v1")
