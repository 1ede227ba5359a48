package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// errorFixtures: one per error body of openai-wire.md §3.3 (and the per-server table §3.1),
// served with its status and headers. Each must come out as the same *Error from Stream and
// from Complete.
var errorFixtures = []struct {
	fixture string
	status  int
	header  map[string]string
	want    Error
}{
	{"openai_rate_limit_429.json", 429, map[string]string{"X-Request-Id": "req_123", "Retry-After-Ms": "120"},
		Error{Kind: KindRateLimit, Status: 429, Type: "requests", Code: "rate_limit_exceeded", RequestID: "req_123", RetryAfter: 120 * time.Millisecond,
			Message: "Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 120ms."}},
	{"openai_insufficient_quota_429.json", 429, nil,
		Error{Kind: KindQuota, Status: 429, Type: "insufficient_quota", Code: "insufficient_quota",
			Message: "You exceeded your current quota, please check your plan and billing details."}},
	{"openai_invalid_api_key_401.json", 401, nil,
		Error{Kind: KindAuth, Status: 401, Type: "invalid_request_error", Code: "invalid_api_key",
			Message: "Incorrect API key provided: [redacted]. You can find your API key at https://platform.openai.com/account/api-keys."}},
	{"openai_model_not_found_404.json", 404, nil,
		Error{Kind: KindBadRequest, Status: 404, Type: "invalid_request_error", Code: "model_not_found",
			Message: "The model `gpt-9` does not exist or you do not have access to it."}},
	{"openai_context_length_400.json", 400, nil,
		Error{Kind: KindBadRequest, Status: 400, Type: "invalid_request_error", Code: "context_length_exceeded", Param: "messages",
			Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130012 tokens. Please reduce the length of the messages."}},
	{"openai_temperature_unsupported_400.json", 400, nil,
		Error{Kind: KindBadRequest, Status: 400, Type: "invalid_request_error", Code: "unsupported_value", Param: "temperature",
			Message: "Unsupported value: 'temperature' does not support 0.7 with this model. Only the default (1) value is supported."}},
	{"openai_server_error_500.json", 500, nil,
		Error{Kind: KindServer, Status: 500, Type: "server_error",
			Message: "The server had an error while processing your request. Sorry about that!"}},
	{"openai_overloaded_503.json", 503, map[string]string{"Retry-After": "7"},
		Error{Kind: KindServer, Status: 503, Type: "service_unavailable_error", Code: "server_is_overloaded", RetryAfter: 7 * time.Second,
			Message: "The engine is currently overloaded, please try again later."}},
	{"openai_moderation_blocked_400.json", 400, nil,
		Error{Kind: KindContentPolicy, Status: 400, Type: "image_generation_user_error", Code: "moderation_blocked",
			Message: "Your request was rejected by the safety system. If you believe this is an error, contact us at help.openai.com and include the request ID req_img1."}},
	{"openai_content_policy_violation_400.json", 400, nil,
		Error{Kind: KindContentPolicy, Status: 400, Type: "invalid_request_error", Code: "content_policy_violation",
			Message: "Your request was rejected as a result of our safety system. Your prompt may contain text that is not allowed by our safety system."}},
	{"openai_region_403.json", 403, nil,
		Error{Kind: KindAuth, Status: 403, Type: "request_forbidden", Code: "unsupported_country_region_territory",
			Message: "Country, region, or territory not supported"}},
	{"azure_content_filter_400.json", 400, map[string]string{"Apim-Request-Id": "6b2c-azure"},
		Error{Kind: KindContentPolicy, Status: 400, Type: "invalid_request_error", Code: "content_filter", Param: "prompt", RequestID: "6b2c-azure",
			Message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry."}},
	{"vllm_int_code_error.json", 400, nil,
		Error{Kind: KindBadRequest, Status: 400, Type: "BadRequestError", Code: "400",
			Message: "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens in the messages."}},
	{"vllm_old_flat_error.json", 404, nil,
		Error{Kind: KindBadRequest, Status: 404, Type: "NotFoundError", Code: "404", Message: "The model `llama-9` does not exist."}},
	{"llamacpp_invalid_key_401.json", 401, nil,
		Error{Kind: KindAuth, Status: 401, Type: "authentication_error", Code: "401", Message: "Invalid API Key"}},
	{"llamacpp_not_found_404.json", 404, nil,
		Error{Kind: KindBadRequest, Status: 404, Type: "not_found_error", Code: "404", Message: "File Not Found"}},
	{"llamacpp_exceed_context_400.json", 400, nil,
		Error{Kind: KindBadRequest, Status: 400, Type: "exceed_context_size_error", Code: "400",
			Message: "the request exceeds the available context size, try increasing it"}},
	{"llamacpp_malformed_json_500.json", 500, nil,
		Error{Kind: KindServer, Status: 500, Type: "server_error", Code: "500",
			Message: "[json.exception.parse_error.101] parse error at line 1, column 1: syntax error while parsing value - invalid literal; last read: 'x'"}},
	{"litellm_string_code.json", 400, nil,
		Error{Kind: KindBadRequest, Status: 400, Code: "400",
			Message: "litellm.BadRequestError: OpenAIException - Invalid value for 'messages': empty array."}},
	{"litellm_rate_limit_string_code_429.json", 429, nil,
		Error{Kind: KindRateLimit, Status: 429, Type: "throttling_error", Code: "429",
			Message: "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached"}},
	// LiteLLM relays OpenAI's insufficient_quota with its own type and code: only the text says quota.
	{"litellm_insufficient_quota_429.json", 429, nil,
		Error{Kind: KindQuota, Status: 429, Code: "429",
			Message: "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."}},
	{"litellm_null_200.json", 200, nil,
		Error{Kind: KindInvalid, Status: 200, Message: "empty response (body: null)"}},
	{"openrouter_402_credits.json", 402, nil,
		Error{Kind: KindQuota, Status: 402, Code: "402",
			Message: "This request requires more credits, or fewer max_tokens. You requested up to 4096 tokens, but can only afford 1000."}},
	{"openrouter_403_moderation.json", 403, map[string]string{"X-Generation-Id": "gen-123"},
		Error{Kind: KindContentPolicy, Status: 403, Type: "moderation", Code: "403", RequestID: "gen-123",
			Message: `openai/gpt-4o requires moderation on OpenAI. Your input was flagged for "harassment". (provider OpenAI)`}},
	{"openrouter_502_provider.json", 502, map[string]string{"X-Generation-Id": "gen-456"},
		Error{Kind: KindServer, Status: 502, Code: "502", RequestID: "gen-456",
			Message: "Provider returned error: upstream connect error or disconnect/reset before headers (provider Together)"}},
	{"lmstudio_error_string_200.json", 200, nil,
		Error{Kind: KindServer, Status: 200, Message: "Unexpected endpoint or method. (POST /chat/completions)"}},
	{"ollama_error_string_404.json", 404, nil,
		Error{Kind: KindBadRequest, Status: 404, Message: `model "llama9" not found, try pulling it first`}},
	{"ollama_openai_shape_404.json", 404, nil,
		Error{Kind: KindBadRequest, Status: 404, Type: "not_found_error", Message: `model "llama9" not found, try pulling it first`}},
	{"groq_logprobs_400.json", 400, map[string]string{"X-Request-Id": "req_01groq"},
		Error{Kind: KindBadRequest, Status: 400, Type: "invalid_request_error", Param: "logprobs", RequestID: "req_01groq",
			Message: "logprobs is not supported with this model"}},
	// Gemini's OpenAI-compatible endpoint wraps Google's error object in an array; its status
	// is the type, and a bad key is a 400 whose ErrorInfo reason says API_KEY_INVALID.
	{"gemini_model_not_found_404.json", 404, nil,
		Error{Kind: KindBadRequest, Status: 404, Type: "NOT_FOUND", Code: "404",
			Message: "models/gemini-9 is not found for API version v1main, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."}},
	{"gemini_api_key_invalid_400.json", 400, nil,
		Error{Kind: KindAuth, Status: 400, Type: "INVALID_ARGUMENT", Code: "API_KEY_INVALID",
			Message: "API key not valid. Please pass a valid API key."}},
	{"gemini_resource_exhausted_429.json", 429, nil,
		Error{Kind: KindRateLimit, Status: 429, Type: "RESOURCE_EXHAUSTED", Code: "429",
			Message: "Resource has been exhausted (e.g. check quota)."}},
	// Gemini words its per-minute limits like OpenAI's billing quota: RESOURCE_EXHAUSTED decides.
	{"gemini_quota_per_minute_429.json", 429, nil,
		Error{Kind: KindRateLimit, Status: 429, Type: "RESOURCE_EXHAUSTED", Code: "429",
			Message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."}},
	// ... but its quota ids tell a daily limit, and "limit: 0" a model the plan lacks: no retry helps.
	{"gemini_quota_per_day_429.json", 429, nil,
		Error{Kind: KindQuota, Status: 429, Type: "RESOURCE_EXHAUSTED", Code: "429",
			Message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. (daily quota GenerateRequestsPerDayPerProjectPerModel-FreeTier)"}},
	{"gemini_model_not_in_plan_429.json", 429, nil,
		Error{Kind: KindQuota, Status: 429, Type: "RESOURCE_EXHAUSTED", Code: "429",
			Message: "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0, model: gemini-2.5-pro\nPlease retry in 20.04466179s."}},
	{"fastapi_detail.json", 404, nil, Error{Kind: KindBadRequest, Status: 404, Message: "Not Found"}},
	{"fastapi_detail_pydantic_422.json", 422, nil,
		Error{Kind: KindBadRequest, Status: 422, Message: "body.messages: Field required; body.model: Input should be a valid string"}},
	{"proxy_html_502.html", 502, nil, Error{Kind: KindServer, Status: 502, Message: "502 Bad Gateway"}},
	{"proxy_html_503_no_title.html", 503, map[string]string{"Retry-After": "Sat, 21 Nov 2026 12:00:30 GMT"},
		Error{Kind: KindServer, Status: 503, RetryAfter: 30 * time.Second,
			Message: "Service Temporarily Unavailable The server is temporarily unable to service your request due to maintenance downtime or capacity problems. Please try again later. Lorem ipsum dolor sit amet. Lorem ips…"}},
	{"proxy_empty_504.txt", 504, nil, Error{Kind: KindServer, Status: 504, Message: "gateway timeout"}},
	// Go's default mux (Ollama, LocalAI) when the base URL lacks its /v1: no JSON, so the path
	// itself is unknown, and the message says what to check.
	{"go_mux_404_no_v1.txt", 404, nil,
		Error{Kind: KindBadRequest, Status: 404,
			Message: "404 page not found (no such endpoint: is the base URL right? It usually ends in /v1)"}},
	{"proxy_plain_text_503.txt", 503, nil,
		Error{Kind: KindServer, Status: 503, Message: "upstream connect error or disconnect/reset before headers. reset reason: overflow"}},
}

func TestErrorFixtures(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tc := range errorFixtures {
		t.Run(tc.fixture, func(t *testing.T) {
			body := readFixture(t, tc.fixture)
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", contentType(tc.fixture))
				w.WriteHeader(tc.status)
				w.Write(body)
			})
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.MaxRetries = -1 })
			c.now = func() time.Time { return now }

			got := collect(t, c.Stream(t.Context(), hello))
			if got.Err == nil || got.Content != "" || got.Finish != "" {
				t.Fatalf("Stream: got %s, want only an error", show(got))
			}
			if *got.Err != tc.want {
				t.Errorf("Stream error:\ngot  %+v\nwant %+v", *got.Err, tc.want)
			}

			_, err := c.Complete(t.Context(), hello)
			e, ok := errors.AsType[*Error](err)
			if !ok {
				t.Fatalf("Complete: %T %v is not an *Error", err, err)
			}
			checkNoKey(t, e)
			if cp := *e; cp != tc.want {
				t.Errorf("Complete error:\ngot  %+v\nwant %+v", cp, tc.want)
			}
			if n := len(srv.got()); n != 2 {
				t.Errorf("%d requests, want 2 (no retries configured)", n)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Kind: KindRateLimit, Status: 429, Code: "rate_limit_exceeded", Message: "Rate limit reached for gpt-4o", RequestID: "req_123"},
			"model service: 429 rate limit: Rate limit reached for gpt-4o (code rate_limit_exceeded, request req_123)"},
		{&Error{Kind: KindBadRequest, Status: 400, Code: "400", Message: "context too long"},
			"model service: 400 bad request: context too long"},
		{&Error{Kind: KindBadRequest, Status: 400, Code: "unsupported_value", Param: "temperature", Message: "Unsupported value"},
			"model service: 400 bad request: Unsupported value (code unsupported_value, param temperature)"},
		{&Error{Kind: KindBadRequest, Status: 404, Code: "model_not_found", Message: "The model `gpt-9` does not exist"},
			"model service: 404 not found: The model `gpt-9` does not exist (code model_not_found)"},
		{&Error{Kind: KindServer, Status: 503, Message: "service unavailable", RetryAfter: 3 * time.Second},
			"model service: 503 server error: service unavailable (retry after 3s)"},
		{&Error{Kind: KindTruncated, Status: 200, Message: truncatedMsg},
			"model service: answer cut off: the stream ended without [DONE] or a finish reason"},
		{&Error{Kind: KindServer, Status: 200, Code: "500", Message: "slot unavailable"},
			"model service: server error: slot unavailable (code 500)"},
		{&Error{Kind: KindTimeout, Message: errIdle.Error(), Err: errIdle},
			"model service: timeout: no data from the model service within the idle timeout"},
		{&Error{Kind: KindConnection, Message: "dial tcp 127.0.0.1:1: connect: connection refused"},
			"model service: connection failed: dial tcp 127.0.0.1:1: connect: connection refused"},
		{&Error{}, "model service: error"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q\nwant      %q", got, tc.want)
		}
	}
}

func TestKindOf(t *testing.T) {
	e := &Error{Kind: KindQuota}
	for _, tc := range []struct {
		err  error
		want Kind
	}{
		{e, KindQuota},
		{fmt.Errorf("chat: %w", e), KindQuota},
		{errors.New("plain"), ""},
		{nil, ""},
		{context.Canceled, ""},
	} {
		if got := KindOf(tc.err); got != tc.want {
			t.Errorf("KindOf(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestTruthy follows the Python SDK: only a truthy "error" is an error.
func TestTruthy(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{``, false}, {`null`, false}, {`false`, false}, {`0`, false}, {`""`, false}, {`{}`, false}, {`[ ]`, false},
		{`{"message":"x"}`, true}, {`"boom"`, true}, {`true`, true}, {`1`, true}, {`["x"]`, true},
	} {
		if got := truthy([]byte(tc.raw)); got != tc.want {
			t.Errorf("truthy(%s) = %v, want %v", tc.raw, got, tc.want)
		}
	}
}

// TestKeyRedaction: a server that echoes the key back (in the body, in headers, in an
// error event) never gets it into an error string.
func TestKeyRedaction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ctype  string
		body   string
	}{
		{"openai shape", 401, "application/json", `{"error":{"message":"bad key ` + testKey + `","type":"` + testKey + `","param":"` + testKey + `","code":"` + testKey + `"}}`},
		{"error string", 400, "application/json", `{"error":"Authorization: Bearer ` + testKey + `"}`},
		{"html", 502, "text/html", `<html><head><title>` + testKey + `</title></head></html>`},
		{"plain", 500, "text/plain", "key=" + testKey},
		{"detail", 422, "application/json", `{"detail":[{"loc":["header","` + testKey + `"],"msg":"bad"}]}`},
		{"in stream", 200, "text/event-stream", "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"error\":{\"message\":\"" + testKey + "\"}}\n\n"},
		{"old llama.cpp line", 200, "text/event-stream", "error: {\"message\":\"" + testKey + "\"}\n\n"},
		{"200 json", 200, "application/json", `{"error":"` + testKey + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.Header().Set("X-Request-Id", testKey)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			})
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.MaxRetries = -1 })
			var errs []error
			for _, err := range c.Stream(t.Context(), hello) {
				if err != nil {
					errs = append(errs, err)
				}
			}
			_, err := c.Complete(t.Context(), hello)
			errs = append(errs, err)
			for _, err := range errs {
				if err == nil {
					t.Fatal("no error")
				}
				checkNoKey(t, err)
				if s := fmt.Sprintf("%v %+v %#v", err, err, err); strings.Contains(s, "SECRET") {
					t.Errorf("formatted error contains the key: %s", s)
				}
			}
		})
	}
}

// keyAtClip is prefix, padding, the API key and more text, with the key at byte 172: clipping
// the text to maxSnippet (200) bytes cuts the key after "SECRET".
func keyAtClip(prefix string) string {
	return prefix + strings.Repeat(".", 172-len(prefix)) + testKey + " (rejected)"
}

// TestKeyRedactionBeforeClip: gateways and proxies echo the bearer token into error pages and
// messages ("Received: Bearer sk-…"), and the client keeps only the first maxSnippet bytes of
// such text. A key that straddles that cut must not leak its first bytes: it is redacted in the
// raw body, before any clip, on every path that clips a body.
func TestKeyRedactionBeforeClip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ctype  string
		body   string
	}{
		{"401 plain text from a gateway", 401, "text/plain",
			keyAtClip("Unauthorized: the token in the Authorization header is not valid for this route (gateway policy llm-prod). Received: Bearer ")},
		{"403 web page", 403, "text/html", "<html><body><p>" + keyAtClip("Access denied by policy llm-prod for Bearer ") + "</p></body></html>"},
		{"OpenRouter metadata.raw", 401, "application/json",
			`{"error":{"code":401,"message":"Provider returned error","metadata":{"raw":"` + keyAtClip("upstream: invalid x-api-key ") + `","provider_name":"Anthropic"}}}`},
		{"web page instead of an answer", 200, "text/html", "<html><body><p>" + keyAtClip("Sign in to the proxy. Your token ") + "</p></body></html>"},
		{"malformed completion", 200, "application/json", keyAtClip(`{"choices":[{"message":{"content":"echo: Bearer `)},
		{"malformed stream event", 200, "text/event-stream", "data: " + keyAtClip(`{"choices":[{"delta":{"content":"echo: Bearer `) + "\n\n"},
		{"error event in plain text", 200, "text/event-stream", "event: error\ndata: " + keyAtClip("upstream rejected Bearer ") + "\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			})
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.MaxRetries = -1 })
			r := collect(t, c.Stream(t.Context(), hello))
			_, err := c.Complete(t.Context(), hello)
			if r.Err == nil || err == nil {
				t.Fatalf("Stream: %s; Complete: %v; want errors", show(r), err)
			}
			for _, msg := range []string{r.Err.Error(), err.Error()} {
				if strings.Contains(msg, testKey[:8]) || !strings.Contains(msg, "[redacted]") {
					t.Errorf("got %q, want the key [redacted] and none of it left", msg)
				}
			}
		})
	}
	t.Run("malformed image response", func(t *testing.T) {
		srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(keyAtClip(`{"created":1,"data":[{"revised_prompt":"echo: Bearer `)))
		})
		c, _ := newTestClient(t, srv.URL, nil)
		_, err := c.Image(t.Context(), ImageRequest{Prompt: "an otter"})
		if err == nil || strings.Contains(err.Error(), testKey[:8]) || !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("got %v, want the key [redacted] and none of it left", err)
		}
	})
}

// TestHeaderSecretRedaction: credentials passed as extra headers (Azure's api-key) are
// redacted like the API key.
func TestHeaderSecretRedaction(t *testing.T) {
	const azureKey = "azure-SECRET-4f9a8b7c6d5e"
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		w.Write([]byte(`{"error":{"code":"401","message":"Access denied due to invalid subscription key ` + r.Header.Get("Api-Key") + `"}}`))
	})
	c, _ := newTestClient(t, srv.URL, func(c *Config) {
		c.Headers = http.Header{"Api-Key": {azureKey}, "X-Trace": {"not-secret-trace"}}
	})
	_, err := c.Complete(t.Context(), hello)
	checkNoKey(t, err)
	if got, want := err.Error(), "model service: 401 not authorized: Access denied due to invalid subscription key [redacted]"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	// A gateway's credential under a name that does not say so (LLM_HEADERS is never logged); a short
	// value is not taken for one.
	const gatewayPass = "gw-pass-8c1e2f"
	srv = newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(403)
		w.Write([]byte(`{"error":{"message":"tenant ` + r.Header.Get("X-Tenant") + ` refused, debug=true"}}`))
	})
	c, _ = newTestClient(t, srv.URL, func(c *Config) {
		c.Headers = http.Header{"X-Tenant": {gatewayPass}, "X-Debug": {"true"}}
	})
	_, err = c.Complete(t.Context(), hello)
	if got, want := err.Error(), "model service: 403 not authorized: tenant [redacted] refused, debug=true"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestOddErrorShapes: fields of an unexpected type (a numeric "object", an int innererror
// code, a non-string provider name) and a leading byte order mark neither lose the message
// nor crash the client.
func TestOddErrorShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		ctype  string
		body   string
		want   Error
	}{
		{"error event with a numeric object", 200, "text/event-stream",
			"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"object\":1,\"error\":\"boom\"}\n\n",
			Error{Kind: KindServer, Status: 200, Message: "boom"}},
		{"error event with an object-valued object", 200, "text/event-stream",
			"data: {\"object\":{\"x\":1},\"error\":{\"message\":\"boom\",\"code\":503}}\n\n",
			Error{Kind: KindServer, Status: 200, Code: "503", Message: "boom"}},
		{"int innererror code", 400, "application/json",
			`{"error":{"message":"The response was filtered","type":null,"code":"content_filter","innererror":{"code":1}}}`,
			Error{Kind: KindContentPolicy, Status: 400, Code: "content_filter", Message: "The response was filtered"}},
		{"innererror code where code is null", 400, "application/json",
			`{"error":{"message":"The prompt was filtered","code":null,"innererror":{"code":"ResponsibleAIPolicyViolation"}}}`,
			Error{Kind: KindContentPolicy, Status: 400, Code: "ResponsibleAIPolicyViolation", Message: "The prompt was filtered"}},
		{"numeric provider name", 502, "application/json",
			`{"error":{"code":502,"message":"Provider returned error","metadata":{"provider_name":7}}}`,
			Error{Kind: KindServer, Status: 502, Code: "502", Message: "Provider returned error"}},
		{"flat error with a numeric object", 500, "application/json", `{"object":1,"message":"flat"}`,
			Error{Kind: KindServer, Status: 500, Message: "flat"}},
		{"byte order mark before an error body", 401, "application/json",
			"\ufeff" + `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`,
			Error{Kind: KindAuth, Status: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided."}},
		{"byte order mark before a 200 error body", 200, "application/json", "\ufeff" + `{"error":"Unexpected endpoint or method. (POST /chat/completions)"}`,
			Error{Kind: KindServer, Status: 200, Message: "Unexpected endpoint or method. (POST /chat/completions)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			})
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.MaxRetries = -1 })
			got := collect(t, c.Stream(t.Context(), hello))
			if got.Err == nil || *got.Err != tc.want {
				t.Errorf("got  %s\nwant %+v", show(got), tc.want)
			}
		})
	}
}

// TestRequestIDNeverCarriesTheKey: a request id header is copied into errors, and a proxy may put
// anything there. A key in it is redacted on every path, including a stream that breaks off after
// its headers; an overlong value is dropped, not clipped (a clip could cut a key in two).
func TestRequestIDNeverCarriesTheKey(t *testing.T) {
	refuse := func(t *testing.T, w http.ResponseWriter) { // a 401
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		w.Write([]byte(`{"error":{"message":"bad key","type":"invalid_request_error"}}`))
	}
	cut := func(t *testing.T, w http.ResponseWriter) { // 200 and a stream that breaks off
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"))
		rc := http.NewResponseController(w)
		rc.Flush()
		conn, _, err := rc.Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset: a connection error, which failStream turns into a cut
		}
		conn.Close()
	}
	for _, tc := range []struct {
		name  string
		id    string
		serve func(t *testing.T, w http.ResponseWriter) // the answer under the id
	}{
		{"401, the key as the id", testKey, refuse},
		{"401, the key straddling byte 128", strings.Repeat("x", 120) + testKey, refuse},
		{"stream cut, the key as the id", testKey, cut},
		{"stream cut, the key straddling byte 128", strings.Repeat("x", 120) + testKey, cut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", tc.id)
				tc.serve(t, w)
			})
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.MaxRetries = -1 })
			r := collect(t, c.Stream(t.Context(), hello))
			_, err := c.Complete(t.Context(), hello)
			if r.Err == nil || err == nil {
				t.Fatalf("Stream: %s; Complete: %v; want errors", show(r), err)
			}
			for _, e := range []error{r.Err, err} {
				le, ok := errors.AsType[*Error](e)
				if !ok {
					t.Fatalf("got %T %v, want *Error", e, e)
				}
				if strings.Contains(e.Error(), testKey[:8]) || strings.Contains(le.RequestID, testKey[:8]) {
					t.Errorf("got %q (request id %q), want none of the key", e, le.RequestID)
				}
			}
		})
	}
}

// TestDropInputs: the request values pydantic puts in validation errors ('input') are left out of
// error messages, which are logged; the rest of the message stays.
func TestDropInputs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[{'type': 'string_too_long', 'loc': ('body', 'messages', 1, 'content'), 'msg': 'String should have at most 10 characters', 'input': 'my salary is 10k', 'ctx': {'max_length': 10}}]",
			"[{'type': 'string_too_long', 'loc': ('body', 'messages', 1, 'content'), 'msg': 'String should have at most 10 characters', 'input': …, 'ctx': {'max_length': 10}}]"},
		{`[{"type":"missing","loc":["body","model"],"msg":"Field required","input":{"messages":[{"role":"user","content":"secret \"plan\", {x}"}]}}]`,
			`[{"type":"missing","loc":["body","model"],"msg":"Field required","input":…`}, // the rest, to be sure
		{"[{'type': 'a', 'input': 'one'}, {'type': 'b', 'msg': 'm', 'input': 'two'}]",
			"[{'type': 'a', 'input': …, {'type': 'b', 'msg': 'm', 'input': …"},
		{`"param": "input", "flagged_input": true`, `"param": "input", "flagged_input": true`},
		{"1 validation error for ChatCompletionRequest\nmessages.1.content\n  String should have at most 10 characters [type=string_too_long, input_value='my secret text', input_type=str]",
			"1 validation error for ChatCompletionRequest\nmessages.1.content\n  String should have at most 10 characters [type=string_too_long, input_value=…, input_type=str]"},
		{"'input': 'it\\'s mine'", "'input': …"},
		{"Input should be a valid string", "Input should be a valid string"},
		{"the input is too long ('input' missing)", "the input is too long ('input' missing)"},
		{"", ""},
	} {
		if got := dropInputs(tc.in); got != tc.want {
			t.Errorf("dropInputs(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
