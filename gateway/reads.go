package gateway

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/threads"
)

// ThreadReads reads conversations through Thread within the read budget of Writer (Writer.Read):
// the reading the use cases share (each holds its own, over the same budgets). With a Cache (the
// answers'), a thread it may stand for is not read again.
type ThreadReads struct {
	Thread Thread
	Writer *Writer
	Cache  *threads.Cache // nil: none
}

// Replies reads a thread (conversations.replies) within the read budget (Writer.Read), and says how many
// of its older messages the read left out (Thread.Replies): from the Cache when it may stand for a read.
func (t ThreadReads) Replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	return t.Cache.Replies(ctx, channel, threadTS, func(ctx context.Context) ([]slack.Message, int, error) {
		return t.replies(ctx, channel, threadTS)
	})
}

// replies is Replies without the cache.
func (t ThreadReads) replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
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
// (Writer.Read): a DM's latest ones from the Cache when it may stand for a read.
func (t ThreadReads) History(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error) {
	if latest != "" {
		return t.history(ctx, channel, limit, latest)
	}
	return t.Cache.History(ctx, channel, limit, func(ctx context.Context) ([]slack.Message, error) {
		return t.history(ctx, channel, limit, latest)
	})
}

// history is History without the cache.
func (t ThreadReads) history(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error) {
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
