package llm

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestDropInputsInServerErrors: the request's text that pydantic puts in a validation error
// ('input') never reaches the error's message, which is logged at info and error level, whether vLLM
// answers itself or LiteLLM relays vLLM's error inside its own message (vLLM's escapes are then
// still there after the one JSON decoding the bot does, so a quote may seem to close early), and
// whatever the text holds: both quote kinds, or a pasted JSON log line whose keys ("msg", "type")
// look like the pydantic keys after an input. The reason stays.
func TestDropInputsInServerErrors(t *testing.T) {
	const secret = "hunter2"
	for _, tc := range []struct{ name, input string }{
		{"both quote kinds", `'it\'s my "hunter2" plan, all of it'`},
		{"in a dict", `{'messages': [{'role': 'user', 'content': 'it\'s my "hunter2" plan'}], 'model': 'x'}`},
		{"a JSON log line", `'why does this fail? {"level": "error", "msg": "password hunter2 rejected for admin"}'`},
		{"JSON with a type", `'my card {"number": "4111", "type": "visa hunter2"}'`},
		{"both quote kinds and a log line", `'it\'s my log {"level": "error", "msg": "password hunter2 rejected"}'`},
		{"in a list of messages", `[{'role': 'user', 'content': 'it\'s my log {"level": "error", "msg": "password hunter2"}'}]`},
	} {
		pyErr := "1 validation error:\n  {'type': 'string_too_long', 'loc': ('body', 'messages', 1, 'content'), " +
			"'msg': 'String should have at most 10 characters', 'input': " + tc.input + ", 'ctx': {'max_length': 10}}"
		vllm, _ := json.Marshal(map[string]any{"object": "error", "message": pyErr, "type": "BadRequestError", "param": nil, "code": 400})
		relayed, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": "litellm.BadRequestError: Hosted_vllmException - " + string(vllm), "type": nil, "param": nil, "code": "400"}})
		for server, body := range map[string][]byte{"vLLM": vllm, "LiteLLM relaying vLLM": relayed} {
			t.Run(tc.name+", "+server, func(t *testing.T) {
				e := errorFromResponse(400, nil, body, time.Now())
				if strings.Contains(e.Message, secret) {
					t.Errorf("the request's text is in the message:\n%s", e.Message)
				}
				if !strings.Contains(e.Message, "String should have at most 10 characters") {
					t.Errorf("the reason is gone from the message:\n%s", e.Message)
				}
			})
		}
	}
}
