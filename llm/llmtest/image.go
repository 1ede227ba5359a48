package llmtest

import (
	"context"
	"sync"
	"time"

	"github.com/llmbot/llmbot/llm"
)

// Imager is an image model (as llm.Client.Image) that answers with a scripted picture or error
// after a wait (fake time under synctest). A context that ends first ends the call with an
// *llm.Error of KindTimeout, as llm.Client reports a request that got no answer.
type Imager struct {
	Wait time.Duration // before the answer
	Img  *llm.Image    // the answer
	Err  error         // or its error

	mu       sync.Mutex
	requests []llm.ImageRequest
}

// Image records req and answers with Img and Err after Wait.
func (f *Imager) Image(ctx context.Context, req llm.ImageRequest) (*llm.Image, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if f.Wait > 0 {
		t := time.NewTimer(f.Wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, &llm.Error{Kind: llm.KindTimeout, Message: "image request timed out", Err: ctx.Err()}
		}
	}
	return f.Img, f.Err
}

// Requests are the requests Image was given, in order.
func (f *Imager) Requests() []llm.ImageRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]llm.ImageRequest(nil), f.requests...)
}
