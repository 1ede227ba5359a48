package llm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// Tool calling over chat/completions (OpenAI's "function" tools), as compatible servers speak it:
//   - OpenAI streams a call as deltas numbered by index: the first carries the id and the name,
//     the next ones fragments of the arguments (split anywhere, even inside a UTF-8 sequence or an
//     escape), and several calls may be interleaved (parallel calls); the last chunk says
//     finish_reason "tool_calls".
//   - Ollama (and some gateways) send each call whole in one chunk, parallel calls in one chunk,
//     sometimes without an index or all at index 0 with distinct ids, and may end with "stop".
//   - A few servers send the arguments as a JSON object rather than a string.
//
// So calls are assembled by index and id (callAssembler) and delivered whole, once, at the end of
// the stream: a stream that breaks off delivers none (half an argument object is no call).

// Tool is a function the model may call. Parameters is its JSON Schema (an object schema); nil
// stands for one without parameters.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// emptyParameters is the schema of a tool without parameters (OpenAI wants an object schema).
var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// MarshalJSON writes t in the chat/completions shape {"type":"function","function":{...}}.
func (t Tool) MarshalJSON() ([]byte, error) {
	params := t.Parameters
	if len(bytes.TrimSpace(params)) == 0 || !json.Valid(params) {
		params = emptyParameters
	}
	type fn struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	return json.Marshal(struct {
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}{"function", fn{t.Name, t.Description, params}})
}

// ToolCall is one call the model made: ID pairs it with its result (Message.ToolCallID), and
// Arguments is the JSON text of its arguments, as the model wrote it (it may be invalid).
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// MarshalJSON writes c as an assistant message's tool_calls entry.
func (c ToolCall) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"`
		Function wireFunction `json:"function"`
	}{c.ID, "function", wireFunction{c.Name, c.Arguments}})
}

// UnmarshalJSON reads the shape MarshalJSON writes (for tests and fakes that decode requests).
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var w wireToolCall
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = ToolCall{ID: w.ID, Name: w.Function.Name, Arguments: w.Function.arguments()}
	return nil
}

// wireToolCall is one entry of delta.tool_calls (a fragment) or message.tool_calls (whole).
type wireToolCall struct {
	Index    *int             `json:"index"` // absent on some servers' whole calls
	ID       string           `json:"id"`
	Function wireFunctionPart `json:"function"`
}

type wireFunctionPart struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"` // a string, or an object on a few servers
}

// arguments is the fragment's argument text: a JSON string's value, or an object's own text.
func (f *wireFunctionPart) arguments() string {
	raw := bytes.TrimSpace(f.Arguments)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	return string(raw)
}

// callAssembler puts the calls of a stream together from their fragments.
type callAssembler struct {
	calls []ToolCall
	index []int // the wire index of each call (-1: none given)
}

// add takes one chunk's fragments.
func (a *callAssembler) add(parts []wireToolCall) {
	for i := range parts {
		p := &parts[i]
		idx := -1
		if p.Index != nil {
			idx = *p.Index
		}
		k := a.find(idx, p)
		if k < 0 {
			a.calls = append(a.calls, ToolCall{ID: p.ID, Name: p.Function.Name, Arguments: p.Function.arguments()})
			a.index = append(a.index, idx)
			continue
		}
		c := &a.calls[k]
		if c.ID == "" {
			c.ID = p.ID
		}
		if n := p.Function.Name; n != "" && n != c.Name {
			c.Name += n // a name streamed in pieces; a repeated whole name is not doubled
		}
		c.Arguments += p.Function.arguments()
	}
}

// find returns the call fragment p continues, or -1 for a new call. With an index, the latest call
// at that index, unless both carry ids that differ (servers that number every call 0). Without
// one, the call with p's id, or for a fragment without id and name the latest call.
func (a *callAssembler) find(idx int, p *wireToolCall) int {
	for k := len(a.calls) - 1; k >= 0; k-- {
		c := &a.calls[k]
		switch {
		case idx >= 0 && a.index[k] == idx:
			if p.ID != "" && c.ID != "" && p.ID != c.ID {
				return -1
			}
			return k
		case idx < 0 && p.ID != "" && c.ID == p.ID:
			return k
		}
	}
	if idx < 0 && p.ID == "" && p.Function.Name == "" && len(a.calls) > 0 {
		return len(a.calls) - 1
	}
	return -1
}

// take returns the assembled calls (ids filled in where the server gave none) and empties a.
func (a *callAssembler) take() []ToolCall {
	calls := a.calls
	for i := range calls {
		if calls[i].ID == "" {
			calls[i].ID = "call_" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		}
	}
	a.calls, a.index = nil, nil
	return calls
}

// rejectsTools reports a server or model that refuses the tools key (openai-wire.md): an
// OpenAI-shaped param naming it; vLLM started without --enable-auto-tool-choice ("auto" tool
// choice requires ...); Ollama's "does not support tools" for a model without a tool template;
// llama.cpp without --jinja (a 500: "tools param requires --jinja flag"); FastAPI shims that forbid
// the field (422).
func rejectsTools(e *Error) bool {
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusInternalServerError,
		http.StatusNotImplemented:
	default:
		return false
	}
	if p := strings.ToLower(e.Param); p == "tools" || strings.HasPrefix(p, "tools.") || strings.HasPrefix(p, "tools[") ||
		p == "tool_choice" {
		return true
	}
	m := strings.ToLower(e.Message)
	if !strings.Contains(m, "tool") {
		return false
	}
	for _, s := range []string{"not support", "unsupported", "enable-auto-tool-choice", "--jinja", "tool-call-parser",
		"not supported", "extra fields not permitted", "extra inputs are not permitted", "unrecognized request argument"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// joinable reports whether strict turns may fold m into the message before it of the same role:
// never a tool's result or a message that calls tools (each pairs with its call by id).
func joinable(prev, m Message) bool {
	return prev.Role == m.Role && m.Role != RoleTool && len(m.ToolCalls) == 0 && len(prev.ToolCalls) == 0
}
