package llmtest

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/llmbot/llmbot/llm"
)

// Step is one scripted event of a fake model stream: wait, then yield a chunk, or an error, or
// panic.
type Step struct {
	Wait  time.Duration
	Chunk llm.Chunk
	Err   error
	Panic any // a stream reader meeting bytes it cannot take
}

// Chat streams its Steps to every request, sleeping (fake time under synctest) between them. A
// cancelled context ends the stream with an *llm.Error of KindCanceled, as llm.Client does. Set
// Steps before the first request, or with SetSteps while requests run. Safe for concurrent use.
type Chat struct {
	Steps []Step

	mu       sync.Mutex
	requests []llm.ChatRequest
	cause    error // context.Cause seen when a stream was cancelled
	yielded  int   // chunks the callers took
}

// Stream answers req with the Steps as they are when it is called.
func (c *Chat) Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error] {
	c.mu.Lock()
	c.requests = append(c.requests, req)
	steps := c.Steps
	c.mu.Unlock()
	return func(yield func(llm.Chunk, error) bool) {
		for _, s := range steps {
			if s.Wait > 0 && !c.wait(ctx, s.Wait) {
				yield(llm.Chunk{}, &llm.Error{Kind: llm.KindCanceled, Message: "request canceled", Err: ctx.Err()})
				return
			}
			if s.Err != nil {
				yield(llm.Chunk{}, s.Err)
				return
			}
			if s.Panic != nil {
				panic(s.Panic)
			}
			c.mu.Lock()
			c.yielded++
			c.mu.Unlock()
			if !yield(s.Chunk, nil) {
				return
			}
		}
	}
}

// wait sleeps for d, or until ctx ends (false; its cause is kept for Cause).
func (c *Chat) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		c.mu.Lock()
		c.cause = context.Cause(ctx)
		c.mu.Unlock()
		return false
	}
}

// SetSteps scripts the requests that come next.
func (c *Chat) SetSteps(steps []Step) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Steps = steps
}

// Calls are the requests so far, oldest first.
func (c *Chat) Calls() []llm.ChatRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]llm.ChatRequest(nil), c.requests...)
}

// Cause is the context.Cause of the last stream cancelled while it waited (nil: none was).
func (c *Chat) Cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// Yielded is how many chunks the callers took, over every request.
func (c *Chat) Yielded() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.yielded
}

// Deltas scripts an answer: each word arrives every interval, then a "stop" finish.
func Deltas(words []string, every time.Duration) []Step {
	var steps []Step
	for _, w := range words {
		steps = append(steps, Step{Wait: every, Chunk: llm.Chunk{Content: w}})
	}
	return append(steps, Step{Chunk: llm.Chunk{FinishReason: "stop"}})
}

// Words splits s into deltas of about n bytes (for Deltas).
func Words(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
