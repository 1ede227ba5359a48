package gateway

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/llmbot/llmbot/convo"
)

// Fence holds back the Slack writes of this replica's answers while the other replicas could take it
// for dead and adopt them (the state package's Fence): a write waits until the replica's liveness is
// renewed, and fails for good (state.ErrFenced) when another replica has adopted the answer meanwhile.
// until is the deadline of the write (zero: none): past it, the others could take this replica for dead.
type Fence interface {
	Fence(ctx context.Context, id string) (until time.Time, err error)
}

// fencedKey is the context key under which an answer's writes carry its FenceMark.
type fencedKey struct{}

// FenceMark is the answer whose writes are fenced. Once its closing text has landed and its journal
// record is closed by this replica (handlers.closedInJournal), no other replica can adopt it any more: its
// remaining writes (tidying Stop buttons, a rescue's deletes) go without the fence.
type FenceMark struct {
	ID     string
	Closed atomic.Bool
}

// WithFence marks ctx as the context of the writes of the answer m: FencedMessenger and
// FencedStreamer hold them back by the Fence. Writes that are no answer's (notices, summaries, an
// orphan's close) carry no mark and are never held back.
func WithFence(ctx context.Context, m *FenceMark) context.Context {
	return context.WithValue(ctx, fencedKey{}, m)
}

// fenceWait waits until the write under ctx may go (see Fence), and returns the context of the
// write, which ends at the fence's deadline. Call cancel once the write returns.
func fenceWait(ctx context.Context, f Fence) (wctx context.Context, cancel context.CancelFunc, err error) {
	m, ok := ctx.Value(fencedKey{}).(*FenceMark)
	if !ok || m.Closed.Load() {
		return ctx, func() {}, nil
	}
	until, err := f.Fence(ctx, m.ID)
	if err != nil {
		return ctx, func() {}, fmt.Errorf("answer fenced: %w", err)
	}
	if until.IsZero() {
		return ctx, func() {}, nil
	}
	// A write still under way at until could land after another replica adopted the answer and wrote
	// its note: it is cut off then, and its caller handles it as any timed-out call.
	wctx, cancel = context.WithDeadline(ctx, until)
	return wctx, cancel, nil
}

// FencedMessenger is a Messenger whose writes of an answer wait for its Fence.
type FencedMessenger struct {
	Messenger
	Fence Fence
}

func (m FencedMessenger) Post(ctx context.Context, channel, threadTS string, msg Msg) (string, error) {
	ctx, cancel, err := fenceWait(ctx, m.Fence)
	if err != nil {
		return "", err
	}
	defer cancel()
	return m.Messenger.Post(ctx, channel, threadTS, msg)
}

func (m FencedMessenger) Update(ctx context.Context, channel, ts string, msg Msg) error {
	ctx, cancel, err := fenceWait(ctx, m.Fence)
	if err != nil {
		return err
	}
	defer cancel()
	return m.Messenger.Update(ctx, channel, ts, msg)
}

func (m FencedMessenger) Delete(ctx context.Context, channel, ts string) error {
	ctx, cancel, err := fenceWait(ctx, m.Fence)
	if err != nil {
		return err
	}
	defer cancel()
	return m.Messenger.Delete(ctx, channel, ts)
}

// FencedStreamer is a Streamer whose writes of an answer wait for its Fence.
type FencedStreamer struct {
	Streamer
	Fence Fence
}

func (s FencedStreamer) StartStream(ctx context.Context, st StreamStart) (string, error) {
	ctx, cancel, err := fenceWait(ctx, s.Fence)
	if err != nil {
		return "", err
	}
	defer cancel()
	return s.Streamer.StartStream(ctx, st)
}

func (s FencedStreamer) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	ctx, cancel, err := fenceWait(ctx, s.Fence)
	if err != nil {
		return err
	}
	defer cancel()
	return s.Streamer.AppendStream(ctx, channel, ts, markdown)
}

func (s FencedStreamer) StopStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error {
	ctx, cancel, err := fenceWait(ctx, s.Fence)
	if err != nil {
		return err
	}
	defer cancel()
	return s.Streamer.StopStream(ctx, channel, ts, markdown, mark, buttons)
}

func (s FencedStreamer) FinishStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error {
	ctx, cancel, err := fenceWait(ctx, s.Fence)
	if err != nil {
		return err
	}
	defer cancel()
	return s.Streamer.FinishStream(ctx, channel, ts, markdown, mark, buttons)
}

func (s FencedStreamer) AppendTasks(ctx context.Context, channel, ts string, tasks []Task) error {
	ctx, cancel, err := fenceWait(ctx, s.Fence)
	if err != nil {
		return err
	}
	defer cancel()
	return s.Streamer.AppendTasks(ctx, channel, ts, tasks)
}
