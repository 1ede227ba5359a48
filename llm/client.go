// Package llm is a small client for OpenAI-compatible chat completion and image generation
// services (OpenAI, Azure, OpenRouter, LiteLLM, vLLM, Ollama, llama.cpp, LM Studio, Groq, ...).
//
// It is built on net/http and encoding/json only, and is tolerant by rules rather than by
// provider switches (the shared reference openai-wire.md, §4): comments, "event:" names and
// unknown fields are ignored; an "error" in any JSON is an error; a stream without [DONE]
// or a finish reason is truncated; a JSON answer to a streamed request is read whole.
//
// Every error the Client returns is an *Error; its Kind tells callers what to tell users.
package llm

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Config configures a Client. Zero (or negative) durations and sizes take the defaults in
// the comments.
type Config struct {
	BaseURL        string         // ".../v1", with or without trailing slash
	APIKey         string         // sent as "Authorization: Bearer <key>" when set
	Headers        http.Header    // extra headers on every request (Azure "api-key")
	ChatModel      string         // default model for chat requests
	ImageModel     string         // default model for image requests
	Temperature    *float64       // nil: the key is absent from requests; 0 is sent as 0
	NoStreamUsage  bool           // do not ask for usage in streams, for servers that reject stream_options
	ImageOptions   map[string]any // extra image request fields (size, quality, ...) only when set
	HTTPClient     *http.Client   // nil: built from the timeouts below; when set, Connect/HeaderTimeout are its own business
	ConnectTimeout time.Duration  // default 10s (dial + TLS)
	HeaderTimeout  time.Duration  // default 120s, time to response headers for chat
	IdleTimeout    time.Duration  // default 90s, max silence between stream bytes (comments count as life)
	// StreamCoalesce, when above 0, spaces the reads of a streamed answer that wait for the
	// network: once the body has been read up to what had arrived, the next read comes about
	// this much later (half to one and a half times it, at instants shared by every stream of the
	// process: see alignedPause), and the events that arrived in between are read together, one
	// wake-up for several tokens instead of one each (a model sends 20-100 a second). There is no
	// pause after the finish reason. A token reaches the caller up to 1.5 times this much later.
	// 0: read bytes as they arrive.
	StreamCoalesce time.Duration
	ImageTimeout   time.Duration // default 180s for the whole image call incl. download; never retried after timeout
	MaxRetries     int           // default 2 (so 3 attempts); negative means no retry
	MaxRetryWait   time.Duration // default 2 min: a longer Retry-After is not waited for (error returned)
	MaxImageBytes  int64         // default 25 MiB, decoded or downloaded
	Hooks          Hooks         // optional observation callbacks (logging and metrics live in the caller)
}

// Hooks are optional callbacks that let the caller log and count what the client does on
// its own. They are called synchronously and must be quick.
type Hooks struct {
	// Retry is called before waiting to retry op ("chat" or "image"); attempt counts from 1.
	Retry func(op string, attempt int, wait time.Duration, err *Error)
	// TemperatureDropped is called once per model when it rejected the temperature: the
	// request is sent again without it, and from then on for that model.
	TemperatureDropped func(model string)
	// AlternatingTurns is called once per model whose chat template refused the order of the
	// roles: the request is sent again with alternating turns, and from then on for that model.
	AlternatingTurns func(model string)
	// ImagesDropped is called once per model that refused image parts (no vision): its requests
	// go without images from then on (but for ChatRequest.KeepImages).
	ImagesDropped func(model string)
	// StreamUsageDropped is called once per model when it rejected stream_options (the
	// request for a usage chunk): the stream is asked again without it, and from then on
	// for that model, so its streams carry no usage unless the server sends it anyway.
	StreamUsageDropped func(model string)
	// ToolsDropped is called once per model whose server refused the tools: the request is sent
	// again without them, and from then on for that model (it answers without tools).
	ToolsDropped func(model string)
}

// The defaults of Config.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultHeaderTimeout  = 120 * time.Second
	DefaultIdleTimeout    = 90 * time.Second
	DefaultImageTimeout   = 180 * time.Second
	DefaultMaxRetries     = 2
	DefaultMaxRetryWait   = 2 * time.Minute
	DefaultMaxImageBytes  = 25 << 20
)

// finishIdle is the idle timeout of a stream once it has ended (streamDecoder.ended: a finish
// reason on a chunk without text): what may follow (the usage chunk, [DONE], the end of the body)
// comes at once, and the answer is complete, so a server that goes silent there does not hold the
// caller for the whole IdleTimeout.
const finishIdle = 5 * time.Second

// maxCompletionBody bounds a non-streamed completion body.
const maxCompletionBody = 16 << 20

var (
	errIdle         = errors.New("no data from the model service within the idle timeout")
	errImageTimeout = errors.New("the image was not ready within the image timeout")
	errStreamDone   = errors.New("stream closed by the client")
)

// Client calls one OpenAI-compatible service. It is safe for concurrent use.
type Client struct {
	cfg       Config
	base      url.URL // BaseURL; endpoint paths are appended to its path, its query is kept
	chatHTTP  *http.Client
	imageHTTP *http.Client // no response-header timeout: images take minutes
	// download fetches the pictures an image model answers with a URL of: imageHTTP as
	// given, following redirects anywhere (it sends no key). chatHTTP and imageHTTP follow
	// only redirects to the base URL's server (sameServer).
	downloadHTTP *http.Client
	refused      [numFallbacks]sync.Map // per fallback, the models known to need it: model name -> struct{}
	secrets      []string               // redacted from every error: the key, secret-looking extra headers

	// imageMem is a semaphore of imageBodiesAtOnce slots (its capacity; it says how many image
	// responses may be held in memory at once): one is taken while a response is read, parsed and
	// decoded. imageHeld, a seam for tests, is called when the slot is taken.
	imageMem  chan struct{}
	imageHeld func()

	// Seams for tests: waiting between retries, the clock for HTTP-date Retry-After, jitter,
	// the idle timeout after a finish reason.
	sleep      func(ctx context.Context, d time.Duration) error
	now        func() time.Time
	jitter     func() float64 // in [0, 1)
	finishIdle time.Duration
}

// New checks cfg, applies the defaults and returns a Client. It does no I/O.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(cfg.BaseURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("llm: base URL must be an http(s) URL such as https://api.openai.com/v1")
	}
	if strings.ContainsAny(cfg.APIKey, "\r\n") {
		return nil, fmt.Errorf("llm: API key contains a line break")
	}
	cfg.APIKey = strings.TrimSpace(cfg.APIKey)
	setDefault(&cfg.ConnectTimeout, DefaultConnectTimeout)
	setDefault(&cfg.HeaderTimeout, DefaultHeaderTimeout)
	setDefault(&cfg.IdleTimeout, DefaultIdleTimeout)
	setDefault(&cfg.ImageTimeout, DefaultImageTimeout)
	setDefault(&cfg.MaxRetryWait, DefaultMaxRetryWait)
	setDefault(&cfg.MaxImageBytes, DefaultMaxImageBytes)
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	c := &Client{
		cfg:        cfg,
		base:       *u,
		sleep:      sleepCtx,
		now:        time.Now,
		jitter:     rand.Float64,
		finishIdle: finishIdle,
		imageMem:   make(chan struct{}, imageBodiesAtOnce),
	}
	c.secrets = secretsOf(cfg)
	if cfg.HTTPClient != nil {
		c.chatHTTP, c.imageHTTP = cfg.HTTPClient, cfg.HTTPClient
	} else {
		dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
		chat := &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   cfg.ConnectTimeout,
			ResponseHeaderTimeout: cfg.HeaderTimeout,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          64,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
			// A paused stream's read takes in all that arrived meanwhile (net/http reads 4 KB by
			// default: a larger backlog would come in 4 KB per pause).
			ReadBufferSize: 64 << 10,
		}
		image := chat.Clone()
		image.ResponseHeaderTimeout = 0 // bounded by ImageTimeout for the whole call
		c.chatHTTP, c.imageHTTP = &http.Client{Transport: chat}, &http.Client{Transport: image}
	}
	c.downloadHTTP = c.imageHTTP
	c.chatHTTP, c.imageHTTP = sameServerOnly(c.chatHTTP), sameServerOnly(c.imageHTTP)
	return c, nil
}

// maxRedirects is how many redirects a request follows, as net/http's default policy.
const maxRedirects = 10

// errOtherServer is why a redirect to another server is not followed.
var errOtherServer = errors.New("the model service redirected the request to another server; it is not sent there (check the base URL)")

// sameServerOnly is a copy of hc that follows a redirect only to the server the request was
// made to: a request carries the API key, the extra headers (Azure's api-key) and the
// conversation, and net/http, which drops Authorization on a redirect to another domain, keeps
// the other headers, and re-sends the body on a 307 or 308.
func sameServerOnly(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if !sameServer(via[0].URL, req.URL) {
			return errOtherServer
		}
		return nil
	}
	return &c
}

// sameServer reports whether a redirect from from to to stays on the same server: the same
// host name and port, or the same host name from http to https on the default ports (an
// upgrade). A change to another port is another server: anyone on the host may listen there.
func sameServer(from, to *url.URL) bool {
	if !strings.EqualFold(from.Hostname(), to.Hostname()) {
		return false
	}
	if from.Scheme == to.Scheme {
		return portOf(from) == portOf(to)
	}
	return from.Scheme == "http" && to.Scheme == "https" && from.Port() == "" && to.Port() == ""
}

// portOf is u's port, or its scheme's default.
func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// minHeaderSecret is the shortest value of an extra header not named as a credential that is
// redacted from errors.
const minHeaderSecret = 8

// secretsOf lists what must never appear in an error: the API key and the values of extra
// headers: all of those that carry credentials (Azure's api-key, x-api-key, tokens), and the others
// of minHeaderSecret bytes or more (a gateway may take credentials under any name; a short value
// such as "true" would blot out the same word everywhere).
func secretsOf(cfg Config) []string {
	var s []string
	if cfg.APIKey != "" {
		s = append(s, cfg.APIKey)
	}
	for k, vs := range cfg.Headers {
		k = strings.ToLower(k)
		credential := strings.Contains(k, "key") || strings.Contains(k, "auth") || strings.Contains(k, "token") ||
			strings.Contains(k, "secret")
		for _, v := range vs {
			if v = strings.TrimSpace(strings.TrimPrefix(v, "Bearer ")); v != "" && (credential || len(v) >= minHeaderSecret) {
				s = append(s, v)
			}
		}
	}
	return s
}

func setDefault[T time.Duration | int64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// chatBody is the chat/completions request. Temperature is a pointer so that 0 is sent.
type chatBody struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Temperature   *float64       `json:"temperature,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"` // only with stream:true
	Tools         []Tool         `json:"tools,omitempty"`
}

// streamOptions asks for a last chunk with usage (choices: []) before [DONE]; OpenAI
// sends no usage in a stream without it.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Stream calls chat/completions with stream:true. Single use. Yields chunks, then at most
// one error, last. Breaking out of the loop or cancelling ctx closes the connection.
//
// Failures before the server answers 2xx (connection errors, 408, 409, 429 other than
// insufficient_quota, 5xx) are retried (see Config.MaxRetries); nothing is retried once
// the server answered 2xx, so no text is ever delivered twice. A stream that ends with
// neither [DONE] nor a finish reason (including a connection that closes or breaks
// mid-stream) yields an *Error of KindTruncated after the chunks it delivered; a stream
// silent for longer than IdleTimeout one of KindTimeout. After a finish reason the answer is
// complete: a connection that then breaks, or stays silent for a few seconds, ends the stream
// without an error (unless ctx was cancelled).
func (c *Client) Stream(ctx context.Context, req ChatRequest) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		sctx, cancel := context.WithCancelCause(ctx)
		defer cancel(errStreamDone)
		resp, body, err := c.openStream(sctx, cancel, req)
		if err != nil {
			yield(Chunk{}, err)
			return
		}
		defer resp.Body.Close()
		defer body.stop()

		br := bufio.NewReaderSize(body, 512)
		switch sniff(resp.Header, br) {
		case bodyHTML:
			yield(Chunk{}, c.htmlError(resp.Header, br))
		case bodyJSON: // the server ignored stream:true
			yield(c.completionAsChunk(sctx, resp.Header, br))
		default:
			c.yieldEvents(ctx, sctx, resp.Header, body, br, yield)
		}
	}
}

// openStream sends a streamed chat request made with ctx (cancel cancels it), and returns the
// response and its body watched for silence and, when Config.StreamCoalesce asks for it, read in
// pauses.
func (c *Client) openStream(ctx context.Context, cancel context.CancelCauseFunc, req ChatRequest) (*http.Response, *idleReader, error) {
	coalesce := c.cfg.StreamCoalesce > 0
	var conn connOf // the stream's connection, for quiet pauses (only asked for when coalescing)
	rctx := ctx
	if coalesce {
		rctx = conn.trace(ctx)
	}
	resp, err := c.chat(rctx, req, true)
	if err != nil {
		return nil, nil, err
	}
	body := c.watch(ctx, resp.Body, cancel, c.cfg.StreamCoalesce)
	body.partial = resp.TLS != nil && resp.ProtoMajor == 1 // one TLS record per Read
	if coalesce && resp.ProtoMajor == 1 {                  // HTTP/2 shares the connection with other requests
		body.conn = conn.get()
	}
	return resp, body, nil
}

// completionAsChunk reads a whole completion, sent to a streamed request, as one chunk.
func (c *Client) completionAsChunk(ctx context.Context, h http.Header, r io.Reader) (Chunk, error) {
	comp, err := c.readCompletion(ctx, h, r)
	if err != nil {
		return Chunk{}, err
	}
	return Chunk{Content: comp.Content, Reasoning: comp.Reasoning, Refusal: comp.Refusal,
		FinishReason: comp.FinishReason, Usage: comp.Usage, ToolCalls: comp.ToolCalls}, nil
}

// yieldEvents yields the chunks of the event stream br reads from body, then at most one error.
// ctx is the caller's, sctx the request's (cancelled by the client's own time limits too).
func (c *Client) yieldEvents(ctx, sctx context.Context, h http.Header, body *idleReader, br *bufio.Reader, yield func(Chunk, error) bool) {
	dec := newStreamDecoder(br, h, c.secrets)
	for {
		chunk, err := dec.next()
		if err == io.EOF || endsAnswer(ctx, dec, err) {
			body.finish(br)
			if calls := dec.takeCalls(); len(calls) > 0 {
				yield(Chunk{ToolCalls: calls}, nil)
			}
			return
		}
		if err != nil {
			yield(Chunk{}, c.failStream(sctx, h, err, dec.finished))
			return
		}
		if chunk.FinishReason != "" {
			body.endCoalescing() // what follows (usage, [DONE], the end) is read at once
		}
		body.idle = c.cfg.IdleTimeout
		if dec.ended {
			body.idle = min(body.idle, c.finishIdle)
		}
		if !yield(chunk, nil) {
			return
		}
	}
}

// Complete calls chat/completions with stream:false and returns the whole answer.
func (c *Client) Complete(ctx context.Context, req ChatRequest) (Completion, error) {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(errStreamDone)
	resp, err := c.chat(cctx, req, false)
	if err != nil {
		return Completion{}, err
	}
	defer resp.Body.Close()
	body := c.watch(cctx, resp.Body, cancel, 0)
	defer body.stop()

	br := bufio.NewReaderSize(body, 512)
	switch sniff(resp.Header, br) {
	case bodyHTML:
		return Completion{}, c.htmlError(resp.Header, br)
	case bodyJSON:
		return c.readCompletion(cctx, resp.Header, br)
	}
	// The server streamed although we did not ask: collect the stream.
	var comp Completion
	var content, reasoning, refusal strings.Builder
	dec := newStreamDecoder(br, resp.Header, c.secrets)
	for {
		chunk, err := dec.next()
		if err == io.EOF || endsAnswer(ctx, dec, err) {
			body.finish(br)
			comp.ToolCalls = dec.takeCalls()
			break
		}
		if err != nil {
			return Completion{}, c.failStream(cctx, resp.Header, err, dec.finished)
		}
		content.WriteString(chunk.Content)
		reasoning.WriteString(chunk.Reasoning)
		refusal.WriteString(chunk.Refusal)
		comp.FinishReason = cmp.Or(chunk.FinishReason, comp.FinishReason)
		if chunk.Usage != nil {
			comp.Usage = chunk.Usage
		}
	}
	comp.Content, comp.Reasoning, comp.Refusal = content.String(), reasoning.String(), refusal.String()
	return comp, nil
}

// chat sends a chat request and returns a 2xx response, after retries and, when the model
// refuses part of the request, once more with each fallback its refusals call for (each at most
// once, so at most four extra requests).
func (c *Client) chat(ctx context.Context, req ChatRequest, stream bool) (*http.Response, error) {
	model := cmp.Or(req.Model, c.cfg.ChatModel)
	if model == "" {
		return nil, &Error{Kind: KindBadRequest, Message: "no chat model configured"}
	}
	if len(req.Messages) == 0 {
		return nil, &Error{Kind: KindBadRequest, Message: "no messages to send"}
	}
	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	taken := c.knownFallbacks(model, stream, len(req.Tools) > 0)
	toolsKnownRefused := taken.has(noTools)
	images := hasImages(req.Messages)
	switch {
	case !images:
		taken = taken.with(noImages) // nothing to drop: a refusal naming images is final
	case req.KeepImages:
		taken = taken.without(noImages)
	}
	for {
		body, err := json.Marshal(c.bodyFor(model, req, stream, taken))
		if err != nil {
			return nil, &Error{Kind: KindBadRequest, Message: "encode request: " + err.Error()}
		}
		resp, e := c.send(ctx, c.chatHTTP, "chat", "/chat/completions", accept, body)
		if e == nil {
			if images && taken.has(noImages) && req.ImagesDropped != nil {
				req.ImagesDropped()
			}
			if len(req.Tools) > 0 && taken.has(noTools) && !toolsKnownRefused && req.ToolsDropped != nil {
				req.ToolsDropped()
			}
			return resp, nil
		}
		f, ok := taken.answer(e)
		if !ok || f == noImages && req.KeepImages {
			return nil, e
		}
		c.learn(model, f)
		taken = taken.with(f)
	}
}

// A fallback is a way to send a chat request that a model refused: without a key it does not
// take, or with the turns its chat template demands. The request is sent again that way, and from
// then on for that model.
type fallback int

const (
	noStreamUsage    fallback = iota // no stream_options; first: its refusals name the key exactly
	noTemperature                    // no temperature (reasoning models)
	alternatingTurns                 // turns folded by alternating (strict chat templates)
	noImages                         // image parts as their Alt text (models without vision)
	noTools                          // no tools (servers or models without tool calling)
	numFallbacks
)

// calledFor reports, for each fallback, whether an error is the refusal that calls for it.
var calledFor = [numFallbacks]func(*Error) bool{
	noStreamUsage:    rejectsStreamOptions,
	noTemperature:    rejectsTemperature,
	alternatingTurns: rejectsRoleOrder,
	noImages:         rejectsImages,
	noTools:          rejectsTools,
}

// hook is the callback told when a model first needs f.
func (h Hooks) hook(f fallback) func(model string) {
	switch f {
	case noStreamUsage:
		return h.StreamUsageDropped
	case noTemperature:
		return h.TemperatureDropped
	case alternatingTurns:
		return h.AlternatingTurns
	case noImages:
		return h.ImagesDropped
	case noTools:
		return h.ToolsDropped
	}
	return nil
}

// fallbacks is a set of fallbacks: those a request is sent with.
type fallbacks uint8

func (s fallbacks) has(f fallback) bool          { return s&(1<<f) != 0 }
func (s fallbacks) with(f fallback) fallbacks    { return s | 1<<f }
func (s fallbacks) without(f fallback) fallbacks { return s &^ (1 << f) }

// answer returns the first fallback not yet in s that e calls for.
func (s fallbacks) answer(e *Error) (fallback, bool) {
	for f := range numFallbacks {
		if !s.has(f) && calledFor[f](e) {
			return f, true
		}
	}
	return 0, false
}

// knownFallbacks is what a request to model starts with: the fallbacks the model is known to
// need, and those that drop what the request would not carry anyway (usage outside a stream or
// when Config.NoStreamUsage says so, a temperature when none is configured), so a refusal naming
// them is not answered by sending the same request again.
func (c *Client) knownFallbacks(model string, stream, tools bool) fallbacks {
	var s fallbacks
	for f := range numFallbacks {
		if _, ok := c.refused[f].Load(model); ok {
			s = s.with(f)
		}
	}
	if !stream || c.cfg.NoStreamUsage {
		s = s.with(noStreamUsage)
	}
	if c.cfg.Temperature == nil {
		s = s.with(noTemperature)
	}
	if !tools {
		s = s.with(noTools)
	}
	return s
}

// learn records that model needs f, and tells the hook the first time (once, however many
// calls find it out at once).
func (c *Client) learn(model string, f fallback) {
	if _, known := c.refused[f].LoadOrStore(model, struct{}{}); !known {
		if h := c.cfg.Hooks.hook(f); h != nil {
			h(model)
		}
	}
}

// bodyFor is the request for model with the fallbacks in taken.
func (c *Client) bodyFor(model string, req ChatRequest, stream bool, taken fallbacks) chatBody {
	b := chatBody{Model: model, Messages: req.Messages, Temperature: c.cfg.Temperature, Stream: stream}
	if taken.has(noImages) && hasImages(b.Messages) {
		b.Messages = withoutImages(b.Messages)
	}
	if taken.has(alternatingTurns) {
		b.Messages = alternating(b.Messages)
	}
	if !taken.has(noTools) {
		b.Tools = req.Tools
	}
	if taken.has(noTemperature) {
		b.Temperature = nil
	}
	if !taken.has(noStreamUsage) {
		b.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	return b
}

// rejectsRoleOrder reports a model server whose chat template (Mistral's, Gemma's, on vLLM or
// llama.cpp) refused the request's roles: no system message, or user and assistant turns that do
// not alternate. A thread gives consecutive user messages whenever several people talk. The status
// varies (400, or 500 from llama.cpp's template error); the template's own words do not.
func rejectsRoleOrder(e *Error) bool {
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "roles must alternate") || strings.Contains(m, "only user and assistant roles") ||
		strings.Contains(m, "system role not supported")
}

// alternating folds msgs into the shape strict chat templates demand: no system message (its text
// opens the first user message), a user turn first, then user and assistant turns in alternation
// (consecutive messages of one role are joined, a blank line apart).
func alternating(msgs []Message) []Message {
	var system []string
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		switch n := len(out); {
		case m.Role == RoleSystem:
			system = append(system, m.Content)
		case n > 0 && joinable(out[n-1], m):
			joinMessages(&out[n-1], m)
		default:
			out = append(out, m)
		}
	}
	if len(system) > 0 {
		lead := strings.Join(system, "\n\n")
		if len(out) > 0 && out[0].Role == RoleUser {
			out[0].Content = lead + "\n\n" + out[0].Content
		} else {
			out = append([]Message{{Role: RoleUser, Content: lead}}, out...)
		}
	}
	return out
}

// rejectsStreamOptions reports an answer refusing the stream_options key: OpenAI-shaped
// param "stream_options" (code unknown_parameter or unsupported_parameter), Azure's older
// api-versions ("Unrecognized request argument supplied: stream_options", no param or
// code), vLLM-style int codes, and FastAPI shims that forbid extra fields (422, whose
// detail names body.stream_options).
func rejectsStreamOptions(e *Error) bool {
	if e.Status != http.StatusBadRequest && e.Status != http.StatusUnprocessableEntity {
		return false
	}
	if p := strings.ToLower(e.Param); p == "stream_options" || strings.HasPrefix(p, "stream_options.") {
		return true
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "stream_options") || strings.Contains(m, "include_usage")
}

// rejectsTemperature reports a 400 that refuses the temperature (reasoning models).
func rejectsTemperature(e *Error) bool {
	if e.Status != http.StatusBadRequest {
		return false
	}
	if e.Param == "temperature" {
		return true // whatever the code: OpenAI and Azure also send null
	}
	msg := strings.ToLower(e.Message)
	if !strings.Contains(msg, "temperature") {
		return false
	}
	if e.Code == "unsupported_value" || e.Code == "unsupported_parameter" {
		return true
	}
	// LiteLLM ("gpt-5 models ... don't support temperature=0.7", code "400") and OpenRouter (the
	// provider's error in metadata.raw, which the message carries) name no param.
	for _, s := range []string{"unsupported", "not support", "don't support", "do not support"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// RetryFunc learns of a retry of one request: its attempt (1 for the first retry), the wait
// before it and the error that caused it. It must not block.
type RetryFunc func(attempt int, wait time.Duration, err *Error)

type retriesKey struct{}

// WithRetries returns ctx whose requests report each of their retries to f, as well as to
// Config.Hooks.Retry (which sees every request's): a caller showing one request's progress (the
// bot's "waiting for the model" with its reason) learns of its own. f is called in the goroutine
// that reads the request's results, before its first result.
func WithRetries(ctx context.Context, f RetryFunc) context.Context {
	return context.WithValue(ctx, retriesKey{}, f)
}

// send POSTs body to path until it gets a 2xx response, a final error, or runs out of
// attempts. The caller closes the response body.
func (c *Client) send(ctx context.Context, hc *http.Client, op, path, accept string, body []byte) (*http.Response, *Error) {
	for attempt := 0; ; attempt++ {
		resp, h, e := c.post(ctx, hc, path, accept, body)
		if e == nil {
			return resp, nil
		}
		wait, ok := c.retryWait(op, e, h, attempt)
		if !ok {
			return nil, e
		}
		if f := c.cfg.Hooks.Retry; f != nil {
			f(op, attempt+1, wait, e)
		}
		if f, _ := ctx.Value(retriesKey{}).(RetryFunc); f != nil {
			f(attempt+1, wait, e)
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, errorFromTransport(ctx, err).redact(c.secrets)
		}
	}
}

// post makes one attempt. A non-2xx answer is read (up to 1 MiB), closed and returned as
// an *Error with the response headers.
func (c *Client) post(ctx context.Context, hc *http.Client, path, accept string, body []byte) (*http.Response, http.Header, *Error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint(path), bytes.NewReader(body))
	if err != nil {
		return nil, nil, (&Error{Kind: KindBadRequest, Message: "build request: " + err.Error()}).redact(c.secrets)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "llmbot")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	for k, vs := range c.cfg.Headers {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	resp, err := hc.Do(req)
	if errors.Is(err, errOtherServer) {
		// Not retried: the service would redirect it again.
		return nil, nil, &Error{Kind: KindBadRequest, Message: errOtherServer.Error(), Err: errOtherServer}
	}
	if err != nil {
		return nil, nil, errorFromTransport(ctx, err).redact(c.secrets)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, resp.Header, nil
	}
	defer resp.Body.Close()
	stall := time.AfterFunc(c.cfg.IdleTimeout, func() { resp.Body.Close() }) // a stalled error body
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	stall.Stop()
	if err != nil && len(data) == 0 {
		e := errorFromTransport(ctx, err)
		if e.Kind != KindCanceled {
			e = &Error{Status: resp.StatusCode, Message: "reading the error body: " + e.Message, Err: err}
			e.Kind = classify(e.Status, "", "", "")
			e.RequestID = requestID(resp.Header)
		}
		return nil, resp.Header, e.redact(c.secrets)
	}
	return nil, resp.Header, errorFromResponse(resp.StatusCode, resp.Header, redactBytes(data, c.secrets), c.now()).redact(c.secrets)
}

// endpoint is the URL of path under the base URL (Azure's classic ?api-version= query is kept).
func (c *Client) endpoint(path string) string {
	u := c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	return u.String()
}

// retryWait decides whether a failed attempt of op is retried, and after how long
// (openai-wire.md §1.4, the official SDK's policy).
func (c *Client) retryWait(op string, e *Error, h http.Header, attempt int) (time.Duration, bool) {
	if attempt >= c.cfg.MaxRetries || e.Kind == KindCanceled || e.Kind == KindQuota || rejectsRoleOrder(e) ||
		rejectsImages(e) || rejectsTools(e) {
		return 0, false // (a template's, a text-only model's or a tool refusal, whatever its status, is answered by chat)
	}
	if op == "image" && (e.Status == http.StatusGatewayTimeout || e.Status == 524) {
		return 0, false // a gateway gave up waiting: the image may still be generated and billed
	}
	retry := false
	switch strings.ToLower(h.Get("X-Should-Retry")) {
	case "true":
		retry = true
	case "false":
		return 0, false
	default:
		s := e.Status
		retry = e.Kind == KindConnection || s == 408 || s == 409 || s == 429 || s >= 500
	}
	if !retry {
		return 0, false
	}
	if e.RetryAfter > 0 {
		if e.RetryAfter > c.cfg.MaxRetryWait {
			return 0, false
		}
		return e.RetryAfter, true
	}
	return c.backoff(attempt), true
}

// backoff is 0.5s·2ⁿ capped at 8s, minus up to 25% jitter.
func (c *Client) backoff(attempt int) time.Duration {
	d := min(500*time.Millisecond<<min(attempt, 5), 8*time.Second)
	return d - time.Duration(float64(d)*0.25*c.jitter())
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// fail turns an error that ended reading a body into a redacted *Error.
func (c *Client) fail(ctx context.Context, err error) *Error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.redact(c.secrets)
	}
	return errorFromTransport(ctx, err).redact(c.secrets)
}

// failStream turns an error that ended reading a 2xx event stream into a redacted *Error.
// A connection that broke (reset by the peer, say) ended the stream without [DONE] or a
// finish reason: the answer is truncated. The client's time limits and the caller's
// cancellation keep their kinds.
func (c *Client) failStream(ctx context.Context, h http.Header, err error, finished bool) *Error {
	e := c.fail(ctx, err)
	if e.Kind == KindConnection {
		e.Kind, e.Status, e.RequestID = KindTruncated, http.StatusOK, requestID(h)
		before := "before [DONE] or a finish reason: "
		if finished { // on a chunk with text, which some servers put on every chunk
			before = "before [DONE]: "
		}
		e.Message = "the stream broke off " + before + e.Message
	}
	return e.redact(c.secrets) // again: the request id is new
}

// endsAnswer reports whether err, which ended reading an event stream, only ends an answer
// that is complete: the stream has ended (streamDecoder.ended: a finish reason on a chunk
// without text, and no text since), err is a read error (the server broke the connection, or
// the idle timer cancelled the request) rather than an error the server or the decoder
// reported, and the caller did not cancel ctx. Like an EOF there, such an error is the end of
// the stream.
func endsAnswer(ctx context.Context, dec *streamDecoder, err error) bool {
	_, reported := errors.AsType[*Error](err)
	return err != nil && dec.ended && !reported && ctx.Err() == nil
}

// readCompletion parses a whole (non-streamed) completion body.
func (c *Client) readCompletion(ctx context.Context, h http.Header, r io.Reader) (Completion, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxCompletionBody+1))
	if err != nil {
		return Completion{}, c.fail(ctx, err)
	}
	if len(data) > maxCompletionBody {
		return Completion{}, (&Error{Kind: KindInvalid, Status: http.StatusOK, RequestID: requestID(h),
			Message: "the completion is larger than 16 MiB"}).redact(c.secrets)
	}
	comp, e := parseCompletion(h, data, c.secrets)
	if e != nil {
		return Completion{}, e.redact(c.secrets)
	}
	return comp, nil
}

// parseCompletion reads a chat.completion body (any Content-Type). The secrets are redacted
// from the body before any of it goes into an error.
func parseCompletion(h http.Header, data []byte, secrets []string) (Completion, *Error) {
	invalid := func(msg string) *Error {
		return &Error{Kind: KindInvalid, Status: http.StatusOK, RequestID: requestID(h), Message: msg}
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" { // LiteLLM has answered 200 with a null body
		return Completion{}, invalid("empty response (body: " + cmp.Or(string(data), "empty") + ")")
	}
	if e := errorInBody(http.StatusOK, h, data, secrets); e != nil {
		return Completion{}, e
	}
	var w wireChunk
	if err := w.decode(data); err != nil {
		return Completion{}, invalid("malformed response: " + snippet(redactBytes(data, secrets)))
	}
	if len(w.Choices) == 0 {
		return Completion{}, invalid("empty response: no choices")
	}
	chunk := w.chunk(false)
	if chunk.FinishReason == "error" {
		return Completion{}, &Error{Kind: KindServer, Status: http.StatusOK, RequestID: requestID(h),
			Message: `the server ended the answer with finish_reason "error"`}
	}
	comp := Completion{Content: chunk.Content, Reasoning: chunk.Reasoning, Refusal: chunk.Refusal,
		FinishReason: chunk.FinishReason, Usage: chunk.Usage}
	if d := w.pick(false); d != nil && len(d.ToolCalls) > 0 {
		var calls callAssembler
		calls.add(d.ToolCalls)
		comp.ToolCalls = calls.take()
	}
	return comp, nil
}

// utf8BOM is the UTF-8 byte order mark.
const utf8BOM = "\xef\xbb\xbf"

// bodyKind is how a 2xx chat body is encoded.
type bodyKind int

const (
	bodySSE  bodyKind = iota
	bodyJSON          // the server ignored stream:true, or answered stream:false
	bodyHTML          // a proxy's or captive portal's page, not the model service
)

// sniff tells the kind of a 2xx body, after dropping a leading byte order mark (which the
// WHATWG event stream rules ignore, and encoding/json rejects). A text/event-stream
// Content-Type is trusted; otherwise the first byte decides, so a stream mislabelled as
// JSON and JSON mislabelled as text both work.
func sniff(h http.Header, br *bufio.Reader) bodyKind {
	if b, _ := br.Peek(len(utf8BOM)); string(b) == utf8BOM {
		br.Discard(len(utf8BOM))
	}
	ct := strings.ToLower(h.Get("Content-Type"))
	if strings.Contains(ct, "event-stream") {
		return bodySSE
	}
	for {
		b, err := br.Peek(1)
		switch {
		case err != nil && strings.Contains(ct, "json"):
			return bodyJSON // empty: "empty response"
		case err != nil:
			return bodySSE // empty: truncated
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			br.ReadByte()
		case '{', '[', 'n':
			return bodyJSON
		case '<':
			return bodyHTML
		default:
			return bodySSE
		}
	}
}

// htmlError reports an HTML page received instead of an answer.
func (c *Client) htmlError(h http.Header, r io.Reader) *Error {
	data, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	return (&Error{Kind: KindInvalid, Status: http.StatusOK, RequestID: requestID(h),
		Message: "the service answered with a web page, not the API (check the base URL): " + snippet(redactBytes(data, c.secrets))}).redact(c.secrets)
}

// idleReader is a response body watched for silence: every Read arms a timer that cancels
// the request when it fires, and disarms it when data arrives. No goroutine is involved;
// the time the caller spends between reads does not count.
//
// With coalesce above 0 it also spaces the reads that must wait for the network: once it has
// read all that had arrived, the next Read first waits for the next shared instant (see
// alignedPause), so what arrives meanwhile is read at once. The wait ends early when ctx does; it is not
// silence (the idle timer runs only while a Read waits for data). endCoalescing turns the pauses
// off for the rest of the body (after the finish reason, so the end of the stream is not held
// back).
//
// When has it read all that had arrived? After a Read that had to wait for data, surely. After a
// short Read that did not wait, it depends on the body: a plain socket (and HTTP/2's buffer)
// hands out all it holds, but over TLS with HTTP/1.1 each Read returns one record (one event),
// however many are waiting. The response says which it is (Stream sets partial for TLS with
// HTTP/1.x): a partial body pauses only after a Read that waited (one wake-up more per interval),
// any other after every short Read (one wake-up per interval).
type idleReader struct {
	r     io.Reader
	idle  time.Duration
	timer *time.Timer

	ctx      context.Context
	cancel   context.CancelCauseFunc // cancels ctx (the request)
	coalesce time.Duration
	conn     net.Conn    // the body's own connection (HTTP/1.x), to hold back wake-ups during pauses; nil: none
	pause    *time.Timer // nil until the first wait
	last     time.Time   // when the last Read that returned data returned
	drained  bool        // all that had arrived has been read: the next Read pauses first
	partial  bool        // a short Read may leave data waiting (TLS with HTTP/1.x: one record per Read)
}

// caughtUp is how long a Read must have waited for data to count as having caught up with the
// sender (a Read that finds data waiting returns in microseconds).
const caughtUp = time.Millisecond

// watch wraps a response body of a request made with ctx; cancel cancels ctx. coalesce is
// Config.StreamCoalesce for streams, 0 otherwise.
func (c *Client) watch(ctx context.Context, r io.Reader, cancel context.CancelCauseFunc, coalesce time.Duration) *idleReader {
	ir := newIdleReader(ctx, r, cancel, c.cfg.IdleTimeout, errIdle)
	ir.coalesce = coalesce
	return ir
}

// newIdleReader wraps r, read for a request made with ctx: a Read that waits longer than idle
// cancels ctx (cancel) with cause.
func newIdleReader(ctx context.Context, r io.Reader, cancel context.CancelCauseFunc, idle time.Duration, cause error) *idleReader {
	t := time.AfterFunc(time.Hour, func() { cancel(cause) })
	t.Stop()
	return &idleReader{r: r, idle: idle, timer: t, ctx: ctx, cancel: cancel}
}

func (r *idleReader) Read(p []byte) (int, error) {
	if r.drained && r.coalesce > 0 {
		r.quiet(true)
		err := r.wait(alignedPause(r.last, r.coalesce))
		r.quiet(false)
		if err != nil {
			return 0, err
		}
	}
	var start time.Time
	if r.coalesce > 0 {
		start = time.Now()
	}
	r.timer.Reset(r.idle)
	n, err := r.r.Read(p)
	r.timer.Stop()
	if n > 0 && r.coalesce > 0 {
		r.last = time.Now()
		waited := r.last.Sub(start) >= caughtUp
		r.drained = waited || (n < len(p) && !r.partial)
	}
	return n, err
}

func (r *idleReader) endCoalescing() { r.coalesce = 0 }

// endGrace bounds the wait for the end of a body after [DONE]: servers end the response right
// after it, but the end (HTTP/1.1's last chunk) may come in a packet of its own.
const endGrace = 250 * time.Millisecond

// finish reads what is left of the body after the stream's end (br wraps r), so that the
// connection goes back to the pool: net/http closes a connection whose body is closed before
// its end was read. A server that does not end the body within endGrace, or sends more than
// 64 KB after [DONE], loses its connection instead (the request is cancelled).
func (r *idleReader) finish(br io.Reader) {
	r.endCoalescing()
	deadline := time.AfterFunc(endGrace, func() { r.cancel(errStreamDone) })
	defer deadline.Stop()
	_, _ = io.Copy(io.Discard, io.LimitReader(br, 64<<10))
}

// quietBytes is SO_RCVLOWAT during a pause: far more than a pause gathers (a few KB a second of
// tokens; the longest pause, 1.5 MaxCoalesce, about 150 KB at 100 tokens a second), so the kernel
// wakes nobody for the tokens that arrive meanwhile. Linux also raises the socket's receive
// buffer to about twice this and its window clamp to it, for the connection's life (memory is
// used only by data waiting), hence no more than this.
const quietBytes = 256 << 10

// quiet holds back (on) or restores (off) the network poller's wake-ups for the body's
// connection: during a pause nobody reads it, yet every packet that arrives (one per token)
// would wake the process for nothing. Only on Linux; on the first failure it stops trying.
func (r *idleReader) quiet(on bool) {
	if r.conn == nil {
		return
	}
	n := 1
	if on {
		n = quietBytes
	}
	if err := setRcvLowat(r.conn, n); err != nil {
		if on {
			_ = setRcvLowat(r.conn, 1) // as it was, whatever failed
		}
		r.conn = nil
	}
}

// alignedPause is how long to wait after data read at last before reading again: until the
// first multiple of every (counted from the zero time, so the same instants for every stream of
// the process) at least every/2 after last, so every/2 to 3/2 every after it (every on average,
// as a pause of every from the last data would be). A bot reading 50 streams at once then wakes
// up 1/every times a second for all of them together instead of 50/every times, and each
// wake-up of a Go process (timer, scheduler, futex, epoll: a few syscalls, each dear in a VM)
// costs more than reading a few events. The wall clock only aligns the instants; the wait is
// bounded by 3/2 every whatever it does.
func alignedPause(last time.Time, every time.Duration) time.Duration {
	earliest := last.Add(every / 2)
	next := earliest.Truncate(every) // Truncate drops the monotonic reading: wall-clock instants
	if next.Before(earliest) {
		next = next.Add(every)
	}
	return min(time.Until(next), every*3/2)
}

// wait sleeps d (nothing when d <= 0) unless ctx ends first.
func (r *idleReader) wait(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if r.pause == nil {
		r.pause = time.NewTimer(d)
	} else {
		r.pause.Reset(d)
	}
	select {
	case <-r.pause.C:
		return nil
	case <-r.ctx.Done():
		r.pause.Stop()
		return r.ctx.Err()
	}
}

func (r *idleReader) stop() {
	r.timer.Stop()
	if r.pause != nil {
		r.pause.Stop()
	}
}

// connOf records the connection a request was sent on (the last attempt's).
type connOf struct {
	mu   sync.Mutex
	conn net.Conn
}

func (c *connOf) trace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		c.mu.Lock()
		c.conn = i.Conn
		c.mu.Unlock()
	}})
}

func (c *connOf) get() net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conn
}
