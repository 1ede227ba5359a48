package fakellm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"
	"time"
)

// ImageRequest is a decoded image generation request.
type ImageRequest struct {
	Model          string
	Prompt         string
	N              int
	Size           string
	Quality        string
	ResponseFormat string
	User           string
	// Fields are the request's top-level keys, raw.
	Fields map[string]json.RawMessage
	Raw    json.RawMessage
	Header http.Header
}

// Has reports whether the request body has the top-level key.
func (r ImageRequest) Has(key string) bool { _, ok := r.Fields[key]; return ok }

// ImageReply decides one image generation answer.
type ImageReply struct {
	Image         []byte // the image bytes; nil: PNG(16, 16)
	AsURL         bool   // answer with a url served by this server instead of b64_json
	RevisedPrompt string
	Delay         time.Duration // before answering (ends early if the client leaves)

	// Status != 0 and != 200 answers with that status, Header and Body (or Error's JSON).
	Status int
	Header http.Header
	Body   string
	Error  *APIError
}

// ModerationBlocked is the safety rejection of GPT image models (HTTP 400,
// code moderation_blocked).
func ModerationBlocked() ImageReply {
	return ImageReply{Status: http.StatusBadRequest, Body: `{"error":{"message":"Your request was rejected by the safety system. If you believe this is an error, contact us at help.openai.com and include the request ID req_fake.","type":"image_generation_user_error","param":null,"code":"moderation_blocked","moderation_details":{"moderation_stage":"input","categories":["violence"]}}}`}
}

// PNG returns a small real PNG image (a gradient) of w×h pixels.
func PNG(w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{R: uint8(x * 255 / max(w-1, 1)), G: uint8(y * 255 / max(h-1, 1)), B: 128, A: 255})
		}
	}
	var buf bytes.Buffer
	_ = png.Encode(&buf, img)
	return buf.Bytes()
}

func (s *Server) serveImage(w http.ResponseWriter, r *http.Request) {
	rec := s.begin(w, r)
	if rec == nil {
		return
	}
	var fields map[string]json.RawMessage
	var wire struct {
		Model          string `json:"model"`
		Prompt         string `json:"prompt"`
		N              int    `json:"n"`
		Size           string `json:"size"`
		Quality        string `json:"quality"`
		ResponseFormat string `json:"response_format"`
		User           string `json:"user"`
	}
	if json.Unmarshal(rec.Body, &fields) != nil || json.Unmarshal(rec.Body, &wire) != nil {
		s.respond(w, rec, http.StatusBadRequest, nil, errorBody("We could not parse the JSON body of your request.", "invalid_request_error", "", ""))
		return
	}
	if wire.Prompt == "" {
		s.respond(w, rec, http.StatusBadRequest, nil, errorBody("Missing required parameter: 'prompt'.", "invalid_request_error", "prompt", "missing_required_parameter"))
		return
	}
	req := ImageRequest{Model: wire.Model, Prompt: wire.Prompt, N: wire.N, Size: wire.Size, Quality: wire.Quality,
		ResponseFormat: wire.ResponseFormat, User: wire.User, Fields: fields, Raw: rec.Body, Header: rec.Header}
	s.update(func() { rec.Image = &req })
	s.mu.Lock()
	decide := s.image
	s.mu.Unlock()
	reply := decide(req)
	s.enter()
	defer s.leave()
	if !s.wait(r.Context(), w, nil, reply.Delay, 0) {
		s.update(func() { rec.ClientGone, rec.End = r.Context().Err() != nil, time.Now() })
		return
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		body := reply.Body
		if body == "" && reply.Error != nil {
			body = reply.Error.JSON()
		}
		s.respond(w, rec, reply.Status, reply.Header, body)
		return
	}
	data := reply.Image
	if data == nil {
		data = PNG(16, 16)
	}
	item := map[string]any{}
	if reply.AsURL {
		id := s.newID("img")
		s.update(func() { s.blobs[id] = data })
		item["url"] = s.http.URL + "/files/" + id + ".png"
	} else {
		item["b64_json"] = base64.StdEncoding.EncodeToString(data)
	}
	if reply.RevisedPrompt != "" {
		item["revised_prompt"] = reply.RevisedPrompt
	}
	n := max(req.N, 1)
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = item
	}
	b, _ := json.Marshal(map[string]any{
		"created": time.Now().Unix(), "data": items, "background": "opaque", "output_format": "png",
		"size": "1024x1024", "quality": "medium",
		"usage": map[string]any{"total_tokens": 100, "input_tokens": 50, "output_tokens": 50,
			"input_tokens_details": map[string]any{"text_tokens": 50, "image_tokens": 0}},
	})
	s.respond(w, rec, http.StatusOK, reply.Header, string(b))
}

// serveFile serves images answered by URL (GET, no auth, like a CDN).
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/files/"), ".png")
	s.mu.Lock()
	data, ok := s.blobs[id]
	s.mu.Unlock()
	if !ok || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(data)
}
