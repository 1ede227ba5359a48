package llm

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// wireMessage is a message whose content is a string: the form of every message without an image.
type wireMessage struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // an assistant message's calls (tools.go)
	ToolCallID string     `json:"tool_call_id,omitempty"` // a tool message's call
}

// wirePartsMessage is a message whose content is an array of parts.
type wirePartsMessage struct {
	Role    Role       `json:"role"`
	Content []wirePart `json:"content"`
}

type wirePart struct {
	Type     PartType `json:"type"`
	Text     *string  `json:"text,omitempty"`
	ImageURL *wireURL `json:"image_url,omitempty"`
}

type wireURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// MarshalJSON writes m as OpenAI's chat message: string content unless m has an image, so a
// thread without pictures reaches every server exactly as before parts existed.
func (m Message) MarshalJSON() ([]byte, error) {
	if !m.HasImages() {
		return json.Marshal(wireMessage{Role: m.Role, Content: m.Text(), ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID})
	}
	parts := make([]wirePart, 0, len(m.Parts)+1)
	if m.Content != "" {
		parts = append(parts, wirePart{Type: PartText, Text: &m.Content})
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		switch p.Type {
		case PartImage:
			parts = append(parts, wirePart{Type: PartImage, ImageURL: &wireURL{URL: p.ImageURL, Detail: p.Detail}})
		default:
			if p.Text != "" {
				parts = append(parts, wirePart{Type: PartText, Text: &p.Text})
			}
		}
	}
	return json.Marshal(wirePartsMessage{Role: m.Role, Content: parts})
}

// hasImages reports whether any of msgs has an image part.
func hasImages(msgs []Message) bool {
	return slices.ContainsFunc(msgs, Message.HasImages)
}

// withoutImages is msgs with each image part replaced by its Alt text (the request for a model
// that refused images). msgs is not modified.
func withoutImages(msgs []Message) []Message {
	out := slices.Clone(msgs)
	for i := range out {
		if !out[i].HasImages() {
			continue
		}
		parts := make([]Part, 0, len(out[i].Parts))
		for _, p := range out[i].Parts {
			if p.Type == PartImage {
				p = Part{Type: PartText, Text: p.Alt}
			}
			parts = append(parts, p)
		}
		out[i].Parts = parts
	}
	return out
}

// joinMessages appends m's content to to (alternating turns: consecutive messages of one role
// become one). Without parts the texts join a blank line apart, as before parts existed; with
// parts, m's Content becomes a text part, so the order of texts and images is kept.
func joinMessages(to *Message, m Message) {
	if len(to.Parts) == 0 && len(m.Parts) == 0 {
		to.Content += "\n\n" + m.Content
		return
	}
	parts := slices.Clip(to.Parts)
	if m.Content != "" {
		parts = append(parts, Part{Type: PartText, Text: m.Content})
	}
	to.Parts = append(parts, m.Parts...)
}

// imageRefusals are what servers say when a model without vision gets an image part:
// OpenAI and Azure ("Invalid content type. image_url is only supported by certain models.", 400,
// param messages.[i].content.[j].type), LiteLLM passing that on (code "400"), vLLM ("<model> is
// not a multimodal model", 400, flat or nested), Ollama ("this model does not support image
// input" / "does not support images", 400), llama.cpp without a projector ("image input is not
// supported - hint: ... mmproj", 500) and OpenRouter ("No endpoints found that support image
// input", 404).
var imageRefusals = []string{
	"image_url is only supported by certain models",
	"is not a multimodal model",
	"does not support image",
	"doesn't support image",
	"image input is not supported",
	"no endpoints found that support image input",
	"missing data required for image input",
	"at most 0 image(s)",
}

// rejectsImages reports a refusal of the request's image parts by a model without vision.
func rejectsImages(e *Error) bool {
	if e.Status < http.StatusBadRequest {
		return false
	}
	m := strings.ToLower(e.Message)
	for _, s := range imageRefusals {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
