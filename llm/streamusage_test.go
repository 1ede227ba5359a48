package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// usageStream is what OpenAI streams when the request asks stream_options.include_usage:
// the usage comes in one more chunk with "choices": [] before [DONE].
const usageStream = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hello\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n" +
	"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n" +
	"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":21,\"completion_tokens\":1,\"total_tokens\":22,\"prompt_tokens_details\":{\"cached_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0}}}\n\n" +
	"data: [DONE]\n\n"

// peek reads a request body and puts it back for the next handler.
func peek(r *http.Request) string {
	raw := must(r)
	r.Body = io.NopCloser(bytes.NewReader(raw))
	return string(raw)
}

// wantsUsage reports whether a recorded request asked for a usage chunk.
func wantsUsage(r recorded) bool {
	so, _ := r.Body["stream_options"].(map[string]any)
	return so["include_usage"] == true
}

// serveLikeOpenAI streams the usage chunk only when the request asks for it, as OpenAI
// does, and answers non-streamed requests whole.
func serveLikeOpenAI(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Stream        bool `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	json.Unmarshal(must(r), &body)
	switch {
	case body.Stream && body.StreamOptions != nil && body.StreamOptions.IncludeUsage:
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(usageStream))
	case body.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(okStream))
	default:
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(okCompletion))
	}
}

// TestStreamUsage: by default a stream asks for usage and the usage chunk (choices: [])
// reaches the caller in Chunk.Usage, on a chunk of its own; with NoStreamUsage it is not
// asked for, and OpenAI sends none.
func TestStreamUsage(t *testing.T) {
	for _, tc := range []struct {
		name        string
		noUsage     bool
		wantOptions any
		wantUsage   []*Usage // Chunk.Usage of each chunk, in order
	}{
		{"asked by default", false, map[string]any{"include_usage": true}, []*Usage{nil, nil, {21, 1, 22}}},
		{"NoStreamUsage", true, nil, []*Usage{nil, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, serveLikeOpenAI)
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.NoStreamUsage = tc.noUsage })
			var usages []*Usage
			var content strings.Builder
			for chunk, err := range c.Stream(t.Context(), hello) {
				if err != nil {
					t.Fatalf("after %q: %v", content.String(), err)
				}
				if chunk.Usage != nil && (chunk.Content != "" || chunk.FinishReason != "") {
					t.Errorf("usage on a choice chunk: %+v", chunk)
				}
				content.WriteString(chunk.Content)
				usages = append(usages, chunk.Usage)
			}
			if content.String() != "Hello" {
				t.Errorf("content %q", content.String())
			}
			if !reflect.DeepEqual(usages, tc.wantUsage) {
				t.Errorf("usage per chunk %s, want %s", showUsages(usages), showUsages(tc.wantUsage))
			}
			reqs := srv.got()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			if got := reqs[0].Body["stream_options"]; !reflect.DeepEqual(got, tc.wantOptions) {
				t.Errorf("stream_options %v, want %v", got, tc.wantOptions)
			}
		})
	}
}

func showUsages(us []*Usage) string {
	s := make([]string, len(us))
	for i, u := range us {
		s[i] = "nil"
		if u != nil {
			s[i] = fmt.Sprintf("%+v", *u)
		}
	}
	return "[" + strings.Join(s, " ") + "]"
}

// streamOptionsRejections are 400s (and one 422) of servers that do not know stream_options.
var streamOptionsRejections = []struct {
	name   string
	status int
	body   string
}{
	{"Azure older api-version", 400,
		`{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error","param":null,"code":null}}`},
	{"param stream_options, unknown_parameter", 400,
		`{"error":{"message":"Unknown parameter: 'stream_options'.","type":"invalid_request_error","param":"stream_options","code":"unknown_parameter"}}`},
	{"param stream_options, unsupported_parameter", 400,
		`{"error":{"message":"Unsupported parameter: 'stream_options' is not supported with this model.","type":"invalid_request_error","param":"stream_options","code":"unsupported_parameter"}}`},
	{"param stream_options, message not naming it", 400,
		`{"error":{"message":"Unsupported parameter for this deployment.","type":"invalid_request_error","param":"stream_options","code":"unsupported_parameter"}}`},
	{"param stream_options.include_usage, other words", 400,
		`{"error":{"message":"Extra inputs are not permitted","type":"invalid_request_error","param":"stream_options.include_usage","code":null}}`},
	{"vLLM-style int code", 400,
		`{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"BadRequestError","param":null,"code":400}}`},
	{"old vLLM flat error naming include_usage", 400,
		`{"object":"error","message":"include_usage is not supported","type":"BadRequestError","param":null,"code":400}`},
	{"LiteLLM string code", 400,
		`{"error":{"message":"litellm.BadRequestError: Unrecognized request argument supplied: STREAM_OPTIONS","type":null,"param":"None","code":"400"}}`},
	{"Gemini, an array of Google errors", 400, `[{
  "error": {
    "code": 400,
    "message": "Invalid JSON payload received. Unknown name \"stream_options\": Cannot find field.",
    "status": "INVALID_ARGUMENT",
    "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest",
      "fieldViolations": [{"description": "Invalid JSON payload received. Unknown name \"stream_options\": Cannot find field."}]}]
  }
}]`},
	{"FastAPI shim forbidding extra fields", 422,
		`{"detail":[{"type":"extra_forbidden","loc":["body","stream_options"],"msg":"Extra inputs are not permitted","input":{"include_usage":true}}]}`},
}

// rejectStreamOptions answers status/body to requests for model "legacy" that carry
// stream_options, and like OpenAI otherwise.
func rejectStreamOptions(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw := peek(r)
		if strings.Contains(raw, `"stream_options"`) && strings.Contains(raw, `"model":"legacy"`) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write([]byte(body))
			return
		}
		serveLikeOpenAI(w, r)
	}
}

// hookCalls records the models a Hooks callback was called with.
type hookCalls struct {
	mu     sync.Mutex
	models []string
}

func (h *hookCalls) add(model string) {
	h.mu.Lock()
	h.models = append(h.models, model)
	h.mu.Unlock()
}

func (h *hookCalls) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.models)
}

// TestStreamUsageFallback: a model whose server rejects stream_options is asked again
// without it, once, and from then on never asked; other models still are.
func TestStreamUsageFallback(t *testing.T) {
	for _, tc := range streamOptionsRejections {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, rejectStreamOptions(tc.status, tc.body))
			var dropped hookCalls
			c, waits := newTestClient(t, srv.URL, func(c *Config) {
				c.ChatModel = "legacy"
				c.Hooks.StreamUsageDropped = dropped.add
			})
			if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Hello" || r.Usage != nil {
				t.Fatalf("first stream: %s, want Hello without usage", show(r))
			}
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil {
						t.Errorf("later stream: %s", show(r))
					}
				})
			}
			wg.Wait()
			other := collect(t, c.Stream(t.Context(), ChatRequest{Model: "gpt-test", Messages: hello.Messages}))
			if other.Err != nil || other.Usage == nil || *other.Usage != (Usage{21, 1, 22}) {
				t.Errorf("other model: %s, want its usage", show(other))
			}
			var asked []bool
			for _, r := range srv.got() {
				asked = append(asked, wantsUsage(r))
			}
			if want := []bool{true, false, false, false, false, true}; !slices.Equal(asked, want) {
				t.Errorf("include_usage per request %v, want %v", asked, want)
			}
			if got := dropped.all(); !slices.Equal(got, []string{"legacy"}) {
				t.Errorf("StreamUsageDropped calls %v, want [legacy]", got)
			}
			if len(waits.all()) != 0 {
				t.Errorf("the fallback waited like a retry: %v", waits.all())
			}
		})
	}
}

// TestStreamUsageFallbackConcurrent: streams to one model that start together are all
// rejected, all fall back, and the hook hears of it once.
func TestStreamUsageFallbackConcurrent(t *testing.T) {
	const n = 4
	var rejected atomic.Int32
	all := make(chan struct{})
	reject := rejectStreamOptions(400, streamOptionsRejections[0].body)
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(peek(r), `"stream_options"`) {
			if rejected.Add(1) == n {
				close(all)
			}
			select { // answer only once every stream has been sent with stream_options
			case <-all:
			case <-time.After(5 * time.Second):
				t.Errorf("only %d of %d requests arrived together", rejected.Load(), n)
			}
		}
		reject(w, r)
	})
	var dropped hookCalls
	c, _ := newTestClient(t, srv.URL, func(c *Config) {
		c.ChatModel = "legacy"
		c.Hooks.StreamUsageDropped = dropped.add
	})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Hello" {
				t.Errorf("stream: %s", show(r))
			}
		})
	}
	wg.Wait()
	if got := len(srv.got()); got != 2*n {
		t.Errorf("%d requests, want %d", got, 2*n)
	}
	if got := dropped.all(); !slices.Equal(got, []string{"legacy"}) {
		t.Errorf("StreamUsageDropped calls %v, want [legacy]", got)
	}
}

// TestStreamUsageKeptOnOtherErrors: a failure that is not about stream_options is reported
// as it is, after one request, and the next stream still asks for usage.
func TestStreamUsageKeptOnOtherErrors(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		status  int
	}{
		{"openai_context_length_400.json", 400},
		{"openai_temperature_unsupported_400.json", 400}, // no temperature configured: nothing to drop
		{"openai_model_not_found_404.json", 404},
		{"groq_logprobs_400.json", 400},
		{"fastapi_detail_pydantic_422.json", 422},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			body := readFixture(t, tc.fixture)
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				w.Write(body)
			})
			var dropped hookCalls
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.Hooks.StreamUsageDropped = dropped.add })
			for range 2 {
				if r := collect(t, c.Stream(t.Context(), hello)); r.Err == nil || r.Err.Status != tc.status {
					t.Fatalf("got %s, want the %d", show(r), tc.status)
				}
			}
			var asked []bool
			for _, r := range srv.got() {
				asked = append(asked, wantsUsage(r))
			}
			if want := []bool{true, true}; !slices.Equal(asked, want) {
				t.Errorf("include_usage per request %v, want %v", asked, want)
			}
			if got := dropped.all(); len(got) != 0 {
				t.Errorf("StreamUsageDropped calls %v, want none", got)
			}
		})
	}
}

// TestStreamUsageAndTemperatureFallbacks: a server that rejects both keys, one at a time
// in either order, gets one request per rejected key, then one with neither; both
// fallbacks are remembered and each hook is called once.
func TestStreamUsageAndTemperatureFallbacks(t *testing.T) {
	temperature := `{"error":{"message":"Unsupported value: 'temperature' does not support 0.7 with this model. Only the default (1) value is supported.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}}`
	streamOptions := `{"error":{"message":"Unknown parameter: 'stream_options'.","type":"invalid_request_error","param":"stream_options","code":"unknown_parameter"}}`
	type sent struct{ temp, usage bool }
	for _, tc := range []struct {
		name  string
		order []string // the keys the server checks, in order, with the body of its 400
		want  []sent
	}{
		{"temperature checked first", []string{`"temperature"`, temperature, `"stream_options"`, streamOptions},
			[]sent{{true, true}, {false, true}, {false, false}, {false, false}}},
		{"stream_options checked first", []string{`"stream_options"`, streamOptions, `"temperature"`, temperature},
			[]sent{{true, true}, {true, false}, {false, false}, {false, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				raw := peek(r)
				for i := 0; i < len(tc.order); i += 2 {
					if strings.Contains(raw, tc.order[i]) {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(400)
						w.Write([]byte(tc.order[i+1]))
						return
					}
				}
				serveLikeOpenAI(w, r)
			})
			var tempDropped, usageDropped hookCalls
			c, _ := newTestClient(t, srv.URL, func(c *Config) {
				c.ChatModel = "reasoner"
				c.Temperature = ptr(0.7)
				c.Hooks.TemperatureDropped = tempDropped.add
				c.Hooks.StreamUsageDropped = usageDropped.add
			})
			for range 2 {
				if r := collect(t, c.Stream(t.Context(), hello)); r.Err != nil || r.Content != "Hello" {
					t.Fatalf("stream: %s", show(r))
				}
			}
			var got []sent
			for _, r := range srv.got() {
				got = append(got, sent{r.Body["temperature"] != nil, wantsUsage(r)})
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("requests (temperature, include_usage) %v, want %v", got, tc.want)
			}
			if got := tempDropped.all(); !slices.Equal(got, []string{"reasoner"}) {
				t.Errorf("TemperatureDropped calls %v, want [reasoner]", got)
			}
			if got := usageDropped.all(); !slices.Equal(got, []string{"reasoner"}) {
				t.Errorf("StreamUsageDropped calls %v, want [reasoner]", got)
			}
		})
	}
}

// TestCompleteNeverAsksStreamUsage: stream_options belongs to streamed requests only, even
// for a model not known to reject it.
func TestCompleteNeverAsksStreamUsage(t *testing.T) {
	srv := newFakeServer(t, serveLikeOpenAI)
	c, _ := newTestClient(t, srv.URL, nil)
	if comp, err := c.Complete(t.Context(), hello); err != nil || comp.Content != "Hello" {
		t.Fatalf("Complete = %+v, %v", comp, err)
	}
	if _, ok := srv.got()[0].Body["stream_options"]; ok {
		t.Errorf("non-streamed request has stream_options: %s", srv.got()[0].Raw)
	}
}

// TestStreamOptionsMatchSpec: the request with stream_options is a valid
// CreateChatCompletionRequest, and the schema does check the field (a wrong type fails).
func TestStreamOptionsMatchSpec(t *testing.T) {
	skipWithoutSchema(t)
	body, err := json.Marshal(chatBody{Model: "gpt-4o", Messages: hello.Messages, Temperature: ptr(0.0), Stream: true,
		StreamOptions: &streamOptions{IncludeUsage: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := validateJSON(t, "CreateChatCompletionRequest", body); err != nil {
		t.Errorf("%s: %v", body, err)
	}
	bad := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":"yes"}}`)
	if err := validateJSON(t, "CreateChatCompletionRequest", bad); err == nil {
		t.Errorf("the schema accepted include_usage as a string: it does not check stream_options")
	}
}
