package llm

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// A model that refuses TEMPERATURE gets the request again without it (README: "drop temperature
// once per model when the model rejects it"; openai-wire.md §1.1), whatever shape the refusal takes
// on the way. TestTemperatureFallback covers OpenAI's body with code unsupported_value or
// unsupported_parameter; these are the same refusal as other documented servers send it:
//
//   - OpenAI and Azure OpenAI also answer with "code": null (param "temperature"): the raw
//     bodies relayed in BerriAI/litellm#13327 (Azure o3-mini) and
//     OpenHands/software-agent-sdk#1837 (gpt-5.2).
//   - LiteLLM proxy (openai-wire.md §3.1: code is the status as a string, type "None"):
//     its own UnsupportedParamsError for gpt-5 / o-series models, as quoted in
//     Vivswan/litellm-vscode-chat#18.
//   - OpenRouter (openai-wire.md §3.1: int code, metadata): the provider's refusal inside
//     metadata.raw, as quoted in BerriAI/litellm#10957.
func TestTemperatureRejectionShapes(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"openai_azure_code_null", `{"error":{"message":"Unsupported parameter: 'temperature' is not supported with this model.","type":"invalid_request_error","param":"temperature","code":null}}`},
		{"litellm_code_400", `{"error":{"message":"litellm.UnsupportedParamsError: gpt-5 models (including gpt-5-codex) don't support temperature=0.7. Only temperature=1 is supported. For gpt-5.1, temperature is supported when reasoning_effort='none' (or not specified, as it defaults to 'none'). To drop unsupported params set litellm.drop_params = True. Received Model Group=gpt-5-mini\nAvailable Model Group Fallbacks=None","type":"None","param":null,"code":"400"}}`},
		{"openrouter_provider_raw", `{"error":{"code":400,"message":"Provider returned error","metadata":{"raw":"{\n  \"error\": {\n    \"message\": \"Unsupported parameter: 'temperature' is not supported with this model.\",\n    \"type\": \"invalid_request_error\",\n    \"param\": \"temperature\",\n    \"code\": null\n  }\n}","provider_name":"OpenAI"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				if strings.Contains(string(must(r)), `"temperature"`) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					w.Write([]byte(tc.body))
					return
				}
				serveOK(w, r)
			})
			var dropped []string
			c, _ := newTestClient(t, srv.URL, func(c *Config) {
				c.Temperature = ptr(0.7)
				c.ChatModel = "gpt-5-mini"
				c.Hooks.TemperatureDropped = func(model string) { dropped = append(dropped, model) }
			})
			r := collect(t, c.Stream(t.Context(), hello))
			if r.Err != nil || r.Content != "Hello" {
				t.Errorf("got %s, want the answer after the request is sent again without temperature", show(r))
			}
			var temps []any
			for _, rec := range srv.got() {
				temps = append(temps, rec.Body["temperature"])
			}
			if want := []any{0.7, nil}; !slices.Equal(temps, want) {
				t.Errorf("temperatures sent %v, want %v", temps, want)
			}
			if !slices.Equal(dropped, []string{"gpt-5-mini"}) {
				t.Errorf("TemperatureDropped calls %v, want [gpt-5-mini]", dropped)
			}
		})
	}
}
