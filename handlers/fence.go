package handlers

import (
	"context"
	"fmt"

	"github.com/llmbot/llmbot/convo"
)

// Fence holds back the Slack writes of this replica's answers while the other replicas could take it
// for dead and adopt them (the state package's Fence): a write waits until the replica's liveness is
// renewed, and fails for good (state.ErrFenced) when another replica has adopted the answer meanwhile.
type Fence interface {
	Fence(ctx context.Context, id string) error
}

// fencedKey is the context key under which an answer's writes carry its journal id.
type fencedKey struct{}

// withFence marks ctx as the context of the writes of the answer id (route.AnswerID): fencedMessenger
// and fencedStreamer hold them back by the Fence. Writes that are no answer's (notices, summaries,
// an orphan's close) carry no id and are never held back.
func withFence(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, fencedKey{}, id)
}

// fenceWait waits until the write under ctx may go (see Fence).
func fenceWait(ctx context.Context, f Fence) error {
	id, ok := ctx.Value(fencedKey{}).(string)
	if !ok {
		return nil
	}
	if err := f.Fence(ctx, id); err != nil {
		return fmt.Errorf("answer fenced: %w", err)
	}
	return nil
}

// fencedMessenger is a Messenger whose writes of an answer wait for its Fence.
type fencedMessenger struct {
	Messenger
	f Fence
}

func (m fencedMessenger) Post(ctx context.Context, channel, threadTS string, msg Msg) (string, error) {
	if err := fenceWait(ctx, m.f); err != nil {
		return "", err
	}
	return m.Messenger.Post(ctx, channel, threadTS, msg)
}

func (m fencedMessenger) Update(ctx context.Context, channel, ts string, msg Msg) error {
	if err := fenceWait(ctx, m.f); err != nil {
		return err
	}
	return m.Messenger.Update(ctx, channel, ts, msg)
}

func (m fencedMessenger) Delete(ctx context.Context, channel, ts string) error {
	if err := fenceWait(ctx, m.f); err != nil {
		return err
	}
	return m.Messenger.Delete(ctx, channel, ts)
}

// fencedStreamer is a Streamer whose writes of an answer wait for its Fence.
type fencedStreamer struct {
	Streamer
	f Fence
}

func (s fencedStreamer) StartStream(ctx context.Context, st StreamStart) (string, error) {
	if err := fenceWait(ctx, s.f); err != nil {
		return "", err
	}
	return s.Streamer.StartStream(ctx, st)
}

func (s fencedStreamer) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	if err := fenceWait(ctx, s.f); err != nil {
		return err
	}
	return s.Streamer.AppendStream(ctx, channel, ts, markdown)
}

func (s fencedStreamer) StopStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error {
	if err := fenceWait(ctx, s.f); err != nil {
		return err
	}
	return s.Streamer.StopStream(ctx, channel, ts, markdown, mark, buttons)
}

func (s fencedStreamer) FinishStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error {
	if err := fenceWait(ctx, s.f); err != nil {
		return err
	}
	return s.Streamer.FinishStream(ctx, channel, ts, markdown, mark, buttons)
}

func (s fencedStreamer) AppendTasks(ctx context.Context, channel, ts string, tasks []Task) error {
	if err := fenceWait(ctx, s.f); err != nil {
		return err
	}
	return s.Streamer.AppendTasks(ctx, channel, ts, tasks)
}
