package ops

import (
	"cmp"
	"context"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/route"
)

// ChatStreamer streams chat answers (handlers.Chat; *llm.Client implements it).
type ChatStreamer interface {
	Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error]
}

// MeteredChat is a ChatStreamer that measures time to first token, token usage and the
// outcome of every request. Create it with Metrics.Chat.
type MeteredChat struct {
	next  ChatStreamer
	model string
	m     *Metrics
}

// Chat returns next measured. defaultModel labels the tokens of requests that name no model
// (the client's CHAT_MODEL).
func (m *Metrics) Chat(next ChatStreamer, defaultModel string) *MeteredChat {
	return &MeteredChat{next: next, model: defaultModel, m: m}
}

// Stream passes next's stream through unchanged, in the caller's goroutine. Time to first token
// is the time to the first chunk with answer, reasoning or refusal text. Usage is counted once,
// at the end, from the last usage the provider sent. A stream the caller stops reading early
// counts as "abandoned".
func (c *MeteredChat) Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		meter := chatMeter{m: c.m, model: cmp.Or(req.Model, c.model), start: time.Now()}
		defer meter.record()
		for chunk, err := range c.next.Stream(ctx, req) {
			meter.see(chunk, err)
			if !yield(chunk, err) {
				return
			}
		}
		meter.outcome = cmp.Or(meter.outcome, "ok")
	}
}

// chatMeter measures one chat stream.
type chatMeter struct {
	m       *Metrics
	model   string
	start   time.Time
	texted  bool       // a chunk with text came: the time to first token is observed
	usage   *llm.Usage // the last usage the provider sent
	outcome string     // the error's kind, or "ok" once the stream ended without one; "" while it runs
}

// see measures what the stream yielded.
func (t *chatMeter) see(chunk llm.Chunk, err error) {
	if err != nil {
		t.outcome = kindLabel(llm.KindOf(err))
		return
	}
	if !t.texted && (chunk.Content != "" || chunk.Reasoning != "" || chunk.Refusal != "") {
		t.texted = true
		t.m.firstToken.Observe(time.Since(t.start).Seconds())
	}
	if chunk.Usage != nil {
		u := *chunk.Usage
		t.usage = &u
	}
}

// record counts the usage and the outcome once the caller is done with the stream: a stream it
// stopped reading before its end is "abandoned".
func (t *chatMeter) record() {
	if t.usage != nil {
		t.m.Usage(t.model, *t.usage)
	}
	t.m.modelRequests.WithLabelValues("chat", cmp.Or(t.outcome, "abandoned")).Inc()
}

// ImageMaker generates images (imagine.Imager; *llm.Client implements it).
type ImageMaker interface {
	Image(ctx context.Context, req llm.ImageRequest) (*llm.Image, error)
}

// MeteredImager is an ImageMaker that counts generations by outcome and their latency. Create
// it with Metrics.Imager.
type MeteredImager struct {
	next ImageMaker
	m    *Metrics
}

// Imager returns next measured.
func (m *Metrics) Imager(next ImageMaker) *MeteredImager { return &MeteredImager{next: next, m: m} }

// Image calls next and records its outcome ("ok" or the llm error kind) and time.
func (i *MeteredImager) Image(ctx context.Context, req llm.ImageRequest) (*llm.Image, error) {
	start := time.Now()
	img, err := i.next.Image(ctx, req)
	i.m.imageSeconds.Observe(time.Since(start).Seconds())
	outcome := "ok"
	if err != nil {
		outcome = kindLabel(llm.KindOf(err))
	}
	i.m.images.WithLabelValues(outcome).Inc()
	return img, err
}

// Middleware counts every route's work in progress in llmbot_in_flight: kind "reply" for answers
// in a thread, else the route's feature ("imagine") (route.Middleware).
func (m *Metrics) Middleware(next route.Handler) route.Handler {
	return route.Funcs{
		AcceptFunc: next.Accept,
		RunFunc: func(ctx context.Context, req *route.Request) error {
			kind := req.Feature
			if req.Reply != nil {
				kind = "reply"
			}
			g := m.inFlight.WithLabelValues(kind)
			g.Inc()
			defer g.Dec()
			return next.Run(ctx, req)
		},
	}
}

// SlackTransport is an http.RoundTripper for the Slack Web API client that reports every call to
// Metrics.SlackCall. Create it with Metrics.SlackTransport.
type SlackTransport struct {
	next http.RoundTripper
	m    *Metrics
}

// SlackTransport returns next (nil: http.DefaultTransport) reporting each call. Put it in the
// *http.Client given to slack.New (slack.OptionHTTPClient): every Web API call, Socket Mode's
// apps.connections.open included, is then counted by method and status, 429s separately. The
// method is the last element of a ".../api/<method>" URL; other URLs (file upload URLs,
// response_url, which holds a secret) count as method "other".
func (m *Metrics) SlackTransport(next http.RoundTripper) *SlackTransport {
	if next == nil {
		next = http.DefaultTransport
	}
	return &SlackTransport{next: next, m: m}
}

// RoundTrip sends r with the wrapped transport and records the call.
func (t *SlackTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	t.m.SlackCall(SlackMethod(r.URL), status, err, time.Since(start))
	return resp, err
}

// SlackMethod returns the Web API method a request URL calls ("chat.update" for
// https://slack.com/api/chat.update), or "other".
func SlackMethod(u *url.URL) string {
	if u == nil {
		return other
	}
	_, method, ok := strings.Cut(u.Path, "/api/")
	if !ok || strings.Contains(method, "/") {
		return other
	}
	return slackMethodLabel(method)
}
