package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/llmbot/llmbot/state"
)

// fixedFence answers every write the same: until, err.
type fixedFence struct {
	until time.Time
	err   error
}

func (f fixedFence) Fence(context.Context, string) (time.Time, error) { return f.until, f.err }

// deadlineMessenger records the deadline of the one write it is given.
type deadlineMessenger struct {
	Messenger
	called   bool
	deadline time.Time
}

func (m *deadlineMessenger) Update(ctx context.Context, _, _ string, _ Msg) error {
	m.called = true
	m.deadline, _ = ctx.Deadline()
	return nil
}

// A write that passed the fence must land before the other replicas could take this one for dead:
// it carries the fence's deadline. Once the answer's own record is closed (its text shows whole), no
// replica can adopt it any more, and its last writes (tidying) no longer ask the fence, which may
// refuse them after a lapse of the liveness.
func TestFencedWrites(t *testing.T) {
	until := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name         string
		fence        fixedFence
		closed       bool
		wantErr      error
		wantDeadline time.Time
	}{
		{name: "fresh", fence: fixedFence{until: until}, wantDeadline: until},
		{name: "no deadline", fence: fixedFence{}},
		{name: "adopted", fence: fixedFence{err: state.ErrFenced}, wantErr: state.ErrFenced},
		{name: "closed by this replica", fence: fixedFence{err: state.ErrFenced}, closed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mark := &FenceMark{ID: "C1/1.1"}
			mark.Closed.Store(tc.closed)
			m := &deadlineMessenger{}
			err := FencedMessenger{Messenger: m, Fence: tc.fence}.Update(WithFence(t.Context(), mark), "C1", "1.2", Msg{Text: "x"})
			if !errors.Is(err, tc.wantErr) || (err == nil) != m.called {
				t.Errorf("Update: %v, written %v; want %v", err, m.called, tc.wantErr)
			}
			if !m.deadline.Equal(tc.wantDeadline) {
				t.Errorf("the write's deadline %v; want %v", m.deadline, tc.wantDeadline)
			}
		})
	}
}
