package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// okStream is a short complete OpenAI stream.
const okStream = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: [DONE]\n\n"

// okCompletion is a complete non-streamed answer.
const okCompletion = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null},"logprobs":null,"finish_reason":"stop"}]}`

func serveOK(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(string(must(r)), `"stream":true`) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(okStream))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(okCompletion))
}

func must(r *http.Request) []byte {
	b := make([]byte, 0, 512)
	buf := make([]byte, 512)
	for {
		n, err := r.Body.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			return b
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestChatRequestShape(t *testing.T) {
	usage := map[string]any{"include_usage": true}
	for _, tc := range []struct {
		name        string
		base        string // appended to the server URL
		temp        *float64
		model       string // ChatRequest.Model
		noUsage     bool   // Config.NoStreamUsage
		wantModel   string
		wantKeys    [2][]string // of the streamed request, then of the non-streamed one
		wantTemp    any
		wantOptions any // stream_options of the streamed request (never in the other)
	}{
		{"no temperature", "/v1", nil, "", false, "gpt-test",
			[2][]string{{"messages", "model", "stream", "stream_options"}, {"messages", "model", "stream"}}, nil, usage},
		{"temperature 0 is sent", "/v1/", ptr(0.0), "", false, "gpt-test",
			[2][]string{{"messages", "model", "stream", "stream_options", "temperature"}, {"messages", "model", "stream", "temperature"}}, 0.0, usage},
		{"temperature 0.7", "/v1//", ptr(0.7), "", false, "gpt-test",
			[2][]string{{"messages", "model", "stream", "stream_options", "temperature"}, {"messages", "model", "stream", "temperature"}}, 0.7, usage},
		{"model override", "/v1", nil, "other-model", false, "other-model",
			[2][]string{{"messages", "model", "stream", "stream_options"}, {"messages", "model", "stream"}}, nil, usage},
		{"NoStreamUsage", "/v1", nil, "", true, "gpt-test",
			[2][]string{{"messages", "model", "stream"}, {"messages", "model", "stream"}}, nil, nil},
		{"NoStreamUsage with temperature", "/v1", ptr(0.2), "", true, "gpt-test",
			[2][]string{{"messages", "model", "stream", "temperature"}, {"messages", "model", "stream", "temperature"}}, 0.2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, serveOK) // checks every request against the OpenAPI schema
			c, err := New(Config{BaseURL: srv.URL + tc.base, APIKey: testKey, ChatModel: "gpt-test", Temperature: tc.temp,
				NoStreamUsage: tc.noUsage, Headers: http.Header{"Api-Key": {"azure-key"}, "X-Extra": {"a", "b"}}})
			if err != nil {
				t.Fatal(err)
			}
			if r := collect(t, c.Stream(t.Context(), ChatRequest{Model: tc.model, Messages: hello.Messages})); r.Err != nil || r.Content != "Hello" {
				t.Fatalf("Stream: %s", show(r))
			}
			if comp, err := c.Complete(t.Context(), ChatRequest{Model: tc.model, Messages: hello.Messages}); err != nil || comp.Content != "Hello" {
				t.Fatalf("Complete: %+v, %v", comp, err)
			}
			reqs := srv.got()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			if got := reqs[0].Body["stream_options"]; !reflect.DeepEqual(got, tc.wantOptions) {
				t.Errorf("stream_options %v, want %v", got, tc.wantOptions)
			}
			for i, req := range reqs {
				if req.Path != "/v1/chat/completions" {
					t.Errorf("path %q", req.Path)
				}
				keys := slices.Sorted(mapKeys(req.Body))
				if !slices.Equal(keys, tc.wantKeys[i]) {
					t.Errorf("request %d keys %v, want %v", i, keys, tc.wantKeys[i])
				}
				if got := req.Body["temperature"]; got != tc.wantTemp {
					t.Errorf("temperature %v, want %v", got, tc.wantTemp)
				}
				if got := req.Body["model"]; got != tc.wantModel {
					t.Errorf("model %v, want %v", got, tc.wantModel)
				}
				if got, want := req.Body["stream"], i == 0; got != want {
					t.Errorf("request %d stream %v, want %v", i, got, want)
				}
				wantMsgs := []any{map[string]any{"role": "system", "content": "Be brief."}, map[string]any{"role": "user", "content": "Say hello"}}
				if !reflect.DeepEqual(req.Body["messages"], wantMsgs) {
					t.Errorf("messages %v", req.Body["messages"])
				}
				if got := req.Header.Get("Api-Key"); got != "azure-key" {
					t.Errorf("Api-Key %q", got)
				}
				if got := req.Header.Values("X-Extra"); !slices.Equal(got, []string{"a", "b"}) {
					t.Errorf("X-Extra %q", got)
				}
			}
		})
	}
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestNewChecksConfig(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{BaseURL: "api.openai.com/v1"},
		{BaseURL: "ftp://host/v1"},
		{BaseURL: "https://host/v1", APIKey: "sk-abc\nInjected: 1"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) = nil error", cfg)
		} else if strings.Contains(err.Error(), "sk-abc") {
			t.Errorf("error contains the key: %v", err)
		}
	}
	c, err := New(Config{BaseURL: "https://host/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{BaseURL: "https://host/v1/", ConnectTimeout: 10 * time.Second, HeaderTimeout: 120 * time.Second,
		IdleTimeout: 90 * time.Second, ImageTimeout: 180 * time.Second, MaxRetries: 2, MaxRetryWait: 2 * time.Minute,
		MaxImageBytes: 25 << 20}
	if !reflect.DeepEqual(c.cfg, want) {
		t.Errorf("defaults\ngot  %+v\nwant %+v", c.cfg, want)
	}
	if got := c.endpoint("/chat/completions"); got != "https://host/v1/chat/completions" {
		t.Errorf("endpoint %q", got)
	}
	if c, _ := New(Config{BaseURL: "https://host/v1", MaxRetries: -1}); c.cfg.MaxRetries != 0 {
		t.Errorf("MaxRetries -1 became %d, want 0", c.cfg.MaxRetries)
	}
}

// reply is one scripted answer of the fake server.
type reply struct {
	status int
	header map[string]string
	body   string
}

func TestRetries(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	ok := reply{200, nil, okStream}
	rateLimit := `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	quota := `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	for _, tc := range []struct {
		name     string
		replies  []reply // the last one repeats
		requests int
		waits    []time.Duration
		kind     Kind // "" = success
	}{
		{"429 Retry-After seconds", []reply{{429, map[string]string{"Retry-After": "2"}, rateLimit}, ok}, 2, []time.Duration{2 * time.Second}, ""},
		{"429 retry-after-ms wins", []reply{{429, map[string]string{"Retry-After": "2", "Retry-After-Ms": "1500"}, rateLimit}, ok}, 2, []time.Duration{1500 * time.Millisecond}, ""},
		{"503 Retry-After HTTP date", []reply{{503, map[string]string{"Retry-After": "Sat, 21 Nov 2026 12:00:05 GMT"}, ""}, ok}, 2, []time.Duration{5 * time.Second}, ""},
		{"500 backoff then give up", []reply{{500, nil, "oops"}}, 3, []time.Duration{500 * time.Millisecond, time.Second}, KindServer},
		{"502 twice then success", []reply{{502, nil, ""}, {502, nil, ""}, ok}, 3, []time.Duration{500 * time.Millisecond, time.Second}, ""},
		{"408 retried", []reply{{408, nil, ""}, ok}, 2, []time.Duration{500 * time.Millisecond}, ""},
		{"409 retried", []reply{{409, nil, ""}, ok}, 2, []time.Duration{500 * time.Millisecond}, ""},
		{"insufficient_quota not retried", []reply{{429, map[string]string{"Retry-After": "1"}, quota}, ok}, 1, nil, KindQuota},
		// LiteLLM relays OpenAI's insufficient_quota as code "429" with the upstream text only in the message.
		{"insufficient_quota relayed by LiteLLM not retried", []reply{{429, nil, string(readFixture(t, "litellm_insufficient_quota_429.json"))}, ok}, 1, nil, KindQuota},
		// Gemini says "You exceeded your current quota" of its per-minute limits too (RESOURCE_EXHAUSTED).
		{"Gemini per-minute limit retried", []reply{{429, nil, string(readFixture(t, "gemini_quota_per_minute_429.json"))}, ok}, 2, []time.Duration{500 * time.Millisecond}, ""},
		// ... also when LiteLLM relays it inside its own message (BerriAI/litellm#11725).
		{"Gemini per-minute limit relayed by LiteLLM retried", []reply{{429, nil, string(readFixture(t, "litellm_gemini_per_minute_429.json"))}, ok}, 2, []time.Duration{500 * time.Millisecond}, ""},
		// Its daily limit (only the quota id says so) and a model the plan lacks ("limit: 0") are not retried.
		{"Gemini daily quota not retried", []reply{{429, nil, string(readFixture(t, "gemini_quota_per_day_429.json"))}, ok}, 1, nil, KindQuota},
		{"Gemini daily quota relayed by LiteLLM not retried", []reply{{429, nil, string(readFixture(t, "litellm_gemini_per_day_429.json"))}, ok}, 1, nil, KindQuota},
		{"Gemini model not in the plan not retried", []reply{{429, nil, string(readFixture(t, "gemini_model_not_in_plan_429.json"))}, ok}, 1, nil, KindQuota},
		{"x-should-retry false", []reply{{503, map[string]string{"X-Should-Retry": "false"}, ""}, ok}, 1, nil, KindServer},
		{"x-should-retry true on a 400", []reply{{400, map[string]string{"X-Should-Retry": "true"}, ""}, ok}, 2, []time.Duration{500 * time.Millisecond}, ""},
		{"Retry-After over MaxRetryWait", []reply{{429, map[string]string{"Retry-After": "300"}, rateLimit}, ok}, 1, nil, KindRateLimit},
		{"400 not retried", []reply{{400, nil, `{"error":"bad"}`}, ok}, 1, nil, KindBadRequest},
		{"401 not retried", []reply{{401, nil, ""}, ok}, 1, nil, KindAuth},
		{"error in a 200 stream is not retried", []reply{{200, nil, "data: {\"error\":{\"message\":\"boom\",\"code\":503}}\n\n"}, ok}, 1, nil, KindServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				rp := tc.replies[min(int(n.Add(1))-1, len(tc.replies)-1)]
				for k, v := range rp.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(rp.status)
				w.Write([]byte(rp.body))
			})
			var hooked []time.Duration
			c, waits := newTestClient(t, srv.URL, func(c *Config) {
				c.Hooks.Retry = func(op string, attempt int, wait time.Duration, err *Error) {
					if op != "chat" || attempt != len(hooked)+1 || err == nil {
						t.Errorf("Retry hook(%q, %d, %v, %v)", op, attempt, wait, err)
					}
					hooked = append(hooked, wait)
				}
			})
			c.now = func() time.Time { return now }
			// The request's own observer (WithRetries) sees the same retries as the hook.
			var observed []time.Duration
			ctx := WithRetries(t.Context(), func(attempt int, wait time.Duration, err *Error) {
				if attempt != len(observed)+1 || err == nil {
					t.Errorf("WithRetries(%d, %v, %v)", attempt, wait, err)
				}
				observed = append(observed, wait)
			})
			r := collect(t, c.Stream(ctx, hello))
			var kind Kind
			if r.Err != nil {
				kind = r.Err.Kind
			}
			if kind != tc.kind {
				t.Errorf("result %s, want kind %q", show(r), tc.kind)
			}
			if got := len(srv.got()); got != tc.requests {
				t.Errorf("%d requests, want %d", got, tc.requests)
			}
			if got := waits.all(); !slices.Equal(got, tc.waits) {
				t.Errorf("waits %v, want %v", got, tc.waits)
			}
			if !slices.Equal(hooked, tc.waits) {
				t.Errorf("Retry hook saw %v, want %v", hooked, tc.waits)
			}
			if !slices.Equal(observed, tc.waits) {
				t.Errorf("WithRetries saw %v, want %v", observed, tc.waits)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	c, _ := newTestClient(t, "http://127.0.0.1:1", nil)
	for _, tc := range []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{0, 0, 500 * time.Millisecond},
		{1, 0, time.Second},
		{3, 0, 4 * time.Second},
		{4, 0, 8 * time.Second},
		{10, 0, 8 * time.Second},
		{0, 0.5, 437500 * time.Microsecond},
		{4, 0.999, 6002 * time.Millisecond},
	} {
		c.jitter = func() float64 { return tc.jitter }
		if got := c.backoff(tc.attempt); got != tc.want {
			t.Errorf("backoff(%d, jitter %v) = %v, want %v", tc.attempt, tc.jitter, got, tc.want)
		}
	}
}

// TestRetryWaitIsReal: without the test seam the client really waits (briefly) and a
// cancelled context stops the wait.
func TestRetryWaitHonoursContext(t *testing.T) {
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(503)
	})
	c, _ := newTestClient(t, srv.URL, nil)
	c.sleep = sleepCtx
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := collect(t, c.Stream(ctx, hello))
	if r.Err == nil || r.Err.Kind != KindTimeout {
		t.Errorf("got %s, want a timeout (the caller's deadline)", show(r))
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v: the wait ignored the context", d)
	}
}

func TestConnectionErrors(t *testing.T) {
	t.Run("refused, retried then reported", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		c, waits := newTestClient(t, "http://"+addr, nil)
		r := collect(t, c.Stream(t.Context(), hello))
		if r.Err == nil || r.Err.Kind != KindConnection || r.Err.Status != 0 {
			t.Fatalf("got %s, want a connection error", show(r))
		}
		if got, want := waits.all(), []time.Duration{500 * time.Millisecond, time.Second}; !slices.Equal(got, want) {
			t.Errorf("waits %v, want %v", got, want)
		}
	})
	t.Run("closed before the answer, retried", func(t *testing.T) {
		var n atomic.Int32
		srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			serveOK(w, r)
		})
		c, waits := newTestClient(t, srv.URL, nil)
		if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Hello" {
			t.Fatalf("got %s", show(r))
		}
		if got := len(waits.all()); got != 1 {
			t.Errorf("%d retries, want 1", got)
		}
	})
	t.Run("dropped after the first chunk, not retried", func(t *testing.T) {
		srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"))
			http.NewResponseController(w).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		})
		c, waits := newTestClient(t, srv.URL, nil)
		r := collect(t, c.Stream(t.Context(), hello))
		if r.Content != "Hel" || r.Err == nil || r.Err.Kind != KindTruncated {
			t.Errorf("got %s, want Hel then truncation", show(r))
		}
		if len(srv.got()) != 1 || len(waits.all()) != 0 {
			t.Errorf("%d requests, %d waits: want 1 and 0", len(srv.got()), len(waits.all()))
		}
	})
	t.Run("reset after the first chunk, not retried", func(t *testing.T) {
		srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"))
			http.NewResponseController(w).Flush()
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					tc.SetLinger(0) // close with a reset (RST), not an orderly end (FIN)
				}
				conn.Close()
			}
		})
		c, waits := newTestClient(t, srv.URL, nil)
		r := collect(t, c.Stream(t.Context(), hello))
		if r.Content != "Hel" || r.Err == nil || r.Err.Kind != KindTruncated || r.Err.Status != 200 {
			t.Errorf("got %s, want Hel then truncation", show(r))
		}
		if len(srv.got()) != 1 || len(waits.all()) != 0 {
			t.Errorf("%d requests, %d waits: want 1 and 0", len(srv.got()), len(waits.all()))
		}
	})
}

func TestTemperatureFallback(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
	}{
		{"unsupported_value", `{"error":{"message":"Unsupported value: 'temperature' does not support 0.7 with this model. Only the default (1) value is supported.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}}`},
		{"unsupported_parameter", `{"error":{"message":"Unsupported parameter: 'temperature' is not supported with this model.","type":"invalid_request_error","param":null,"code":"unsupported_parameter"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				body := string(must(r))
				if strings.Contains(body, `"temperature"`) && strings.Contains(body, `"reasoner"`) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(400)
					w.Write([]byte(tc.body))
					return
				}
				serveOK(w, r)
			})
			var mu sync.Mutex
			var dropped []string
			c, _ := newTestClient(t, srv.URL, func(c *Config) {
				c.Temperature = ptr(0.7)
				c.ChatModel = "reasoner"
				c.Hooks.TemperatureDropped = func(model string) {
					mu.Lock()
					dropped = append(dropped, model)
					mu.Unlock()
				}
			})
			if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Hello" {
				t.Fatalf("first stream: %s", show(r))
			}
			// Remembered: concurrent calls to the same model send no temperature at all,
			// and another model still gets it.
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil {
						t.Errorf("later stream: %s", show(r))
					}
				})
			}
			wg.Wait()
			if _, err := c.Complete(t.Context(), ChatRequest{Model: "other", Messages: hello.Messages}); err != nil {
				t.Fatal(err)
			}
			var temps []any
			for _, r := range srv.got() {
				temps = append(temps, r.Body["temperature"])
			}
			want := []any{0.7, nil, nil, nil, nil, nil, 0.7}
			if !reflect.DeepEqual(temps, want) {
				t.Errorf("temperatures sent %v, want %v", temps, want)
			}
			if !slices.Equal(dropped, []string{"reasoner"}) {
				t.Errorf("TemperatureDropped calls %v, want [reasoner]", dropped)
			}
		})
	}
}

// TestTemperatureDroppedOncePerModel: concurrent first calls that all get the rejection
// retry without the temperature, and the hook hears about the model once.
func TestTemperatureDroppedOncePerModel(t *testing.T) {
	const callers = 4
	var rejected atomic.Int32
	allRejected := make(chan struct{})
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(string(must(r)), `"temperature"`) {
			serveOK(w, r)
			return
		}
		if rejected.Add(1) == callers {
			close(allRejected)
		}
		select { // answer once every caller has sent its first request
		case <-allRejected:
		case <-time.After(5 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		w.Write(readFixture(t, "openai_temperature_unsupported_400.json"))
	})
	var mu sync.Mutex
	var dropped []string
	c, _ := newTestClient(t, srv.URL, func(c *Config) {
		c.Temperature = ptr(0.7)
		c.Hooks.TemperatureDropped = func(model string) {
			mu.Lock()
			dropped = append(dropped, model)
			mu.Unlock()
		}
	})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Hello" {
				t.Errorf("stream: %s", show(r))
			}
		})
	}
	wg.Wait()
	if !slices.Equal(dropped, []string{"gpt-test"}) {
		t.Errorf("TemperatureDropped calls %v, want [gpt-test]", dropped)
	}
}

// sseServer writes events with flushes and reports when it sees the client disconnect.
type sseServer struct {
	*fakeServer
	gone chan struct{} // closed when a handler saw r.Context().Done()
}

func newSSEServer(t *testing.T, script func(w http.ResponseWriter, r *http.Request, send func(string) bool)) *sseServer {
	s := &sseServer{gone: make(chan struct{})}
	var once sync.Once
	s.fakeServer = newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		send := func(ev string) bool {
			if _, err := w.Write([]byte(ev)); err != nil {
				return false
			}
			return rc.Flush() == nil
		}
		script(w, r, send)
		select {
		case <-r.Context().Done():
			once.Do(func() { close(s.gone) })
		case <-time.After(5 * time.Second):
		}
	})
	return s
}

// waitGone fails unless the server saw the client go away.
func (s *sseServer) waitGone(t *testing.T) {
	t.Helper()
	select {
	case <-s.gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the client disconnect")
	}
}

const chunkHel = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n"
const chunkLo = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"

func TestIdleTimeout(t *testing.T) {
	t.Run("keep-alive comments longer than the idle timeout", func(t *testing.T) {
		srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
			send(chunkHel)
			for range 12 { // 12 × 25 ms = 300 ms of comments, twice the idle timeout
				time.Sleep(25 * time.Millisecond)
				send(": OPENROUTER PROCESSING\n\n")
			}
			send(chunkLo)
		})
		c, _ := newTestClient(t, srv.URL, func(c *Config) { c.IdleTimeout = 150 * time.Millisecond })
		if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Hello" || r.Finish != "stop" {
			t.Errorf("got %s, want Hello", show(r))
		}
	})
	t.Run("silence", func(t *testing.T) {
		srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
			send(chunkHel) // then nothing until the client leaves
		})
		c, _ := newTestClient(t, srv.URL, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
		r := collect(t, c.Stream(t.Context(), hello))
		if r.Content != "Hel" || r.Err == nil || r.Err.Kind != KindTimeout {
			t.Errorf("got %s, want Hel then a timeout", show(r))
		}
		srv.waitGone(t)
		if n := len(srv.got()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("a slow consumer is not idleness", func(t *testing.T) {
		srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
			send(chunkHel)
			time.Sleep(20 * time.Millisecond) // the rest arrives while the caller is busy
			send(chunkLo)
		})
		c, _ := newTestClient(t, srv.URL, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond })
		var got strings.Builder
		for chunk, err := range c.Stream(t.Context(), hello) {
			if err != nil {
				t.Fatalf("after %q: %v", got.String(), err)
			}
			got.WriteString(chunk.Content)
			time.Sleep(300 * time.Millisecond) // the caller is busy (a Slack edit)
		}
		if got.String() != "Hello" {
			t.Errorf("got %q", got.String())
		}
	})
}

// TestStreamEndsAfterTheFinishReason: once the finish reason arrived the answer is complete,
// and what the server does next is no failure of it: a proxy or load balancer that resets the
// connection instead of ending the body, or a server that neither sends [DONE] nor closes (the
// wait then ends after finishIdle, not the whole IdleTimeout). The user must not get a "cut
// off" or "stalled" note under a complete answer. The caller's own cancellation still counts.
func TestStreamEndsAfterTheFinishReason(t *testing.T) {
	const finished = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
	// resetAfter is a server that sends events, then resets the connection.
	resetAfter := func(t *testing.T, events string) *fakeServer {
		return newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte(events))
			rc := http.NewResponseController(w)
			rc.Flush()
			time.Sleep(20 * time.Millisecond)
			conn, _, err := rc.Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				tc.SetLinger(0) // Close sends a reset
			}
			conn.Close()
		})
	}
	t.Run("connection reset", func(t *testing.T) {
		srv := resetAfter(t, finished)
		c, _ := newTestClient(t, srv.URL, nil)
		if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Hello" || r.Finish != "stop" {
			t.Errorf("Stream: got %s, want Hello and no error", show(r))
		}
		comp, err := c.Complete(t.Context(), hello) // the server streams although not asked to
		if err != nil || comp.Content != "Hello" || comp.FinishReason != "stop" {
			t.Errorf("Complete: got %+v, %v; want Hello and no error", comp, err)
		}
	})
	// Some gateways put a finish reason on every chunk (one-api and LiteLLM in front of Gemini,
	// Open WebUI on reasoning chunks): one on a chunk with text is not the end, and a pause after
	// it is not taken for the end of the answer.
	t.Run("a finish reason on a chunk with text", func(t *testing.T) {
		srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
			send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me think.\"},\"finish_reason\":\"stop\"}]}\n\n")
			time.Sleep(300 * time.Millisecond) // longer than finishIdle below
			send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" The answer is 42.\"},\"finish_reason\":\"stop\"}]}\n\n")
			send("data: [DONE]\n\n")
		})
		c, _ := newTestClient(t, srv.URL, func(c *Config) { c.IdleTimeout = time.Minute })
		c.finishIdle = 100 * time.Millisecond
		if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Let me think. The answer is 42." {
			t.Errorf("got %s, want the whole answer", show(r))
		}
	})
	// vLLM and Gemini put the last text on the chunk with the finish reason; the usage chunk
	// (include_usage, "choices": []) that follows is sent only at the end.
	const vllmEnd = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\n"
	for _, tc := range []struct{ name, events string }{
		{"silence without [DONE]", finished},
		{"usage after a finish on a chunk with text, then silence", vllmEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
				send(tc.events) // then nothing until the client leaves
			})
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.IdleTimeout = time.Minute })
			c.finishIdle = 100 * time.Millisecond
			start := time.Now()
			if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Hello" || r.Finish != "stop" {
				t.Errorf("got %s, want Hello and no error", show(r))
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the stream ended after %v, want about finishIdle (100ms)", d)
			}
			srv.waitGone(t)
		})
	}
	// A gateway that marks every chunk may send usage after each: once text has followed a finish
	// reason, a usage chunk is not the end either.
	const usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"total_tokens\":8}}\n\n"
	const marked = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me\"},\"finish_reason\":\"stop\"}]}\n\n" + usage +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" think.\"},\"finish_reason\":\"stop\"}]}\n\n" + usage
	for _, tc := range []struct{ name, events string }{
		{"a finish on a chunk with text, then a reset", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me think.\"},\"finish_reason\":\"stop\"}]}\n\n"},
		{"every chunk marked and followed by usage, then a reset", marked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := resetAfter(t, tc.events)
			c, _ := newTestClient(t, srv.URL, nil)
			r := collect(t, c.Stream(t.Context(), hello))
			if r.Err == nil || r.Err.Kind != KindTruncated || !strings.HasPrefix(r.Err.Message, "the stream broke off before [DONE]: ") {
				t.Errorf("got %s, want cut off before [DONE] (a finish reason with text may not be the end)", show(r))
			}
		})
	}
	t.Run("every chunk marked and followed by usage, then a pause", func(t *testing.T) {
		srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
			send(marked)
			time.Sleep(300 * time.Millisecond) // longer than finishIdle below
			send("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" The answer is 42.\"},\"finish_reason\":\"stop\"}]}\n\n" + usage)
			send("data: [DONE]\n\n")
		})
		c, _ := newTestClient(t, srv.URL, func(c *Config) { c.IdleTimeout = time.Minute })
		c.finishIdle = 100 * time.Millisecond
		if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Let me think. The answer is 42." {
			t.Errorf("got %s, want the whole answer", show(r))
		}
	})
	t.Run("the caller cancels", func(t *testing.T) {
		srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
			send(finished)
		})
		c, _ := newTestClient(t, srv.URL, nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var last error
		for chunk, err := range c.Stream(ctx, hello) {
			if err != nil {
				last = err
				break
			}
			if chunk.FinishReason != "" {
				cancel()
			}
		}
		if KindOf(last) != KindCanceled {
			t.Errorf("error %v, want canceled", last)
		}
	})
}

// TestNoTotalTimeout: a stream that keeps flowing is never cut, however long it lasts
// compared with the header and idle timeouts.
func TestNoTotalTimeout(t *testing.T) {
	srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
		for i := range 10 { // 10 × 60 ms: three times the header and the idle timeout
			send(fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%d\"}}]}\n\n", i))
			time.Sleep(60 * time.Millisecond)
		}
		send("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	openAPISchema(t, "CreateChatCompletionRequest") // compiled before the clock matters
	c, _ := newTestClient(t, srv.URL, func(c *Config) {
		c.HeaderTimeout = 200 * time.Millisecond
		c.IdleTimeout = 200 * time.Millisecond
	})
	if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "0123456789" || r.Finish != "stop" {
		t.Errorf("got %s, want the whole answer", show(r))
	}
}

// TestConnectTimeout: a server that accepts the connection but never completes the TLS
// handshake is given up on after ConnectTimeout.
func TestConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: the kernel completes TCP, nobody speaks TLS
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, _ := newTestClient(t, "https://"+ln.Addr().String(), func(c *Config) { c.ConnectTimeout = 100 * time.Millisecond })
	start := time.Now()
	r := collect(t, c.Stream(t.Context(), hello))
	if r.Err == nil || r.Err.Kind != KindTimeout || !strings.Contains(r.Err.Message, "TLS handshake timeout") {
		t.Errorf("got %s, want a TLS handshake timeout", show(r))
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestHeaderTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		select { // no headers until the client gives up
		case <-r.Context().Done():
		case <-release:
		case <-time.After(5 * time.Second):
		}
	})
	c, waits := newTestClient(t, srv.URL, func(c *Config) { c.HeaderTimeout = 100 * time.Millisecond })
	r := collect(t, c.Stream(t.Context(), hello))
	if r.Err == nil || r.Err.Kind != KindTimeout {
		t.Fatalf("got %s, want a timeout", show(r))
	}
	if !strings.Contains(r.Err.Message, "timeout awaiting response headers") {
		t.Errorf("message %q", r.Err.Message)
	}
	if len(waits.all()) != 0 {
		t.Errorf("a timeout was retried")
	}
}

func TestCancelMidStream(t *testing.T) {
	srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
		send(chunkHel)
	})
	c, _ := newTestClient(t, srv.URL, nil)
	stop := errors.New("stopped by the user")
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	var got []string
	var last error
	for chunk, err := range c.Stream(ctx, hello) {
		if err != nil {
			last = err
			break
		}
		got = append(got, chunk.Content)
		cancel(stop)
	}
	if !slices.Equal(got, []string{"Hel"}) {
		t.Errorf("chunks %q", got)
	}
	if KindOf(last) != KindCanceled || !errors.Is(last, stop) {
		t.Errorf("error %v, want canceled with the caller's cause", last)
	}
	srv.waitGone(t)
}

func TestBreakMidStream(t *testing.T) {
	srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
		send(chunkHel)
		for range 100 { // would go on for 5 s
			time.Sleep(50 * time.Millisecond)
			if !send(": ping\n\n") {
				return
			}
		}
	})
	c, _ := newTestClient(t, srv.URL, nil)
	for chunk, err := range c.Stream(t.Context(), hello) {
		if err != nil || chunk.Content != "Hel" {
			t.Fatalf("%+v, %v", chunk, err)
		}
		break
	}
	srv.waitGone(t)
}

// A body whose end (HTTP/1.1's last chunk) comes a moment after [DONE] is read to its end, so the
// connection serves the next request; a body that does not end soon after [DONE] costs its
// connection, not the caller's time.
func TestStreamEndKeepsTheConnection(t *testing.T) {
	const done = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"
	for _, tc := range []struct {
		name  string
		after time.Duration // from [DONE] to the body's end
		ping  time.Duration // meanwhile, a ": ping" comment this often (0: none)
		dials int           // for two streams
	}{
		{"end in a packet of its own", 30 * time.Millisecond, 0, 1},
		{"no end after [DONE]", 2 * time.Second, 0, 2},
		{"pings after [DONE]", 2 * time.Second, 50 * time.Millisecond, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				rc := http.NewResponseController(w)
				for _, ev := range []string{chunkHel, done} {
					w.Write([]byte(ev))
					rc.Flush()
				}
				end := time.After(tc.after)
				ping := time.Tick(tc.ping) // nil, which never fires, for 0
				for {
					select {
					case <-ping:
						w.Write([]byte(": ping\n\n"))
						rc.Flush()
					case <-end:
						return
					case <-r.Context().Done():
						return
					}
				}
			})
			var dials atomic.Int32
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}}
			defer tr.CloseIdleConnections()
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.HTTPClient = &http.Client{Transport: tr} })
			for range 2 {
				var finished time.Time // when the finish reason reached the caller
				content := ""
				for chunk, err := range c.Stream(t.Context(), hello) {
					if err != nil {
						t.Fatal(err)
					}
					content += chunk.Content
					if chunk.FinishReason != "" {
						finished = time.Now()
					}
				}
				if content != "Hel" || finished.IsZero() {
					t.Fatalf("read %q, finish seen: %v", content, !finished.IsZero())
				}
				// The caller waits at most endGrace for the body's end (plus scheduling on a loaded machine).
				if d := time.Since(finished); d > endGrace+500*time.Millisecond {
					t.Errorf("the stream ended %v after its finish reason, want at most about %v", d, endGrace)
				}
			}
			if n := dials.Load(); int(n) != tc.dials {
				t.Errorf("%d connections dialled for two streams, want %d", n, tc.dials)
			}
		})
	}
}

func TestLongLine(t *testing.T) {
	big := strings.Repeat("x", 3<<20) // a 3 MiB delta: lines over 1 MiB must pass
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", big)
	})
	c, _ := newTestClient(t, srv.URL, nil)
	r := collect(t, c.Stream(t.Context(), hello))
	if r.Err != nil || r.Content != big {
		t.Errorf("got %d bytes, err %v", len(r.Content), r.Err)
	}
}

func TestChatNeedsModelAndMessages(t *testing.T) {
	c, _ := newTestClient(t, "http://127.0.0.1:1", func(c *Config) { c.ChatModel = "" })
	if r := collect(t, c.Stream(t.Context(), hello)); r.Err == nil || r.Err.Kind != KindBadRequest {
		t.Errorf("no model: %s", show(r))
	}
	c, _ = newTestClient(t, "http://127.0.0.1:1", nil)
	if _, err := c.Complete(t.Context(), ChatRequest{}); KindOf(err) != KindBadRequest {
		t.Errorf("no messages: %v", err)
	}
}

// TestAzureClassicBaseURL: a base URL with a query (Azure's deployments path with
// api-version) keeps the query, and the endpoint path goes before it.
func TestAzureClassicBaseURL(t *testing.T) {
	var got string
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.RequestURI()
		serveOK(w, r)
	})
	c, err := New(Config{BaseURL: srv.URL + "/openai/deployments/gpt4o/?api-version=2024-10-21", APIKey: testKey, ChatModel: "gpt4o"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Complete(t.Context(), hello); err != nil {
		t.Fatal(err)
	}
	if want := "/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21"; got != want {
		t.Errorf("request URI %q, want %q", got, want)
	}
}

// TestStalledErrorBody: headers of an error arrive, then the body never ends: the idle
// timeout bounds the wait and the status is kept.
func TestStalledErrorBody(t *testing.T) {
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(502)
		w.Write([]byte("upstream"))
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	c, _ := newTestClient(t, srv.URL, func(c *Config) { c.IdleTimeout = 100 * time.Millisecond; c.MaxRetries = -1 })
	start := time.Now()
	_, err := c.Complete(t.Context(), hello)
	e, ok := errors.AsType[*Error](err)
	if !ok || e.Status != 502 || e.Kind != KindServer {
		t.Errorf("got %v, want a 502 server error", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestStrictChatTemplates: Mistral's and Gemma's chat templates (on vLLM, llama.cpp) refuse a
// system message or two user turns in a row, which a thread with several people gives. The request
// is sent again with alternating turns, once, and from then on for that model straight away.
func TestStrictChatTemplates(t *testing.T) {
	thread := []Message{
		{Role: RoleSystem, Content: "You are Ada."},
		{Role: RoleUser, Content: "Alice: the deploy failed"},
		{Role: RoleUser, Content: "Bob: same here"},
		{Role: RoleAssistant, Content: "Which service?"},
		{Role: RoleUser, Content: "Alice: api-7"},
	}
	want := []Message{
		{Role: RoleUser, Content: "You are Ada.\n\nAlice: the deploy failed\n\nBob: same here"},
		{Role: RoleAssistant, Content: "Which service?"},
		{Role: RoleUser, Content: "Alice: api-7"},
	}
	for _, tc := range []struct{ name, status, body string }{
		{"vLLM, Mistral", "400", `{"object":"error","message":"After the optional system message, conversation roles must alternate user/assistant/user/assistant/...","type":"BadRequestError","param":null,"code":400}`},
		{"llama.cpp template error", "500", `{"error":{"code":500,"message":"Conversation roles must alternate user/assistant/user/assistant/...","type":"server_error"}}`},
		{"Gemma", "400", `{"object":"error","message":"System role not supported","type":"BadRequestError","code":400}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got [][]Message
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				var body struct{ Messages []Message }
				json.NewDecoder(r.Body).Decode(&body)
				mu.Lock()
				got = append(got, body.Messages)
				mu.Unlock()
				if body.Messages[0].Role == RoleSystem || body.Messages[1].Role == body.Messages[2].Role {
					w.Header().Set("Content-Type", "application/json")
					status, _ := strconv.Atoi(tc.status)
					w.WriteHeader(status)
					w.Write([]byte(tc.body))
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"api-7 is down\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
			})
			var hooked []string
			c, _ := newTestClient(t, srv.URL, func(c *Config) { // retries on: a template's 500 is not retried as is
				c.Hooks.AlternatingTurns = func(model string) { hooked = append(hooked, model) }
			})
			for range 2 {
				if r := collect(t, c.Stream(t.Context(), ChatRequest{Messages: thread})); r.Err != nil || r.Content != "api-7 is down" {
					t.Fatalf("Stream: %s, want the answer", show(r))
				}
			}
			if len(got) != 3 || !reflect.DeepEqual(got[1], want) || !reflect.DeepEqual(got[2], want) {
				t.Errorf("requests: %v\nwant the thread, then twice %v", got, want)
			}
			if len(hooked) != 1 {
				t.Errorf("AlternatingTurns called %d times, want once", len(hooked))
			}
		})
	}
}
