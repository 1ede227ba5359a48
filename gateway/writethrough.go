package gateway

import (
	"context"
	"sync"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/threads"
)

// Writes are a Messenger and a Streamer.
type Writes interface {
	Messenger
	Streamer
}

// WriteThrough returns w recording every write Slack took in the thread cache c (nil: w itself): the
// text and mark the bot wrote, so that the next answer in the thread knows them without reading it.
// It is the one place the bot's writes reach the cache: every use case that writes is given it.
func WriteThrough(w Writes, c *threads.Cache) Writes {
	if c == nil {
		return w
	}
	return &writeThrough{Writes: w, cache: c, streams: make(map[string]string)}
}

type writeThrough struct {
	Writes
	cache *threads.Cache

	mu sync.Mutex
	// streams are the markdown of the streams this process writes, by channel/ts, as Slack holds
	// it: chat.appendStream adds to it, and its stop records it (no store call for each append).
	// A stream's entry goes at its stop or finish; past maxStreams (streams left without either),
	// all go.
	streams map[string]string
}

// maxStreams bounds writeThrough.streams: far more than the answers that stream at once.
const maxStreams = 1000

// metadata is what Slack stores of mark (none for an unmarked write: an edit keeps the mark held).
func metadata(mark convo.Mark) slack.SlackMetadata {
	if mark.Kind == "" {
		return slack.SlackMetadata{}
	}
	return mark.Metadata()
}

func (w *writeThrough) Post(ctx context.Context, channel, threadTS string, m Msg) (string, error) {
	ts, err := w.Writes.Post(ctx, channel, threadTS, m)
	if err == nil {
		w.cache.Posted(ctx, channel, threadTS, ts, m.Text, metadata(m.Mark))
	}
	return ts, err
}

func (w *writeThrough) Update(ctx context.Context, channel, ts string, m Msg) error {
	err := w.Writes.Update(ctx, channel, ts, m)
	if err == nil {
		w.cache.Updated(ctx, channel, ts, m.Text, metadata(m.Mark))
	}
	return err
}

func (w *writeThrough) Delete(ctx context.Context, channel, ts string) error {
	err := w.Writes.Delete(ctx, channel, ts)
	if err == nil {
		w.cache.Deleted(ctx, channel, ts)
	}
	return err
}

func (w *writeThrough) StartStream(ctx context.Context, s StreamStart) (string, error) {
	ts, err := w.Writes.StartStream(ctx, s)
	if err == nil {
		w.setStream(s.Channel, ts, s.Markdown, true)
		w.cache.Posted(ctx, s.Channel, s.ThreadTS, ts, s.Markdown, slack.SlackMetadata{})
	}
	return ts, err
}

func (w *writeThrough) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	err := w.Writes.AppendStream(ctx, channel, ts, markdown)
	if err == nil {
		w.setStream(channel, ts, markdown, false)
	}
	return err
}

func (w *writeThrough) StopStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error {
	err := w.Writes.StopStream(ctx, channel, ts, markdown, mark, buttons)
	if err == nil {
		text, known := w.endStream(channel, ts)
		if known {
			w.cache.Updated(ctx, channel, ts, text+markdown, metadata(mark))
		}
	}
	return err
}

func (w *writeThrough) FinishStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error {
	err := w.Writes.FinishStream(ctx, channel, ts, markdown, mark, buttons)
	if err == nil {
		w.endStream(channel, ts)
		w.cache.Updated(ctx, channel, ts, markdown, metadata(mark))
	}
	return err
}

// setStream starts (fresh) or adds to the markdown of stream ts.
func (w *writeThrough) setStream(channel, ts, markdown string, fresh bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := channel + "/" + ts
	if fresh && len(w.streams) >= maxStreams {
		clear(w.streams)
	}
	held, ok := w.streams[key]
	switch {
	case fresh:
		w.streams[key] = markdown
	case ok:
		w.streams[key] = held + markdown
	}
}

// endStream forgets stream ts and returns its markdown (false: not one of this process's).
func (w *writeThrough) endStream(channel, ts string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := channel + "/" + ts
	text, ok := w.streams[key]
	delete(w.streams, key)
	return text, ok
}
