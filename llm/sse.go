package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// This file decodes a chat completion stream: server-sent events per the WHATWG rules
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation),
// made tolerant of what compatible servers send (openai-wire.md §3.2, §4.4).

const (
	initialLineBuffer = 32 << 10
	maxLineBuffer     = 8 << 20 // lines over 1 MiB must pass; a bound keeps memory finite
)

var errLineTooLong = errors.New("stream line longer than 8 MiB")

// lineReader splits a byte stream into lines ended by CRLF, LF or a lone CR. It owns one
// buffer that grows up to maxLineBuffer; a returned line is valid until the next call.
type lineReader struct {
	r      io.Reader
	buf    []byte
	start  int  // buf[start:end] is read but not yet returned
	end    int  //
	skipLF bool // the last line ended with CR: a LF right after it belongs to it
	err    error
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: r, buf: make([]byte, initialLineBuffer)}
}

// line returns the next line without its end. At the end of the input, a last line without
// a line end is returned once, then the read error (io.EOF for a clean end).
func (l *lineReader) line() ([]byte, error) {
	for {
		if l.skipLF && l.start < l.end {
			if l.buf[l.start] == '\n' {
				l.start++
			}
			l.skipLF = false
		}
		b := l.buf[l.start:l.end]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			if j := bytes.IndexByte(b[:i], '\r'); j >= 0 && j < i-1 {
				l.start += j + 1 // a lone CR ends this line
				return b[:j], nil
			}
			l.start += i + 1
			if i > 0 && b[i-1] == '\r' {
				return b[:i-1], nil
			}
			return b[:i], nil
		}
		if j := bytes.IndexByte(b, '\r'); j >= 0 {
			l.start += j + 1
			l.skipLF = true
			return b[:j], nil
		}
		if l.err != nil {
			if len(b) > 0 && l.err != errLineTooLong {
				l.start = l.end
				return b, nil
			}
			return nil, l.err
		}
		l.fill()
	}
}

// fill reads more input, first moving unread bytes to the front, growing the buffer when a
// line does not fit.
func (l *lineReader) fill() {
	if l.start > 0 {
		l.end = copy(l.buf, l.buf[l.start:l.end])
		l.start = 0
	}
	if l.end == len(l.buf) {
		if len(l.buf) >= maxLineBuffer {
			l.err = errLineTooLong
			return
		}
		grown := make([]byte, min(2*len(l.buf), maxLineBuffer))
		copy(grown, l.buf[:l.end])
		l.buf = grown
	}
	n, err := l.r.Read(l.buf[l.end:])
	l.end += n
	if err != nil {
		l.err = err
	}
}

// wireChunk is the part of a chat.completion.chunk (or a whole chat.completion) the client
// reads. It is reused from event to event; unknown fields are skipped by encoding/json
// without allocating.
type wireChunk struct {
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage"`
	XGroq   *struct {
		Usage *wireUsage `json:"usage"`
	} `json:"x_groq"`
	Error json.RawMessage `json:"error"`
}

type wireChoice struct {
	Delta        wireDelta `json:"delta"`
	Message      wireDelta `json:"message"` // non-streamed completions
	FinishReason string    `json:"finish_reason"`
}

type wireDelta struct {
	Content          string         `json:"content"`
	ReasoningContent string         `json:"reasoning_content"` // DeepSeek, llama.cpp, LiteLLM, older vLLM
	Reasoning        string         `json:"reasoning"`         // OpenRouter, Ollama, vLLM
	Refusal          string         `json:"refusal"`
	ToolCalls        []wireToolCall `json:"tool_calls"`
}

// empty reports a delta that carries nothing the client reads.
func (d *wireDelta) empty() bool {
	return d.Content == "" && d.ReasoningContent == "" && d.Reasoning == "" && d.Refusal == "" && len(d.ToolCalls) == 0
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func (u *wireUsage) usage() *Usage {
	if u == nil {
		return nil
	}
	return &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}

func (d *wireDelta) reasoning() string {
	if d.ReasoningContent != "" {
		return d.ReasoningContent
	}
	return d.Reasoning
}

// reset empties w for the next event, keeping the choices' backing array.
func (w *wireChunk) reset() {
	clear(w.Choices[:cap(w.Choices)])
	w.Choices = w.Choices[:0]
	w.Usage = nil
	w.XGroq = nil
	w.Error = w.Error[:0]
}

// decode parses one JSON value into w. A field of an unexpected type (content as an array
// of parts, say) is left empty rather than failing the whole event.
func (w *wireChunk) decode(data []byte) error {
	w.reset()
	err := json.Unmarshal(data, w)
	if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return nil
	}
	return err
}

// streamDecoder turns an SSE body into Chunks. next returns chunks that carry something,
// then io.EOF after [DONE] or a finish reason, or the error that ended the stream:
// *Error for errors the server reported and for truncation, the read error otherwise.
type streamDecoder struct {
	lines    *lineReader
	header   http.Header // for request ids in errors
	data     []byte      // the pending event's data
	errEvent bool        // the pending event is "event: error"
	done     bool        // [DONE] seen
	finished bool        // a finish_reason seen
	// ended: the last chunk with a finish reason had no text and no text came after it, so the
	// answer is surely complete. A finish reason on a chunk with text may not be the end: some
	// gateways put one on every chunk (one-api and LiteLLM in front of Gemini, Open WebUI).
	ended bool
	// everyChunk: text came after a finish reason, so this server marks every chunk, and a usage
	// chunk after one is not the end either.
	everyChunk bool
	pending    error    // an error to return after the chunk that came with it
	secrets    []string // redacted from an event before any of it goes into an error
	w          wireChunk
	calls      callAssembler // the tool calls so far, delivered at the end (takeCalls)
}

// takeCalls returns the tool calls assembled from the stream, once.
func (s *streamDecoder) takeCalls() []ToolCall { return s.calls.take() }

func newStreamDecoder(r io.Reader, h http.Header, secrets []string) *streamDecoder {
	return &streamDecoder{lines: newLineReader(r), header: h, secrets: secrets}
}

func (s *streamDecoder) next() (Chunk, error) {
	if s.pending != nil {
		err := s.pending
		s.pending = nil
		return Chunk{}, err
	}
	for !s.done {
		line, err := s.lines.line()
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) { // a clean end, or the connection dropped
			return s.atEOF()
		}
		if err != nil {
			if err == errLineTooLong {
				return Chunk{}, &Error{Kind: KindInvalid, Status: http.StatusOK, Message: err.Error(), RequestID: requestID(s.header)}
			}
			return Chunk{}, err
		}
		if len(line) == 0 {
			c, ok, err := s.dispatch()
			if err != nil || ok {
				return c, err
			}
			continue
		}
		if err := s.field(line); err != nil {
			return Chunk{}, err
		}
	}
	return Chunk{}, io.EOF
}

// field handles one non-empty line.
func (s *streamDecoder) field(line []byte) error {
	switch line[0] {
	case ':': // comment: keep-alive
		return nil
	case '{', '[': // a raw JSON line without "data:" (some proxies write errors this way)
		s.appendData(line)
		return nil
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) { // no allocation: the compiler compares in place
	case "data":
		s.appendData(value)
	case "event":
		s.errEvent = string(value) == "error"
	case "error": // llama.cpp before ~2025-09: "error: {...}" instead of a data event
		return s.errorFrom(value, true)
	}
	return nil // id, retry and unknown fields are ignored
}

func (s *streamDecoder) appendData(v []byte) {
	if len(s.data) > 0 {
		s.data = append(s.data, '\n')
	}
	s.data = append(s.data, v...)
}

// dispatch handles the pending event at a blank line. ok reports a chunk to yield.
func (s *streamDecoder) dispatch() (c Chunk, ok bool, err error) {
	data, errEvent := s.data, s.errEvent
	s.data, s.errEvent = s.data[:0], false
	if errEvent {
		return Chunk{}, false, s.errorFrom(data, false)
	}
	if len(data) == 0 { // an empty "data:" frame
		return Chunk{}, false, nil
	}
	if bytes.HasPrefix(data, []byte("[DONE]")) {
		s.done = true
		return Chunk{}, false, nil
	}
	if err := s.w.decode(data); err != nil {
		return Chunk{}, false, &Error{Kind: KindInvalid, Status: http.StatusOK, RequestID: requestID(s.header),
			Message: "malformed stream event: " + clip(collapse(string(redactBytes(data, s.secrets))), maxSnippet)}
	}
	if truthy(s.w.Error) {
		if e := errorInBody(http.StatusOK, s.header, data, s.secrets); e != nil {
			return Chunk{}, false, e
		}
		// Not reached while errorInBody reads what decode reads; never return a nil *Error.
		return Chunk{}, false, &Error{Kind: KindServer, Status: http.StatusOK, RequestID: requestID(s.header),
			Message: "the server reported an error"}
	}
	c = s.w.chunk(true)
	var calling bool // tool call fragments: like text, the answer goes on
	if d := s.w.pick(true); d != nil && len(d.ToolCalls) > 0 {
		s.calls.add(d.ToolCalls)
		calling = true
	}
	text := c.Content != "" || c.Reasoning != "" || c.Refusal != "" || calling
	if text && s.finished { // an earlier chunk's finish reason was not the end
		s.everyChunk = true
	}
	if c.FinishReason != "" {
		s.finished = true
	}
	switch {
	case text:
		s.ended = false
	case c.FinishReason != "" && c.FinishReason != "error":
		s.ended = true
	case s.finished && !s.everyChunk && c.Usage != nil && len(s.w.Choices) == 0:
		// stream_options.include_usage's chunk, sent only at the end: after vLLM's or Gemini's
		// last chunk, which carries text and the finish reason together.
		s.ended = true
	}
	if c.FinishReason == "error" {
		c.FinishReason = ""
		s.pending = &Error{Kind: KindServer, Status: http.StatusOK, RequestID: requestID(s.header),
			Message: `the server ended the answer with finish_reason "error"`}
		if c.empty() {
			err := s.pending
			s.pending = nil
			return Chunk{}, false, err
		}
	}
	return c, !c.empty(), nil
}

// empty reports a chunk that carries nothing.
func (c *Chunk) empty() bool {
	return c.Content == "" && c.Reasoning == "" && c.Refusal == "" && c.FinishReason == "" && c.Usage == nil &&
		len(c.ToolCalls) == 0
}

// chunk converts the decoded event. delta selects the streamed field (delta) or the whole
// message of a non-streamed completion.
func (w *wireChunk) chunk(delta bool) Chunk {
	c := Chunk{Usage: w.Usage.usage()}
	if c.Usage == nil && w.XGroq != nil {
		c.Usage = w.XGroq.Usage.usage()
	}
	if d := w.pick(delta); d != nil {
		c.Content, c.Reasoning, c.Refusal, c.FinishReason = d.Content, d.reasoning(), d.Refusal, w.Choices[0].FinishReason
	}
	return c
}

// pick returns the first choice's delta (delta) or whole message, or the other one when that is
// empty (a whole message where a delta was expected, or the reverse); nil without choices.
func (w *wireChunk) pick(delta bool) *wireDelta {
	if len(w.Choices) == 0 {
		return nil
	}
	ch := &w.Choices[0]
	d, alt := &ch.Delta, &ch.Message
	if !delta {
		d, alt = alt, d
	}
	if d.empty() {
		d = alt
	}
	return d
}

// errorFrom builds the error of an "event: error" event or an old llama.cpp "error:" line.
// Its data may be a full error body, a bare error object (bare) or plain text.
func (s *streamDecoder) errorFrom(data []byte, bare bool) error {
	data = redactBytes(data, s.secrets)
	if e := errorInBody(http.StatusOK, s.header, data, s.secrets); e != nil {
		return e
	}
	if bare && len(data) > 0 && data[0] == '{' {
		wrapped := append(append([]byte(`{"error":`), data...), '}')
		if e := errorInBody(http.StatusOK, s.header, wrapped, s.secrets); e != nil {
			return e
		}
	}
	e := &Error{Kind: KindServer, Status: http.StatusOK, RequestID: requestID(s.header)}
	parseErrorJSON(e, data)
	if e.Message == "" {
		e.Message = snippet(data)
	}
	if e.Message == "" {
		e.Message = "the server sent an error event"
	}
	return e
}

// atEOF ends the stream: a pending event is used only if it is complete, and the stream is
// truncated unless [DONE] or a finish reason was seen.
func (s *streamDecoder) atEOF() (Chunk, error) {
	if len(s.data) > 0 || s.errEvent {
		if s.errEvent || bytes.HasPrefix(s.data, []byte("[DONE]")) || json.Valid(s.data) {
			c, ok, err := s.dispatch()
			if err != nil || ok {
				return c, err
			}
		}
		s.data = s.data[:0]
	}
	if s.done || s.finished {
		return Chunk{}, io.EOF
	}
	return Chunk{}, &Error{Kind: KindTruncated, Status: http.StatusOK, RequestID: requestID(s.header),
		Message: "the stream ended without [DONE] or a finish reason"}
}
