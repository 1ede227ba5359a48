package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Tool calls, in the wire variants compatible servers send them (a reply's ToolCalls, after its
// tokens).

// Tool is one tool a request offered.
type Tool struct {
	Name, Description string
	Parameters        json.RawMessage
}

// ToolCall is one call of a reply, or of an assistant message in a request.
type ToolCall struct {
	ID, Name, Arguments string
}

// ToolWire is how a reply's tool calls are written.
type ToolWire int

const (
	// WireOpenAI streams each call as deltas by index: id and name first, then the arguments in
	// pieces of a few bytes, the calls one after the other; finish_reason "tool_calls".
	WireOpenAI ToolWire = iota
	// WireInterleaved is WireOpenAI with the calls' pieces interleaved (parallel calls).
	WireInterleaved
	// WireWhole sends every call whole in one chunk, then finish_reason "stop" (Ollama).
	WireWhole
	// WireNoIndex sends each call whole in a chunk of its own, without an index, all "stop".
	WireNoIndex
)

// Calls is a reply that calls tools in the wire variant w.
func Calls(w ToolWire, calls ...ToolCall) Reply { return Reply{ToolCalls: calls, ToolWire: w} }

// RefuseTools is Ollama's answer to tools offered to a model without a tool template.
func RefuseTools() Reply {
	return HTTPError(http.StatusBadRequest, APIError{Message: "registry.ollama.ai/library/tiny does not support tools",
		Type: "api_error"})
}

type wireCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

func callsOf(w []wireCall) []ToolCall {
	var out []ToolCall
	for _, c := range w {
		out = append(out, ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return out
}

func toolsOf(w []wireTool) []Tool {
	var out []Tool
	for _, t := range w {
		out = append(out, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return out
}

// toolFinish is the finish reason of a reply that sets none.
func (r Reply) toolFinish() string {
	if len(r.ToolCalls) > 0 && (r.ToolWire == WireOpenAI || r.ToolWire == WireInterleaved) {
		return "tool_calls"
	}
	return "stop"
}

func whole(i int, c ToolCall, index bool) wireCall {
	w := wireCall{ID: c.ID, Type: "function"}
	if index {
		w.Index = &i
	}
	w.Function.Name, w.Function.Arguments = c.Name, c.Arguments
	return w
}

// wholeMessage is a non-streamed completion's message.
func (r Reply) wholeMessage(content any) map[string]any {
	m := map[string]any{"role": "assistant", "content": content, "refusal": nil, "annotations": []any{}}
	if len(r.ToolCalls) > 0 {
		var calls []wireCall
		for i, c := range r.ToolCalls {
			calls = append(calls, whole(i, c, false))
		}
		m["tool_calls"] = calls
	}
	return m
}

// toolFrames are the stream frames of the reply's calls; head opens a chunk up to its delta, tail
// is what follows the choices (usage null or nothing).
func (r Reply) toolFrames(head, tail string) []string {
	frame := func(calls ...wireCall) string {
		d, _ := json.Marshal(map[string]any{"tool_calls": calls})
		return head + string(d) + `,"logprobs":null,"finish_reason":null}]` + tail + "}\n\n"
	}
	var out []string
	switch r.ToolWire {
	case WireWhole:
		var calls []wireCall
		for i, c := range r.ToolCalls {
			calls = append(calls, whole(i, c, true))
		}
		if len(calls) > 0 {
			out = append(out, frame(calls...))
		}
	case WireNoIndex:
		for i, c := range r.ToolCalls {
			out = append(out, frame(whole(i, c, false)))
		}
	default:
		for _, p := range r.deltaOrder() {
			out = append(out, frame(p))
		}
	}
	return out
}

// deltaOrder is the calls as OpenAI streams them: per call its id and name, then its arguments in
// pieces of 5 bytes; one call after the other, or interleaved (WireInterleaved).
func (r Reply) deltaOrder() []wireCall {
	pieces := make([][]wireCall, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		first := whole(i, c, true)
		first.Function.Arguments = ""
		pieces[i] = append(pieces[i], first)
		for _, p := range cut(c.Arguments, 5) {
			w := wireCall{Index: &i}
			w.Function.Arguments = p
			pieces[i] = append(pieces[i], w)
		}
	}
	var out []wireCall
	if r.ToolWire != WireInterleaved {
		for _, p := range pieces {
			out = append(out, p...)
		}
		return out
	}
	for k := 0; len(out) < countAll(pieces); k++ {
		for _, p := range pieces {
			if k < len(p) {
				out = append(out, p[k])
			}
		}
	}
	return out
}

func countAll(pieces [][]wireCall) int {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	return n
}

// cut splits s into pieces of n bytes (the last shorter), never inside a UTF-8 sequence.
func cut(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && s[k]&0xC0 == 0x80 {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// String describes a call (for test failure messages).
func (c ToolCall) String() string { return fmt.Sprintf("%s(%s)#%s", c.Name, c.Arguments, c.ID) }
