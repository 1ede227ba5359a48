package llm

import (
	"strings"
	"time"
)

// Role is the author of a chat message.
type Role string

// The roles the bot sends.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool" // a tool's result (ToolCallID says which call's)
)

// Message is one entry of a chat request's messages array. A message whose Parts are all text
// is sent as one string (Content, then each part a blank line apart), exactly as a message without
// parts; only a message with an image is sent in the array form of content parts, which servers
// without vision may refuse (see ChatRequest.KeepImages).
type Message struct {
	Role    Role
	Content string
	// Parts follow Content: a file's text, an image. Images belong in user messages only (OpenAI's
	// schema allows no image in system or assistant content).
	Parts []Part
	// ToolCalls are the calls an assistant message made; ToolCallID is the call a RoleTool message
	// answers (see tools.go).
	ToolCalls  []ToolCall
	ToolCallID string
}

// PartType is the type of a content part.
type PartType string

// The content parts the bot sends.
const (
	PartText  PartType = "text"
	PartImage PartType = "image_url"
)

// Part is one content part of a message.
type Part struct {
	Type PartType
	Text string // PartText
	// ImageURL is a PartImage's picture as a data: URL: the model service cannot fetch a
	// private file.
	ImageURL string
	// Detail is "low", "high" or "auto"; empty leaves the key out (the server's default).
	Detail string
	// Alt stands for a PartImage as text when the request goes without its images (a model
	// without vision); it is never sent with the image.
	Alt string
}

// HasImages reports whether m has an image part.
func (m Message) HasImages() bool {
	for _, p := range m.Parts {
		if p.Type == PartImage {
			return true
		}
	}
	return false
}

// Text is m's text as the string form sends it: Content and the text parts, a blank line apart
// (an image counts as its Alt).
func (m Message) Text() string {
	if len(m.Parts) == 0 {
		return m.Content
	}
	var b strings.Builder
	b.WriteString(m.Content)
	for _, p := range m.Parts {
		t := p.Text
		if p.Type == PartImage {
			t = p.Alt
		}
		if t == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(t)
	}
	return b.String()
}

// ChatRequest is one chat completion call. Model overrides Config.ChatModel when set
// (per-channel model overrides).
type ChatRequest struct {
	Model    string
	Messages []Message
	// Tools are offered to the model (nil: none). A model whose server refuses them is asked
	// without them, from then on (Hooks.ToolsDropped).
	Tools []Tool
	// KeepImages sends the images of Messages whatever the model: a refusal of them is the
	// error (VISION=on). Otherwise a model that refuses image parts is asked again once without
	// them (each image then stands as its Part.Alt), and without them from then on.
	KeepImages bool
	// ImagesDropped, when set, is called once the request has gone without the images it had,
	// because the model refused them (now or before), so the answer can say it did not see them.
	// Called in the goroutine that calls Stream or Complete. Not sent to the server.
	ImagesDropped func()
	// ToolsDropped, when set, is called when this request is the one that learned the model's
	// server refuses tools (it went without them): once per model, so the answer can say so once.
	// Called in the goroutine that calls Stream or Complete. Not sent to the server.
	ToolsDropped func()
}

// Chunk is one step of a streamed answer. Any field may be empty; a chunk may carry only
// a finish reason or only usage.
type Chunk struct {
	Content      string // answer text delta (delta.content)
	Reasoning    string // thinking text delta (delta.reasoning_content or delta.reasoning)
	Refusal      string // refusal text delta (delta.refusal)
	FinishReason string // "stop", "length", "content_filter", ... on the last choice chunk
	Usage        *Usage // usage, from the usage chunk when the provider sends one
	// ToolCalls are the model's complete tool calls, delivered once, on a chunk of their own at
	// the end of the stream (their deltas are assembled by the client).
	ToolCalls []ToolCall
}

// Usage is token accounting as reported by the provider.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	TotalTokens      int
}

// Completion is a whole (non-streamed) answer.
type Completion struct {
	Content      string
	Reasoning    string
	Refusal      string
	FinishReason string
	Usage        *Usage
	ToolCalls    []ToolCall
}

// ImageRequest is one image generation call. Model overrides Config.ImageModel when set.
type ImageRequest struct {
	Model  string
	Prompt string
	// User, when set, is sent as a safety identifier (the caller passes a hash, never a raw id).
	User string
}

// Image is a generated image, already downloaded and decoded.
type Image struct {
	Data          []byte
	Format        string // "png", "jpeg", "webp" or "gif", detected from the bytes
	MIMEType      string // "image/png", ...
	RevisedPrompt string // the provider's rewritten prompt, when it sends one
}

// Kind classifies a failure so callers can pick what to tell the user.
type Kind string

// The kinds of Error.
const (
	KindRateLimit     Kind = "rate_limit"     // 429 other than quota
	KindQuota         Kind = "quota"          // insufficient_quota, 402 credits
	KindAuth          Kind = "auth"           // 401, 403 auth/permission
	KindBadRequest    Kind = "bad_request"    // other 4xx: invalid request, context length, unknown model (404)
	KindContentPolicy Kind = "content_policy" // moderation_blocked, content_policy_violation, content_filter
	KindServer        Kind = "server"         // 5xx, error events inside a stream, errors in 200 bodies
	KindTimeout       Kind = "timeout"        // connect/header/idle timeout (a stalled stream)
	KindTruncated     Kind = "truncated"      // the stream ended without [DONE] or a finish reason
	KindConnection    Kind = "connection"     // could not connect, connection reset
	KindInvalid       Kind = "invalid"        // a 2xx answer that cannot be used: empty choices, no image, bad image
	KindCanceled      Kind = "canceled"       // the caller's context was cancelled
)

// Error is the one error type of this package: every failure of a call is an *Error.
// It never contains the API key.
type Error struct {
	Kind       Kind
	Status     int    // HTTP status; 0 when no response (connection error, timeout)
	Type       string // provider error type, e.g. "invalid_request_error"
	Code       string // provider error code, always as a string ("rate_limit_exceeded", "400")
	Param      string // provider error param, e.g. "temperature"
	Message    string // the provider's message, or a short description of what went wrong
	RequestID  string // x-request-id / X-Generation-Id when present
	RetryAfter time.Duration
	Err        error // underlying cause (network error, context error), if any
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }
