package gateway

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"
)

// ThreadReads reads conversations through Thread within the read budget of Writer (Writer.Read):
// the reading the use cases share (each holds its own, over the same budgets).
type ThreadReads struct {
	Thread Thread
	Writer *Writer
}

// Replies reads a thread (conversations.replies) within the read budget (Writer.Read), and says how many
// of its older messages the read left out (Thread.Replies).
func (t ThreadReads) Replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	var msgs []slack.Message
	var leftOut int
	err := t.Writer.Read(ctx, func(ctx context.Context) (err error) {
		msgs, leftOut, err = t.Thread.Replies(ctx, channel, threadTS)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("conversations.replies: %w", err)
	}
	return msgs, leftOut, nil
}

// History reads a channel's last limit messages up to latest ("": now) within the read budget
// (Writer.Read).
func (t ThreadReads) History(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error) {
	var msgs []slack.Message
	err := t.Writer.Read(ctx, func(ctx context.Context) (err error) {
		msgs, err = t.Thread.History(ctx, channel, limit, latest)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("conversations.history: %w", err)
	}
	return msgs, nil
}
