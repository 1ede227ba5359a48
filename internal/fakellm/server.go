// Package fakellm is an in-process fake OpenAI-compatible server for tests and benchmarks.
//
// It listens on 127.0.0.1 and answers POST /v1/chat/completions (SSE streams with real
// chunk shapes, or a JSON completion) and POST /v1/images/generations. A test decides each
// answer with a function; replies can be paced (first-token delay, token interval), fail
// with an HTTP error, fail mid-stream, be cut off, or stall. Every request is recorded with
// the time each token was written and flushed, and whether the client left early.
//
// It imports nothing of this module but internal/watch, so tests of any package may use it.
package fakellm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/llmbot/llmbot/internal/watch"
)

// DefaultAPIKey is the key the server accepts until SetAPIKey changes it.
const DefaultAPIKey = "sk-test"

// Server is a running fake OpenAI-compatible server. Its methods are safe for concurrent use.
type Server struct {
	http *httptest.Server
	stop chan struct{} // closed by Close: ends stalls and waits

	mu      sync.Mutex
	changes *watch.Changes // every state change wakes the waiters (WaitFor)
	closed  bool
	key     string
	chat    func(ChatRequest) Reply
	image   func(ImageRequest) ImageReply
	records []*Record
	blobs   map[string][]byte // images served by URL
	seq     int
	active  int // chat and image requests being answered
	peak    int // the most active at once
}

func (s *Server) enter() {
	s.update(func() {
		s.active++
		s.peak = max(s.peak, s.active)
	})
}

func (s *Server) leave() { s.update(func() { s.active-- }) }

// New starts a fake server on 127.0.0.1. Until SetChat/SetImage are called it answers
// chat with "Hello from the fake LLM." and images with a small PNG. Close it when done.
func New() *Server {
	s := &Server{
		stop:    make(chan struct{}),
		changes: watch.New(),
		key:     DefaultAPIKey,
		chat:    func(ChatRequest) Reply { return Text("Hello from the fake LLM.") },
		image:   func(ImageRequest) ImageReply { return ImageReply{} },
		blobs:   map[string][]byte{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.serveChat)
	mux.HandleFunc("/v1/images/generations", s.serveImage)
	mux.HandleFunc("/files/", s.serveFile)
	s.http = httptest.NewServer(mux)
	return s
}

// URL is the base URL, ending in /v1 (OPENAI_BASE_URL).
func (s *Server) URL() string { return s.http.URL + "/v1" }

// Close ends stalled and waiting responses and stops the server; it returns when every
// handler has returned.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stop)
	s.mu.Unlock()
	s.http.CloseClientConnections()
	s.http.Close()
}

// SetAPIKey sets the key accepted as "Authorization: Bearer <key>"; "" accepts any
// request, with or without a key.
func (s *Server) SetAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// SetChat sets the function deciding each chat completion answer. It runs on the
// request's goroutine, possibly concurrently.
func (s *Server) SetChat(f func(ChatRequest) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chat = f
}

// SetImage sets the function deciding each image generation answer.
func (s *Server) SetImage(f func(ImageRequest) ImageReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.image = f
}

// Record is one request and what was answered.
type Record struct {
	Time   time.Time
	Path   string
	Header http.Header
	Body   []byte
	Chat   *ChatRequest  // for chat completions with a decodable body
	Image  *ImageRequest // for image generations with a decodable body
	Status int           // HTTP status answered (0 if the connection was cut before headers)
	// Tokens are the content deltas written, each with the time it was written and flushed.
	Tokens []TokenWrite
	// Finished: the planned answer was written to its end (for a stream: [DONE], or the
	// planned final event of a failure mode).
	Finished bool
	// ClientGone: the client disconnected before the answer ended.
	ClientGone bool
	End        time.Time
}

// TokenWrite is one content delta and when it was written and flushed.
type TokenWrite struct {
	Text string
	Time time.Time
}

// Requests returns a copy of every request so far, in arrival order.
func (s *Server) Requests() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, 0, len(s.records))
	for _, r := range s.records {
		c := *r
		c.Tokens = slices.Clone(r.Tokens)
		out = append(out, c)
	}
	return out
}

// ChatRequests returns the decoded chat requests so far, in arrival order.
func (s *Server) ChatRequests() []ChatRequest {
	var out []ChatRequest
	for _, r := range s.Requests() {
		if r.Chat != nil {
			out = append(out, *r.Chat)
		}
	}
	return out
}

// Counts summarises the requests: chat and image requests, auth failures (401), streams
// whose client left early, and streams finished.
type Counts struct {
	Chat, Image, Unauthorized, ClientGone, Finished int
	// Active is how many chat/image requests are being answered now; Peak the most at once.
	Active, Peak int
}

// Counts returns the counters (cheap: nothing is copied).
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Counts{Active: s.active, Peak: s.peak}
	for _, r := range s.records {
		switch {
		case r.Status == http.StatusUnauthorized:
			c.Unauthorized++
		case strings.HasSuffix(r.Path, "/chat/completions"):
			c.Chat++
		case strings.HasSuffix(r.Path, "/images/generations"):
			c.Image++
		}
		if r.ClientGone {
			c.ClientGone++
		}
		if r.Finished {
			c.Finished++
		}
	}
	return c
}

// WaitFor calls cond after every change of the recorded state until it returns true or
// ctx ends. cond runs without the server's lock held.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	return s.changes.WaitFor(ctx, cond)
}

// update changes a record under the lock and wakes waiters.
func (s *Server) update(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	s.changes.Notify()
}

// begin reads the body, records the request and checks the key. It returns nil when the
// request was answered (401 or unreadable body).
func (s *Server) begin(w http.ResponseWriter, r *http.Request) *Record {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	rec := &Record{Time: time.Now(), Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	s.update(func() { s.records = append(s.records, rec) })
	if r.Method != http.MethodPost {
		s.respond(w, rec, http.StatusMethodNotAllowed, nil, errorBody("Method not allowed.", "invalid_request_error", "", ""))
		return nil
	}
	if got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); key != "" && got != key {
		msg := "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
		if got != "" {
			msg = "Incorrect API key provided: " + mask(got) + ". You can find your API key at https://platform.openai.com/account/api-keys."
		}
		s.respond(w, rec, http.StatusUnauthorized, nil, errorBody(msg, "invalid_request_error", "", "invalid_api_key"))
		return nil
	}
	if err != nil {
		s.respond(w, rec, http.StatusBadRequest, nil, errorBody("Could not read the request body.", "invalid_request_error", "", ""))
		return nil
	}
	return rec
}

// mask shows the start and end of a key, as OpenAI does.
func mask(key string) string {
	if len(key) <= 8 {
		return "***"
	}
	return key[:3] + "*****" + key[len(key)-4:]
}

// respond answers with status, the extra headers, and body, and records the end.
func (s *Server) respond(w http.ResponseWriter, rec *Record, status int, header http.Header, body string) {
	for k, v := range header {
		w.Header()[k] = v
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, err := io.WriteString(w, body)
	s.update(func() {
		rec.Status, rec.Finished, rec.ClientGone, rec.End = status, err == nil, err != nil, time.Now()
	})
}

// APIError is an OpenAI-shaped error: {"error":{"message","type","param","code"}}.
type APIError struct {
	Message string
	Type    string
	Param   string // "" is sent as null
	Code    string // "" is sent as null
}

// JSON renders the error body.
func (e APIError) JSON() string { return errorBody(e.Message, e.Type, e.Param, e.Code) }

func errorBody(message, typ, param, code string) string {
	nullable := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nullable(param), "code": nullable(code),
	}})
	return string(b)
}

// wait sleeps d unless the client leaves or the server closes, writing an SSE comment
// every keepAlive (if > 0). It reports whether the wait ran to its end.
func (s *Server) wait(ctx context.Context, w io.Writer, fl http.Flusher, d, keepAlive time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	var tick <-chan time.Time
	if keepAlive > 0 && fl != nil {
		k := time.NewTicker(keepAlive)
		defer k.Stop()
		tick = k.C
	}
	for {
		select {
		case <-t.C:
			return true
		case <-tick:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return false
			}
			fl.Flush()
		case <-ctx.Done():
			return false
		case <-s.stop:
			return false
		}
	}
}

func (s *Server) newID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("%s-fake%06d", prefix, s.seq)
}
