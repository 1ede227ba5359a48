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

// ThreadPages is a Thread that reads a thread a page at a time (conversations.replies pages come
// oldest first): ThreadReads then takes a read token for each page, a 429 retries that page (not
// the read from its start), and it keeps what a ThreadWindow keeps.
type ThreadPages interface {
	// RepliesPage returns the page of thread threadTS after cursor ("": the first), with metadata,
	// and the cursor of the next ("": none).
	RepliesPage(ctx context.Context, channel, threadTS, cursor string) (msgs []slack.Message, next string, err error)
	// ThreadBytes bounds the newest replies a read keeps (0: all; see NewThreadWindow).
	ThreadBytes() int
}

// maxThreadPages bounds a paged read (200 messages a page): past it, the newest of those read are
// enough.
const maxThreadPages = 50

// replies is Replies without the cache.
func (t ThreadReads) replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	if p, ok := t.Thread.(ThreadPages); ok {
		return t.paged(ctx, p, channel, threadTS)
	}
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

// paged reads thread threadTS page by page, each within the read budget, keeping what a
// ThreadWindow keeps: the bytes held stay bounded however long the thread.
func (t ThreadReads) paged(ctx context.Context, p ThreadPages, channel, threadTS string) ([]slack.Message, int, error) {
	w := NewThreadWindow(p.ThreadBytes())
	cursor := ""
	for range maxThreadPages {
		var page []slack.Message
		var next string
		err := t.Writer.Read(ctx, func(ctx context.Context) (err error) {
			page, next, err = p.RepliesPage(ctx, channel, threadTS, cursor)
			return err
		})
		if err != nil {
			return nil, 0, fmt.Errorf("conversations.replies: %w", err)
		}
		w.Add(page)
		if next == "" {
			break
		}
		cursor = next
	}
	msgs, leftOut := w.Messages()
	return msgs, leftOut, nil
}
