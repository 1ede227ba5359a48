package ledger

import (
	"cmp"
	"context"
	"errors"
	"iter"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/redact"
)

// Hooks observe the ledger (metrics: ops). Each must not block; nil ones are skipped.
type Hooks struct {
	// Used is called for every request counted: its model, its place, and what it cost.
	Used func(place string, u Use)
	// Refused is called for a request refused by a budget.
	Refused func(place string, e *OverBudget)
	// Redacted is called with how many values of a kind one request had replaced.
	Redacted func(kind string, n int)
}

// Meter is the ledger at the seam: it wraps the chat and image clients. Its Book may be nil (no
// counting, no budgets: redaction alone) and its Redactor too.
type Meter struct {
	Book     *Book
	Redactor *redact.Redactor
	Hooks    Hooks
	Log      *zap.Logger // nil: no logs
}

// recordTimeout bounds the write of a request's counts, which goes on after the request's own
// context ends (an answer stopped by its asker still cost what it streamed).
const recordTimeout = 2 * time.Second

// ChatStreamer streams chat answers (*llm.Client, or a decorator of it).
type ChatStreamer interface {
	Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error]
}

// Chat is a ChatStreamer checked, redacted and counted. Create it with Meter.Chat.
type Chat struct {
	m            *Meter
	next         ChatStreamer
	defaultModel string
}

// Chat returns next under the ledger; defaultModel names the model of requests that name none.
func (m *Meter) Chat(next ChatStreamer, defaultModel string) *Chat {
	return &Chat{m: m, next: next, defaultModel: defaultModel}
}

// Stream checks the budgets of the context's Who (a spent one: an *OverBudget error and nothing
// sent), redacts the request, streams it, and counts it once the caller is done with the stream
// (also when it stopped reading early, or the stream failed midway: what streamed was paid for).
func (c *Chat) Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		w := WhoOf(ctx)
		if err := c.m.check(ctx, w); err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		req = c.m.redact(req)
		t := tally{model: cmp.Or(req.Model, c.defaultModel)}
		defer func() {
			if t.answered { // a request refused or failed before any answer cost nothing
				c.m.record(ctx, w, t.use(req))
			}
		}()
		for chunk, err := range c.next.Stream(ctx, req) {
			if err == nil {
				t.see(chunk)
			}
			if !yield(chunk, err) {
				return
			}
		}
	}
}

// check is Book.Check: a failure to read the counts lets the request go (logged); a budget is a
// cap, not a reason for silence when the shared state is away.
func (m *Meter) check(ctx context.Context, w Who) error {
	if m.Book == nil {
		return nil
	}
	err := m.Book.Check(ctx, w)
	var ob *OverBudget
	switch {
	case errors.As(err, &ob):
		if m.Hooks.Refused != nil {
			m.Hooks.Refused(w.Place, ob)
		}
		return err
	case err != nil && ctx.Err() == nil:
		m.log().Warn("ledger: budgets not checked", zap.Error(err))
	}
	return nil
}

func (m *Meter) log() *zap.Logger {
	if m.Log == nil {
		return zap.NewNop()
	}
	return m.Log
}

// record counts u for w, within recordTimeout even when ctx has ended.
func (m *Meter) record(ctx context.Context, w Who, u Use) {
	if m.Hooks.Used != nil {
		m.Hooks.Used(w.Place, u)
	}
	if m.Book == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := m.Book.Record(ctx, w, u); err != nil {
		m.log().Warn("ledger: use not counted", zap.String("place", w.Place), zap.Error(err))
	}
}

// tally follows one stream: the provider's usage when it sends one, else the text that came, for
// the estimate.
type tally struct {
	model    string
	usage    *llm.Usage
	chars    int
	answered bool // a chunk came
}

func (t *tally) see(c llm.Chunk) {
	t.answered = true
	if c.Usage != nil {
		u := *c.Usage
		t.usage = &u
	}
	t.chars += len(c.Content) + len(c.Reasoning) + len(c.Refusal)
	for _, tc := range c.ToolCalls {
		t.chars += len(tc.Name) + len(tc.Arguments)
	}
}

// use is what the stream cost: the provider's figures, or an estimate from the request's and the
// answer's text (about four bytes a token, and a picture's part as 765, a large picture's tiles
// at high detail) marked Estimated.
func (t *tally) use(req llm.ChatRequest) Use {
	if t.usage != nil && (t.usage.PromptTokens > 0 || t.usage.CompletionTokens > 0) {
		return Use{Model: t.model, Input: int64(t.usage.PromptTokens), Output: int64(t.usage.CompletionTokens)}
	}
	return Use{Model: t.model, Input: EstimateInput(req), Output: estimate(t.chars), Estimated: true}
}

// imageTokens is what a picture in a request is estimated at.
const imageTokens = 765

// EstimateInput estimates a request's input tokens from its text.
func EstimateInput(req llm.ChatRequest) int64 {
	var n int64
	for _, m := range req.Messages {
		n += estimate(len(m.Content)) + 4 // a message's own framing
		for _, p := range m.Parts {
			if p.Type == llm.PartImage {
				n += imageTokens
				continue
			}
			n += estimate(len(p.Text))
		}
		for _, tc := range m.ToolCalls {
			n += estimate(len(tc.Name) + len(tc.Arguments))
		}
	}
	for _, tl := range req.Tools {
		n += estimate(len(tl.Name) + len(tl.Description) + len(tl.Parameters))
	}
	return n
}

// estimate is about four bytes a token, rounded up.
func estimate(bytes int) int64 { return int64((bytes + 3) / 4) }

// redact is req with every text the model would see redacted, in one session (the same value is
// the same placeholder across its messages); the caller's messages are not changed.
func (m *Meter) redact(req llm.ChatRequest) llm.ChatRequest {
	if m.Redactor == nil {
		return req
	}
	s := m.Redactor.Session()
	msgs := make([]llm.Message, len(req.Messages))
	for i, msg := range req.Messages {
		msg.Content = s.Text(msg.Content)
		if len(msg.Parts) > 0 {
			parts := make([]llm.Part, len(msg.Parts))
			for j, p := range msg.Parts {
				p.Text, p.Alt = s.Text(p.Text), s.Text(p.Alt)
				parts[j] = p
			}
			msg.Parts = parts
		}
		if len(msg.ToolCalls) > 0 {
			calls := make([]llm.ToolCall, len(msg.ToolCalls))
			for j, tc := range msg.ToolCalls {
				tc.Arguments = s.Text(tc.Arguments)
				calls[j] = tc
			}
			msg.ToolCalls = calls
		}
		msgs[i] = msg
	}
	req.Messages = msgs
	if m.Hooks.Redacted != nil {
		for k, n := range s.Counts() {
			m.Hooks.Redacted(string(k), n)
		}
	}
	return req
}

// ImageMaker makes pictures (*llm.Client, or a decorator of it).
type ImageMaker interface {
	Image(ctx context.Context, req llm.ImageRequest) (*llm.Image, error)
}

// Imager is an ImageMaker checked, redacted and counted. Create it with Meter.Imager.
type Imager struct {
	m            *Meter
	next         ImageMaker
	defaultModel string
}

// Imager returns next under the ledger; defaultModel names the model of requests that name none.
func (m *Meter) Imager(next ImageMaker, defaultModel string) *Imager {
	return &Imager{m: m, next: next, defaultModel: defaultModel}
}

// Image checks the budgets, redacts the prompt, makes the picture and counts it (a picture, its
// bytes, and the prompt's tokens as an estimate: image services report no usage).
func (i *Imager) Image(ctx context.Context, req llm.ImageRequest) (*llm.Image, error) {
	w := WhoOf(ctx)
	if err := i.m.check(ctx, w); err != nil {
		return nil, err
	}
	if i.m.Redactor != nil {
		s := i.m.Redactor.Session()
		req.Prompt = s.Text(req.Prompt)
		if i.m.Hooks.Redacted != nil {
			for k, n := range s.Counts() {
				i.m.Hooks.Redacted(string(k), n)
			}
		}
	}
	img, err := i.next.Image(ctx, req)
	if err != nil {
		return img, err
	}
	i.m.record(ctx, w, Use{Model: cmp.Or(req.Model, i.defaultModel), Input: estimate(len(req.Prompt)),
		Estimated: true, Images: 1, ImageBytes: int64(len(img.Data))})
	return img, nil
}
