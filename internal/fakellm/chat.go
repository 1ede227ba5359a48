package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ChatRequest is a decoded chat completion request.
type ChatRequest struct {
	Model    string
	Messages []Message
	// Temperature is nil when the key is absent (a JSON null counts as absent too).
	Temperature  *float64
	Stream       bool
	IncludeUsage bool // stream_options.include_usage
	// Fields are the request's top-level keys, raw, for checks beyond the fields above.
	Fields map[string]json.RawMessage
	Raw    json.RawMessage
	Header http.Header
	Tools  []Tool // the tools offered (see tools.go)
}

// Has reports whether the request body has the top-level key.
func (r ChatRequest) Has(key string) bool { _, ok := r.Fields[key]; return ok }

// Message is one chat message. Content is the text (text parts joined with "\n" when the
// content is an array of parts); RawContent is the content as sent.
type Message struct {
	Role       string
	Content    string
	Name       string
	RawContent json.RawMessage
	ToolCalls  []ToolCall // an assistant message's calls
	ToolCallID string     // a tool message's call
}

// Failure is how a streamed reply goes wrong after Reply.After tokens.
type Failure int

// The failure modes of a streamed reply.
const (
	// FailNone streams every token, a finish chunk, the usage chunk if any, and [DONE].
	FailNone Failure = iota
	// FailError writes `data: {"error":{…}}` (Reply.Error) and ends the stream, with
	// `data: [DONE]` after it when Reply.DoneAfterError is set. Without stream, the
	// error body is answered with HTTP 200.
	FailError
	// FailCut closes the connection: no finish_reason, no [DONE].
	FailCut
	// FailStall holds the connection open, sending nothing (or keep-alive comments when
	// Reply.KeepAlive is set), until the client leaves, the server closes, or StallFor.
	FailStall
)

// Reply decides one chat completion answer.
type Reply struct {
	Tokens          []string      // content deltas, one chunk each
	HeaderDelay     time.Duration // before the response headers (for header timeouts)
	FirstTokenDelay time.Duration // before the first content chunk (after the headers)
	TokenInterval   time.Duration // between content chunks
	// Pause, when > 0, is a silence of that long before token PauseAt (a model thinking mid-answer;
	// keep-alive comments meanwhile when KeepAlive is set).
	Pause        time.Duration
	PauseAt      int
	FinishReason string // "" means "stop"
	// Usage is sent as a last chunk with "choices": [] (and in a JSON completion). Nil:
	// computed, and sent in a stream only when the request asks stream_options.include_usage.
	Usage *Usage
	// NoUsage sends no usage at all, asked or not (a server that ignores stream_options, as
	// llama.cpp's older builds and some gateways do); it wins over Usage.
	NoUsage bool
	// KeepAlive > 0 writes ": keep-alive" comments this often while waiting (first token
	// delay, stalls), as llama.cpp and OpenRouter do.
	KeepAlive time.Duration
	Model     string // the model echoed; "" echoes the request's

	// Status != 0 and != 200 answers with that status, Header, and Body (or Error's JSON).
	Status int
	Header http.Header
	Body   string

	Failure        Failure
	After          int       // the failure happens after this many tokens
	Error          *APIError // FailError's event, or the HTTP error body
	DoneAfterError bool
	StallFor       time.Duration // FailStall's bound; 0: until the client leaves or Close

	// Raw, when not empty, is written as the whole 200 body with RawContentType
	// (default text/event-stream), for malformed or unusual streams.
	Raw            string
	RawContentType string

	// ToolCalls are sent after the tokens, in the wire variant ToolWire (tools.go).
	ToolCalls []ToolCall
	ToolWire  ToolWire
}

// Usage is a completion's token usage.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Tokens is a reply streaming these content deltas.
func Tokens(tokens ...string) Reply { return Reply{Tokens: tokens} }

// Text is a reply streaming text cut into token-sized pieces (see Split).
func Text(text string) Reply { return Reply{Tokens: Split(text)} }

// RefuseStreamOptions is the 400 of a server that knows no stream_options (Azure's older
// api-versions: "Unrecognized request argument supplied", without param or code).
func RefuseStreamOptions() Reply {
	return HTTPError(http.StatusBadRequest, APIError{
		Message: "Unrecognized request argument supplied: stream_options", Type: "invalid_request_error"})
}

// HTTPError is a reply failing with an HTTP status and an OpenAI-shaped error body.
func HTTPError(status int, e APIError) Reply { return Reply{Status: status, Error: &e} }

// Paced returns r with a first-token delay and a steady interval between tokens.
func (r Reply) Paced(first, interval time.Duration) Reply {
	r.FirstTokenDelay, r.TokenInterval = first, interval
	return r
}

// PauseAfter returns r falling silent for d after n tokens, then going on.
func (r Reply) PauseAfter(n int, d time.Duration) Reply {
	r.PauseAt, r.Pause = n, d
	return r
}

// ErrorAfter returns r failing with a mid-stream error event after n tokens.
func (r Reply) ErrorAfter(n int, e APIError) Reply {
	r.Failure, r.After, r.Error = FailError, n, &e
	return r
}

// CutAfter returns r with the connection closed after n tokens.
func (r Reply) CutAfter(n int) Reply {
	r.Failure, r.After = FailCut, n
	return r
}

// StallAfter returns r holding the connection silent after n tokens.
func (r Reply) StallAfter(n int) Reply {
	r.Failure, r.After = FailStall, n
	return r
}

// Join is the full text of the reply's tokens.
func (r Reply) Join() string { return strings.Join(r.Tokens, "") }

func decodeChat(body []byte, h http.Header) (*ChatRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	var wire struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			Name       string          `json:"name"`
			ToolCalls  []wireCall      `json:"tool_calls"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
		Tools         []wireTool `json:"tools"`
		Temperature   *float64   `json:"temperature"`
		Stream        bool       `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, err
	}
	req := &ChatRequest{Model: wire.Model, Temperature: wire.Temperature, Stream: wire.Stream,
		Fields: fields, Raw: body, Header: h}
	if wire.StreamOptions != nil {
		req.IncludeUsage = wire.StreamOptions.IncludeUsage
	}
	for _, m := range wire.Messages {
		req.Messages = append(req.Messages, Message{Role: m.Role, Content: contentText(m.Content), Name: m.Name,
			RawContent: m.Content, ToolCalls: callsOf(m.ToolCalls), ToolCallID: m.ToolCallID})
	}
	req.Tools = toolsOf(wire.Tools)
	return req, nil
}

// contentText reads a message content: a string, or an array of parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request) {
	rec := s.begin(w, r)
	if rec == nil {
		return
	}
	req, err := decodeChat(rec.Body, rec.Header)
	if err != nil || len(req.Messages) == 0 {
		s.respond(w, rec, http.StatusBadRequest, nil, errorBody("We could not parse the JSON body of your request.", "invalid_request_error", "", ""))
		return
	}
	s.update(func() { rec.Chat = req })
	s.mu.Lock()
	decide := s.chat
	s.mu.Unlock()
	reply := decide(*req)
	s.enter()
	defer s.leave()
	if !s.wait(r.Context(), w, nil, reply.HeaderDelay, 0) {
		s.update(func() { rec.ClientGone, rec.End = r.Context().Err() != nil, time.Now() })
		return
	}

	if reply.Status != 0 && reply.Status != http.StatusOK {
		body := reply.Body
		if body == "" && reply.Error != nil {
			body = reply.Error.JSON()
		}
		s.respond(w, rec, reply.Status, reply.Header, body)
		return
	}
	if reply.Model == "" {
		reply.Model = req.Model
	}
	if reply.FinishReason == "" {
		reply.FinishReason = reply.toolFinish()
	}
	if reply.Raw != "" {
		ct := reply.RawContentType
		if ct == "" {
			ct = "text/event-stream"
		}
		w.Header().Set("Content-Type", ct)
		s.respond(w, rec, http.StatusOK, reply.Header, reply.Raw)
		return
	}
	if req.Stream {
		s.stream(w, r, rec, req, reply)
		return
	}
	s.complete(w, r, rec, req, reply)
}

func estimateUsage(req *ChatRequest, reply Reply) Usage {
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(m.Content)/4 + 4
	}
	completion := min(len(reply.Tokens), reply.limit())
	return Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

// limit is how many tokens are written before the failure.
func (r Reply) limit() int {
	if r.Failure == FailNone {
		return len(r.Tokens)
	}
	return min(max(r.After, 0), len(r.Tokens))
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request, rec *Record, req *ChatRequest, reply Reply) {
	if !s.wait(r.Context(), w, nil, reply.FirstTokenDelay, 0) {
		s.update(func() { rec.ClientGone, rec.End = r.Context().Err() != nil, time.Now() })
		return
	}
	switch reply.Failure {
	case FailCut:
		s.cut(w, rec)
		return
	case FailStall:
		s.stall(w, r, rec, nil, reply)
		return
	case FailError: // an error body with HTTP 200, as LM Studio and some proxies answer
		e := APIError{Message: "The server had an error while processing your request.", Type: "server_error"}
		if reply.Error != nil {
			e = *reply.Error
		}
		s.respond(w, rec, http.StatusOK, reply.Header, e.JSON())
		return
	}
	usage := estimateUsage(req, reply)
	if reply.Usage != nil {
		usage = *reply.Usage
	}
	var content any = reply.Join()
	if len(reply.Tokens) == 0 {
		content = nil
	}
	var usageField any = usage
	if reply.NoUsage {
		usageField = nil
	}
	b, _ := json.Marshal(map[string]any{
		"id": s.newID("chatcmpl"), "object": "chat.completion", "created": time.Now().Unix(), "model": reply.Model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       reply.wholeMessage(content),
			"logprobs":      nil,
			"finish_reason": reply.FinishReason,
		}},
		"usage": usageField, "service_tier": "default", "system_fingerprint": "fp_fake",
	})
	for k, v := range reply.Header {
		w.Header()[k] = v
	}
	s.respond(w, rec, http.StatusOK, http.Header{"Content-Type": {"application/json"}}, string(b))
}

// cut closes the connection without a proper end.
func (s *Server) cut(w http.ResponseWriter, rec *Record) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, buf, err := hj.Hijack(); err == nil {
			_ = buf.Flush()
			_ = conn.Close()
		}
	} else {
		panic(http.ErrAbortHandler)
	}
	s.update(func() { rec.Finished, rec.End = true, time.Now() })
}

// stall holds the connection until the client leaves, the server closes, or StallFor.
func (s *Server) stall(w http.ResponseWriter, r *http.Request, rec *Record, fl http.Flusher, reply Reply) {
	d := reply.StallFor
	if d <= 0 {
		d = 24 * time.Hour // bounded by the client leaving or Close
	}
	ran := s.wait(r.Context(), w, fl, d, reply.KeepAlive)
	s.update(func() {
		rec.End = time.Now()
		rec.Finished = ran
		rec.ClientGone = r.Context().Err() != nil
	})
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, rec *Record, req *ChatRequest, reply Reply) {
	fl, _ := w.(http.Flusher)
	for k, v := range reply.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s.update(func() { rec.Status = http.StatusOK })

	id, created := s.newID("chatcmpl"), time.Now().Unix()
	withUsage := (req.IncludeUsage || reply.Usage != nil) && !reply.NoUsage
	// Chunks are assembled from a fixed head and tail around the delta: one small
	// marshal per token keeps the fake cheap next to the bot under load.
	model, _ := json.Marshal(reply.Model)
	head := fmt.Sprintf(`data: {"id":"%s","object":"chat.completion.chunk","created":%d,"model":%s,"system_fingerprint":"fp_fake","choices":[{"index":0,"delta":`, id, created, model)
	usageNull := ""
	if withUsage {
		usageNull = `,"usage":null`
	}
	chunk := func(delta map[string]any, finish any) string {
		d, _ := json.Marshal(delta)
		f, _ := json.Marshal(finish)
		return head + string(d) + `,"logprobs":null,"finish_reason":` + string(f) + `}]` + usageNull + "}\n\n"
	}
	content := func(text string) string {
		t, _ := json.Marshal(text)
		return head + `{"content":` + string(t) + `},"logprobs":null,"finish_reason":null}]` + usageNull + "}\n\n"
	}
	gone := func() {
		s.update(func() { rec.ClientGone, rec.End = true, time.Now() })
	}
	write := func(frame string) bool {
		if _, err := io.WriteString(w, frame); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}

	if !write(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		gone()
		return
	}
	limit := reply.limit()
	for i := range limit {
		d := reply.TokenInterval
		if i == 0 {
			d = reply.FirstTokenDelay
		}
		if i == reply.PauseAt && reply.Pause > 0 {
			d += reply.Pause
		}
		if !s.wait(r.Context(), w, fl, d, reply.KeepAlive) || !write(content(reply.Tokens[i])) {
			gone()
			return
		}
		now := time.Now()
		s.update(func() { rec.Tokens = append(rec.Tokens, TokenWrite{Text: reply.Tokens[i], Time: now}) })
	}
	switch reply.Failure {
	case FailError:
		e := APIError{Message: "The server had an error while processing your request.", Type: "server_error"}
		if reply.Error != nil {
			e = *reply.Error
		}
		frame := "data: " + e.JSON() + "\n\n"
		if reply.DoneAfterError {
			frame += "data: [DONE]\n\n"
		}
		ok := write(frame)
		s.update(func() { rec.Finished, rec.ClientGone, rec.End = ok, !ok, time.Now() })
		return
	case FailCut:
		s.cut(w, rec)
		return
	case FailStall:
		s.stall(w, r, rec, fl, reply)
		return
	}
	for _, f := range reply.toolFrames(head, usageNull) {
		if !write(f) {
			gone()
			return
		}
	}
	frames := chunk(map[string]any{}, reply.FinishReason)
	if withUsage {
		u := estimateUsage(req, reply)
		if reply.Usage != nil {
			u = *reply.Usage
		}
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": reply.Model,
			"system_fingerprint": "fp_fake", "choices": []any{}, "usage": u,
		})
		frames += "data: " + string(b) + "\n\n"
	}
	frames += "data: [DONE]\n\n"
	ok := write(frames)
	s.update(func() { rec.Finished, rec.ClientGone, rec.End = ok, !ok, time.Now() })
}

// String describes the reply briefly (for test failure messages).
func (r Reply) String() string {
	return fmt.Sprintf("Reply{%d tokens, status %d, failure %d after %d}", len(r.Tokens), r.Status, r.Failure, r.After)
}

// Sequence answers the i-th chat request with replies[i], and later ones with the last
// reply (for retry tests: a 500, then a good answer).
func Sequence(replies ...Reply) func(ChatRequest) Reply {
	var mu sync.Mutex
	i := 0
	return func(ChatRequest) Reply {
		mu.Lock()
		defer mu.Unlock()
		r := replies[min(i, len(replies)-1)]
		i++
		return r
	}
}

// UnsupportedTemperature is OpenAI's answer to a temperature a reasoning model does not
// support (HTTP 400, param temperature, code unsupported_value).
func UnsupportedTemperature(value string) Reply {
	return HTTPError(http.StatusBadRequest, APIError{
		Message: "Unsupported value: 'temperature' does not support " + value + " with this model. Only the default (1) value is supported.",
		Type:    "invalid_request_error", Param: "temperature", Code: "unsupported_value",
	})
}
