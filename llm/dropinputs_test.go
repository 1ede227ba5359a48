package llm

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestDropInputsRelayedByLiteLLM: LiteLLM relays vLLM's validation error inside its own message,
// vLLM's JSON body as text. After the one JSON decoding the bot does, vLLM's escapes are still
// there: the Python repr of a text with both quote kinds ('it\'s "x"') reads 'it\\'s \"x\"'. The
// request's text must still not reach the message, which is logged at info and error level.
func TestDropInputsRelayedByLiteLLM(t *testing.T) {
	for _, tc := range []struct{ name, input string }{
		{"both quote kinds", `'it\'s my "secret" plan, all of it'`},
		{"in a dict", `{'messages': [{'role': 'user', 'content': 'it\'s my "secret" plan'}], 'model': 'x'}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pyErr := "1 validation error:\n  {'type': 'string_too_long', 'loc': ('body', 'messages', 1, 'content'), " +
				"'msg': 'String should have at most 10 characters', 'input': " + tc.input + ", 'ctx': {'max_length': 10}}"
			vllm, _ := json.Marshal(map[string]any{"object": "error", "message": pyErr, "type": "BadRequestError", "param": nil, "code": 400})
			body, _ := json.Marshal(map[string]any{"error": map[string]any{
				"message": "litellm.BadRequestError: Hosted_vllmException - " + string(vllm), "type": nil, "param": nil, "code": "400"}})
			e := errorFromResponse(400, nil, body, time.Now())
			for _, w := range []string{"secret", "plan"} {
				if strings.Contains(e.Message, w) {
					t.Errorf("the request's text %q is in the message:\n%s", w, e.Message)
				}
			}
			if !strings.Contains(e.Message, "String should have at most 10 characters") {
				t.Errorf("the reason is gone from the message:\n%s", e.Message)
			}
		})
	}
}

// TestDropInputsRelayedLogLine: a relayed error (LiteLLM over vLLM) whose input has both quote kinds
// ('it\\'s ..., where a quote seems to close early) and, after that, a pasted JSON log line with a
// pydantic key ("msg":) in the user's text: none of the text is left in the message.
func TestDropInputsRelayedLogLine(t *testing.T) {
	for _, tc := range []struct{ name, input string }{
		{"a JSON log line", `'it\'s my log {"level": "error", "msg": "password hunter2 rejected"}'`},
		{"JSON with a type", `'it\'s my card {"number": "4111", "type": "visa hunter2"}'`},
		{"in a list of messages", `[{'role': 'user', 'content': 'it\'s my log {"level": "error", "msg": "password hunter2"}'}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pyErr := "1 validation error:\n  {'type': 'string_too_long', 'loc': ('body', 'messages', 1, 'content'), " +
				"'msg': 'String should have at most 10 characters', 'input': " + tc.input + ", 'ctx': {'max_length': 10}}"
			vllm, _ := json.Marshal(map[string]any{"object": "error", "message": pyErr, "type": "BadRequestError", "param": nil, "code": 400})
			body, _ := json.Marshal(map[string]any{"error": map[string]any{
				"message": "litellm.BadRequestError: Hosted_vllmException - " + string(vllm), "type": nil, "param": nil, "code": "400"}})
			e := errorFromResponse(400, nil, body, time.Now())
			if strings.Contains(e.Message, "hunter2") {
				t.Errorf("the request's text is in the message:\n%s", e.Message)
			}
		})
	}
}
