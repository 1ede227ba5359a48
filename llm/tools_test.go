package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// sseOf writes chunk payloads (the JSON after "data: ") as an event stream ending with [DONE].
func sseOf(payloads ...string) string {
	var b strings.Builder
	for _, p := range payloads {
		b.WriteString("data: " + p + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// delta is a chunk whose first choice has the delta d and finish reason f (null when "").
func delta(d, f string) string {
	fr := "null"
	if f != "" {
		fr = `"` + f + `"`
	}
	return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + d +
		`,"logprobs":null,"finish_reason":` + fr + `}]}`
}

var weather = ChatRequest{
	Messages: []Message{{Role: RoleUser, Content: "Weather in Paris and Oslo?"}},
	Tools: []Tool{{Name: "weather", Description: "Current weather",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
}

// TestToolCallStreams: each wire variant of a tool call stream (tools.go) gives the same calls.
func TestToolCallStreams(t *testing.T) {
	paris := ToolCall{ID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`}
	oslo := ToolCall{ID: "call_2", Name: "weather", Arguments: `{"city":"Oslo"}`}
	for _, tc := range []struct {
		name string
		body string
		want streamResult
	}{
		{"openai one call split", sseOf(
			delta(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Pa"}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":"ris\"}"}}]}`, ""),
			delta(`{}`, "tool_calls"),
		), streamResult{Finish: "tool_calls", Calls: []ToolCall{paris}}},
		{"openai parallel interleaved", sseOf(
			delta(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":""}}]}`, ""),
			delta(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"weather","arguments":"{\"city\":"}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":\"Paris\"}"}}]}`, ""),
			delta(`{"tool_calls":[{"index":1,"function":{"arguments":"\"Oslo\"}"}}]}`, ""),
			delta(`{}`, "tool_calls"),
		), streamResult{Finish: "tool_calls", Calls: []ToolCall{paris, oslo}}},
		{"text then a call", sseOf(
			delta(`{"role":"assistant","content":"Let me look."}`, ""),
			delta(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]}`, ""),
			delta(`{}`, "tool_calls"),
		), streamResult{Content: "Let me look.", Finish: "tool_calls", Calls: []ToolCall{paris}}},
		{"ollama whole calls in one chunk, finish stop", sseOf(
			delta(`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","index":0,"type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","index":1,"type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]}`, ""),
			delta(`{"role":"assistant","content":""}`, "stop"),
		), streamResult{Finish: "stop", Calls: []ToolCall{paris, oslo}}},
		{"no index, distinct ids", sseOf(
			delta(`{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]}`, "tool_calls"),
		), streamResult{Finish: "tool_calls", Calls: []ToolCall{paris, oslo}}},
		{"every call at index 0 with its own id", sseOf(
			delta(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]}`, ""),
			delta(`{"tool_calls":[{"index":0,"id":"call_2","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]}`, ""),
			delta(`{}`, "tool_calls"),
		), streamResult{Finish: "tool_calls", Calls: []ToolCall{paris, oslo}}},
		{"arguments as an object", sseOf(
			delta(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"weather","arguments":{"city":"Paris"}}}]}`, "tool_calls"),
		), streamResult{Finish: "tool_calls", Calls: []ToolCall{paris}}},
		{"no id given", sseOf(
			delta(`{"tool_calls":[{"index":0,"function":{"name":"weather","arguments":"{}"}}]}`, "tool_calls"),
		), streamResult{Finish: "tool_calls", Calls: []ToolCall{{ID: "call_a", Name: "weather", Arguments: "{}"}}}},
		{"null and empty tool_calls on text chunks", sseOf(
			delta(`{"content":"Hi","tool_calls":null}`, ""),
			delta(`{"content":"!","tool_calls":[]}`, ""),
			delta(`{}`, "stop"),
		), streamResult{Content: "Hi!", Finish: "stop"}},
		{"broken off mid-call: no calls", strings.TrimSuffix(sseOf(
			delta(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"weather","arguments":"{\"ci"}}]}`, ""),
		), "data: [DONE]\n\n"), streamResult{Err: &Error{Kind: KindTruncated, Status: 200, Message: truncatedMsg}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte(tc.body))
			})
			c, _ := newTestClient(t, srv.URL, nil)
			got := collect(t, c.Stream(t.Context(), weather))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %s\nwant %s", show(got), show(tc.want))
			}
			// One byte per read: the assembly does not depend on how the body arrives.
			dec := newStreamDecoder(iotest.OneByteReader(strings.NewReader(tc.body)), http.Header{}, nil)
			var calls []ToolCall
			for {
				_, err := dec.next()
				if err != nil {
					break
				}
			}
			calls = dec.takeCalls()
			if tc.want.Err == nil && !reflect.DeepEqual(calls, tc.want.Calls) {
				t.Errorf("byte by byte: calls %+v, want %+v", calls, tc.want.Calls)
			}
		})
	}
}

// TestToolRequestShape: tools and a round of tool results are sent in OpenAI's shape (the fake
// server validates every request against CreateChatCompletionRequest).
func TestToolRequestShape(t *testing.T) {
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(sseOf(delta(`{"content":"Sunny."}`, "stop"))))
	})
	c, _ := newTestClient(t, srv.URL, nil)
	req := weather
	call := ToolCall{ID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`}
	req.Messages = append(req.Messages,
		Message{Role: RoleAssistant, ToolCalls: []ToolCall{call}},
		Message{Role: RoleTool, ToolCallID: "call_1", Content: "sunny"})
	req.Tools = append(req.Tools, Tool{Name: "ping"}) // no parameters: an empty object schema
	if got := collect(t, c.Stream(t.Context(), req)); got.Content != "Sunny." || got.Err != nil {
		t.Fatalf("got %s", show(got))
	}
	body := srv.got()[0].Raw
	for _, want := range []string{
		`"tools":[{"type":"function","function":{"name":"weather","description":"Current weather","parameters":{"type":"object"`,
		`{"type":"function","function":{"name":"ping","parameters":{"type":"object","properties":{}}}}`,
		`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]}`,
		`{"role":"tool","content":"sunny","tool_call_id":"call_1"}`,
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("request lacks %s\n%s", want, body)
		}
	}
	if err := validateJSON(t, "CreateChatCompletionRequest", bytes.Replace(body, []byte(`"type":"function"`), []byte(`"type":"funktion"`), 1)); err == nil && openAPISchema(t, "CreateChatCompletionRequest") != nil {
		t.Error("the schema accepts a wrong tool type: it checks nothing")
	}
}

// TestCompleteToolCalls: a whole completion's message.tool_calls come back as calls.
func TestCompleteToolCalls(t *testing.T) {
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}]}`))
	})
	c, _ := newTestClient(t, srv.URL, nil)
	for _, name := range []string{"Complete", "Stream"} {
		var got []ToolCall
		var finish string
		if name == "Complete" {
			comp, err := c.Complete(t.Context(), weather)
			if err != nil {
				t.Fatal(err)
			}
			got, finish = comp.ToolCalls, comp.FinishReason
		} else { // a server that answers a stream with JSON
			r := collect(t, c.Stream(t.Context(), weather))
			got, finish = r.Calls, r.Finish
		}
		if want := []ToolCall{{ID: "call_1", Name: "weather", Arguments: "{}"}}; !reflect.DeepEqual(got, want) || finish != "tool_calls" {
			t.Errorf("%s: calls %+v, finish %q; want %+v, tool_calls", name, got, finish, want)
		}
	}
}

// TestToolsRefused: a server that refuses tools (the shapes of openai-wire.md's servers) is asked
// again without them, and from then on for that model; the hook hears it once.
func TestToolsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
	}{
		{"openai param", 400, `{"error":{"message":"Unrecognized request argument supplied: tools","type":"invalid_request_error","param":"tools","code":null}}`},
		{"vllm without auto tool choice", 400, `{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`},
		{"ollama model without tools", 400, `{"error":{"message":"registry.ollama.ai/library/gemma:2b does not support tools","type":"api_error","param":null,"code":null}}`},
		{"llama.cpp without --jinja", 500, `{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`},
		{"fastapi shim", 422, `{"detail":[{"type":"extra_forbidden","loc":["body","tools"],"msg":"Extra inputs are not permitted"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				if strings.Contains(string(must(r)), `"tools"`) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(tc.status)
					w.Write([]byte(tc.body))
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write([]byte(sseOf(delta(`{"content":"No tools here."}`, "stop"))))
			})
			var dropped hookCalls
			c, waits := newTestClient(t, srv.URL, func(cfg *Config) { cfg.Hooks.ToolsDropped = dropped.add })
			var told []int // the requests told that they went without tools
			for i := range 2 {
				req := weather
				req.ToolsDropped = func() { told = append(told, i) }
				if got := collect(t, c.Stream(t.Context(), req)); got.Content != "No tools here." {
					t.Fatalf("call %d: %s", i, show(got))
				}
			}
			if !reflect.DeepEqual(told, []int{0}) {
				t.Errorf("requests told of the dropped tools: %v; want the first only (the one that learned it)", told)
			}
			if got, want := n.Load(), int32(3); got != want {
				t.Errorf("%d requests, want %d (refused, again without tools, then without at once)", got, want)
			}
			if got := dropped.all(); !reflect.DeepEqual(got, []string{"gpt-test"}) {
				t.Errorf("ToolsDropped calls %v, want once for gpt-test", got)
			}
			if w := waits.all(); len(w) != 0 {
				t.Errorf("waited %v: a refusal of tools is not retried", w)
			}
		})
	}
}

// TestToolsKeptOnOtherErrors: a 400 that is not about tools fails as it is.
func TestToolsKeptOnOtherErrors(t *testing.T) {
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		w.Write([]byte(`{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`))
	})
	c, _ := newTestClient(t, srv.URL, nil)
	if got := collect(t, c.Stream(t.Context(), weather)); got.Err == nil || got.Err.Kind != KindBadRequest {
		t.Errorf("got %s, want a bad request", show(got))
	}
	if got := len(srv.got()); got != 1 {
		t.Errorf("%d requests, want 1", got)
	}
}

// TestStrictTurnsKeepToolMessages: folding turns for strict templates never joins tool results or
// calls.
func TestStrictTurnsKeepToolMessages(t *testing.T) {
	call := ToolCall{ID: "a", Name: "x", Arguments: "{}"}
	in := []Message{{Role: RoleSystem, Content: "S"}, {Role: RoleUser, Content: "Q"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{call}}, {Role: RoleTool, ToolCallID: "a", Content: "1"},
		{Role: RoleTool, ToolCallID: "b", Content: "2"}}
	got := alternating(in)
	if len(got) != 4 || got[2].ToolCallID != "a" || got[3].ToolCallID != "b" {
		t.Errorf("alternating = %+v", got)
	}
}

// FuzzToolCallArguments: arguments cut into fragments anywhere (between any two characters, as
// a model's tokens fall) and read in any read sizes come back whole, from both decoders.
func FuzzToolCallArguments(f *testing.F) {
	f.Add(`{"city":"Paris","note":"\"quoted\" \\ é 😀"}`, uint64(0x123456789), uint8(3))
	f.Add(`{}`, uint64(1), uint8(1))
	f.Add(`{"a":[1,2,{"b":null}]}`, uint64(0xdeadbeef), uint8(7))
	f.Fuzz(func(t *testing.T, args string, cuts uint64, read uint8) {
		if !utf8.ValidString(args) {
			t.Skip() // a JSON string carries characters, not bytes
		}
		var frags []string
		rest := args
		for c := cuts; rest != ""; c >>= 3 {
			n := min(int(c&7)+1, len(rest))
			for n < len(rest) && !utf8.RuneStart(rest[n]) {
				n++
			}
			frags = append(frags, rest[:n])
			rest = rest[n:]
			if c == 0 {
				c = cuts | 1
			}
		}
		payloads := []string{delta(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"f","arguments":""}}]}`, "")}
		for _, fr := range frags {
			q, _ := json.Marshal(fr)
			payloads = append(payloads, delta(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%s}}]}`, q), ""))
		}
		payloads = append(payloads, delta(`{}`, "tool_calls"))
		body := sseOf(payloads...)
		r := iotest.HalfReader(strings.NewReader(body))
		if read%2 == 1 {
			r = iotest.OneByteReader(strings.NewReader(body))
		}
		dec := newStreamDecoder(r, http.Header{}, nil)
		for {
			if _, err := dec.next(); err != nil {
				break
			}
		}
		calls := dec.takeCalls()
		want := []ToolCall{{ID: "call_9", Name: "f", Arguments: strings.ToValidUTF8(args, "\uFFFD")}}
		if !reflect.DeepEqual(calls, want) {
			t.Fatalf("calls %+v, want %+v (fragments %q)", calls, want, frags)
		}
	})
}
