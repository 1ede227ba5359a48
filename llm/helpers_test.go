package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/llmbot/llmbot/internal/openaischema"
)

// testKey is the API key of every test client. Tests grep every error string for it.
const testKey = "sk-test-SECRET-0123456789abcdef"

// --- OpenAPI schema validation (test only) ---

// schemaPath and requireSchemas, for the skip message: see internal/openaischema.
const (
	schemaPath     = "../../shared/schemas/openai-openapi.json"
	requireSchemas = openaischema.Require
)

var (
	schemaOnce sync.Once
	schemaDoc  *openaischema.Doc // nil: the document is missing and not required
	schemaErr  error
)

// openAPISchema compiles components/schemas/<name> of OpenAI's OpenAPI document. It returns nil
// when the document is missing and not required.
func openAPISchema(tb testing.TB, name string) *jsonschema.Schema {
	tb.Helper()
	schemaOnce.Do(func() { schemaDoc, schemaErr = openaischema.Load() })
	if schemaErr != nil {
		tb.Fatalf("load OpenAPI schema: %v", schemaErr)
	}
	s, err := schemaDoc.Schema(name)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// validateJSON checks one JSON document against a named OpenAPI schema.
func validateJSON(tb testing.TB, name string, data []byte) error {
	tb.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	s := openAPISchema(tb, name)
	if s == nil {
		return nil // no document: nothing to check against
	}
	return s.Validate(v)
}

// skipWithoutSchema skips a test that only checks shapes against OpenAI's document when the
// document is not beside the checkout.
func skipWithoutSchema(t *testing.T) {
	t.Helper()
	if openAPISchema(t, "CreateChatCompletionRequest") == nil {
		t.Skipf("OpenAI's OpenAPI document is not at %s (CI has it there, and %s=1 makes this a failure): "+
			"put openapi.json from https://github.com/openai/openai-openapi there to run this check", schemaPath, requireSchemas)
	}
}

// --- fake OpenAI-compatible server ---

// recorded is one request the fake server received.
type recorded struct {
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// fakeServer is an httptest server that checks every request like the real API would
// (auth header, JSON body valid against the OpenAPI request schema) and records it.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

func newFakeServer(t *testing.T, h http.HandlerFunc) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read request body: %v", err)
			return
		}
		rec := recorded{Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw}
		if r.Method == http.MethodPost {
			if got, want := r.Header.Get("Authorization"), "Bearer "+testKey; got != want {
				t.Errorf("%s: Authorization = %q, want %q", r.URL.Path, got, want)
			}
			if err := json.Unmarshal(raw, &rec.Body); err != nil {
				t.Errorf("%s: request body is not JSON: %v", r.URL.Path, err)
			}
			schema := ""
			switch {
			case strings.HasSuffix(r.URL.Path, "/chat/completions"):
				schema = "CreateChatCompletionRequest"
			case strings.HasSuffix(r.URL.Path, "/images/generations"):
				schema = "CreateImageRequest"
			}
			if schema == "" {
				t.Errorf("unexpected path %s", r.URL.Path)
			} else if err := validateJSON(t, schema, raw); err != nil {
				t.Errorf("%s: request does not match %s: %v\n%s", r.URL.Path, schema, err, raw)
			}
		}
		f.mu.Lock()
		f.requests = append(f.requests, rec)
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(raw))
		h(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) got() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.requests...)
}

// waits records the backoff waits of a test client instead of sleeping.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

// newTestClient returns a client of base with the test key, no jitter, and waits recorded
// rather than slept. edit adjusts the config first.
func newTestClient(t *testing.T, base string, edit func(*Config)) (*Client, *waits) {
	t.Helper()
	cfg := Config{BaseURL: base + "/v1/", APIKey: testKey, ChatModel: "gpt-test", ImageModel: "gpt-image-test"}
	if edit != nil {
		edit(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	w := &waits{}
	c.sleep = w.sleep
	c.jitter = func() float64 { return 0 }
	return c, w
}

var hello = ChatRequest{Messages: []Message{{Role: RoleSystem, Content: "Be brief."}, {Role: RoleUser, Content: "Say hello"}}}

// streamResult is everything a stream delivered, for comparison in tables.
type streamResult struct {
	Content, Reasoning, Refusal, Finish string
	Usage                               *Usage
	Calls                               []ToolCall
	Err                                 *Error // without Err (the cause), compared field by field
}

// collect drains a stream, checking the iterator's contract: at most one error, and last.
func collect(t *testing.T, seq func(func(Chunk, error) bool)) streamResult {
	t.Helper()
	var r streamResult
	var content, reasoning, refusal strings.Builder
	for c, err := range seq {
		if r.Err != nil {
			t.Fatalf("stream yielded after its error: %+v, %v", c, err)
		}
		if err != nil {
			if !c.empty() {
				t.Errorf("error yielded with a non-empty chunk %+v", c)
			}
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			checkNoKey(t, e)
			cp := *e
			cp.Err = nil
			r.Err = &cp
			continue
		}
		content.WriteString(c.Content)
		reasoning.WriteString(c.Reasoning)
		refusal.WriteString(c.Refusal)
		if c.FinishReason != "" {
			r.Finish = c.FinishReason
		}
		if c.Usage != nil {
			r.Usage = c.Usage
		}
		if len(c.ToolCalls) > 0 {
			if r.Calls != nil {
				t.Errorf("tool calls delivered twice: %+v, then %+v", r.Calls, c.ToolCalls)
			}
			r.Calls = c.ToolCalls
		}
	}
	r.Content, r.Reasoning, r.Refusal = content.String(), reasoning.String(), refusal.String()
	return r
}

// checkNoKey fails when the API key appears anywhere in err's text (or its causes').
func checkNoKey(t *testing.T, err error) {
	t.Helper()
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.Contains(e.Error(), testKey) || strings.Contains(e.Error(), "SECRET") {
			t.Errorf("error text contains the API key: %q", e.Error())
		}
	}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// contentType serves a fixture by its extension.
func contentType(name string) string {
	switch filepath.Ext(name) {
	case ".sse":
		return "text/event-stream"
	case ".json":
		return "application/json"
	case ".html":
		return "text/html; charset=utf-8"
	}
	return "text/plain; charset=utf-8"
}
