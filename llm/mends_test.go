package llm

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestDropInputsKeyInsideTheInput: dropInputs now drops an input only up to the next pydantic key
// (nextKeyRE: , 'type': / , "msg": / ...), searched in the text of the input itself. A person who
// pastes a JSON log line (zap, logrus, slog write "msg"; most JSON has "type") gets everything after
// that key in their message logged with the error, at error level, where message text must not go.
func TestDropInputsKeyInsideTheInput(t *testing.T) {
	for _, tc := range []struct{ name, input string }{
		{"a JSON log line", `'why does this fail? {"level": "error", "msg": "password hunter2 rejected for admin"}'`},
		{"JSON with a type", `'my card {"number": "4111", "type": "visa hunter2"}'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pyErr := "1 validation error:\n  {'type': 'string_too_long', 'loc': ('body', 'messages', 1, 'content'), " +
				"'msg': 'String should have at most 10 characters', 'input': " + tc.input + ", 'ctx': {'max_length': 10}}"
			body, _ := json.Marshal(map[string]any{"object": "error", "message": pyErr, "type": "BadRequestError", "param": nil, "code": 400})
			e := errorFromResponse(400, nil, body, time.Now())
			if strings.Contains(e.Message, "hunter2") {
				t.Errorf("the request's text is in the message:\n%s", e.Message)
			}
		})
	}
}
