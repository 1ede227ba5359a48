package llm

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
)

// pixel is a 1×1 PNG as a data URL.
const pixel = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPgPAAEDAQAIicLsAAAAAElFTkSuQmCC"

// TestMessageEncoding: a message is sent as a string unless it has an image, so a thread without
// pictures reaches the server byte for byte as before parts existed; with an image it is OpenAI's
// array of parts, and the whole request is valid against OpenAI's schema.
func TestMessageEncoding(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  Message
		want string
	}{
		{"plain", Message{Role: RoleUser, Content: "hi <there>"},
			`{"role":"user","content":"hi \u003cthere\u003e"}`},
		{"text parts only", Message{Role: RoleUser, Content: "look", Parts: []Part{{Type: PartText, Text: "[log.txt]\nline"}, {Type: PartText}}},
			`{"role":"user","content":"look\n\n[log.txt]\nline"}`},
		{"image", Message{Role: RoleUser, Content: "what is this?", Parts: []Part{{Type: PartImage, ImageURL: pixel, Alt: "[image: a.png]"}}},
			`{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"` + pixel + `"}}]}`},
		{"image with detail and text after", Message{Role: RoleUser, Parts: []Part{{Type: PartImage, ImageURL: pixel, Detail: "high"}, {Type: PartText, Text: "and this"}}},
			`{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + pixel + `","detail":"high"}},{"type":"text","text":"and this"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.msg)
			if err != nil || string(got) != tc.want {
				t.Fatalf("Marshal = %s, %v\nwant %s", got, err, tc.want)
			}
			body, _ := json.Marshal(chatBody{Model: "m", Messages: []Message{{Role: RoleSystem, Content: "sys"}, tc.msg}})
			if err := validateJSON(t, "CreateChatCompletionRequest", body); err != nil {
				t.Errorf("request does not match CreateChatCompletionRequest: %v\n%s", err, body)
			}
		})
	}
}

// TestImageRefusals: a model without vision refuses image parts, in each server's words and
// status. The request is sent again once with each image as its Alt text, ImagesDropped is told,
// and the next request to that model goes without images at once. KeepImages (VISION=on) returns
// the refusal instead, after one request.
func TestImageRefusals(t *testing.T) {
	for _, tc := range []struct{ fixture string }{
		{"openai_image_url_unsupported_400.json"},
		{"azure_image_url_unsupported_400.json"},
		{"litellm_image_url_unsupported_400.json"},
		{"vllm_not_multimodal_400.json"},
		{"vllm_old_not_multimodal_400.json"},
		{"ollama_no_image_input_400.json"},
		{"llamacpp_no_mmproj_500.json"},
		{"openrouter_no_image_endpoints_404.json"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			status, _ := strconv.Atoi(strings.TrimSuffix(tc.fixture[strings.LastIndexByte(tc.fixture, '_')+1:], ".json"))
			refusal := readFixture(t, tc.fixture)
			var mu sync.Mutex
			var bodies []string
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				raw := string(must(r))
				mu.Lock()
				bodies = append(bodies, raw)
				mu.Unlock()
				if strings.Contains(raw, `"image_url"`) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					w.Write(refusal)
					return
				}
				serveOK(w, r)
			})
			var learned []string
			c, _ := newTestClient(t, srv.URL, func(c *Config) {
				c.Hooks.ImagesDropped = func(model string) { learned = append(learned, model) }
			})
			msgs := []Message{
				{Role: RoleSystem, Content: "sys"},
				{Role: RoleUser, Content: "what is this?", Parts: []Part{{Type: PartImage, ImageURL: pixel, Alt: "[an image: shot.png, not shown]"}}},
			}
			dropped := 0
			req := ChatRequest{Messages: msgs, ImagesDropped: func() { dropped++ }}
			for range 2 {
				if r := collect(t, c.Stream(t.Context(), req)); r.Err != nil || r.Content != "Hello" {
					t.Fatalf("Stream: %s, want the answer", show(r))
				}
			}
			if len(bodies) != 3 {
				t.Fatalf("%d requests, want 3 (refused, without images, without images at once)", len(bodies))
			}
			for _, b := range bodies[1:] {
				if strings.Contains(b, "image_url") || !strings.Contains(b, `"content":"what is this?\n\n[an image: shot.png, not shown]"`) {
					t.Errorf("request after the refusal: %s\nwant the image as its Alt text in string content", b)
				}
			}
			if dropped != 2 || len(learned) != 1 {
				t.Errorf("ImagesDropped: request %d times, hook %v; want 2 and once", dropped, learned)
			}

			keep := ChatRequest{Messages: msgs, KeepImages: true}
			r := collect(t, c.Stream(t.Context(), keep))
			if e, ok := errors.AsType[*Error](r.Err); !ok || e.Status != status {
				t.Errorf("KeepImages: %s, want the %d refusal", show(r), status)
			}
			if len(bodies) != 4 {
				t.Errorf("KeepImages: %d requests in all, want one more (refusals are not retried)", len(bodies))
			}
		})
	}
}

// TestImageRefusalNotConfused: other 4xx errors and requests without images keep their meaning.
func TestImageRefusalNotConfused(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Error
		want bool
	}{
		{"context length", Error{Status: 400, Message: "This model's maximum context length is 8192 tokens"}, false},
		{"200", Error{Status: 200, Message: "image input is not supported"}, false},
		{"openai", Error{Status: 400, Message: "Invalid content type. image_url is only supported by certain models."}, true},
	} {
		if got := rejectsImages(&tc.e); got != tc.want {
			t.Errorf("%s: rejectsImages = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAlternatingKeepsParts: folding turns for strict templates keeps texts and images in order.
func TestAlternatingKeepsParts(t *testing.T) {
	got := alternating([]Message{
		{Role: RoleSystem, Content: "sys"},
		{Role: RoleUser, Content: "a", Parts: []Part{{Type: PartImage, ImageURL: pixel}}},
		{Role: RoleUser, Content: "b", Parts: []Part{{Type: PartText, Text: "file"}}},
	})
	b, _ := json.Marshal(got)
	want := `[{"role":"user","content":[{"type":"text","text":"sys\n\na"},{"type":"image_url","image_url":{"url":"` + pixel + `"}},{"type":"text","text":"b"},{"type":"text","text":"file"}]}]`
	if string(b) != want {
		t.Errorf("alternating = %s\nwant %s", b, want)
	}
}

// TestTextOnlyServers drives the client against the fake server's text-only models, one per
// server the fake imitates: each refusal is understood, the request goes again without the picture,
// and the second request to the model leaves it out at once.
func TestTextOnlyServers(t *testing.T) {
	for _, server := range fakellm.TextServers {
		t.Run(string(server), func(t *testing.T) {
			srv := fakellm.New()
			defer srv.Close()
			srv.SetAPIKey(testKey)
			srv.SetChat(fakellm.TextOnly(server, func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("a cat") }))
			c, err := New(Config{BaseURL: srv.URL(), APIKey: testKey, ChatModel: "m"})
			if err != nil {
				t.Fatal(err)
			}
			req := ChatRequest{Messages: []Message{{Role: RoleUser, Content: "what is it?", Parts: []Part{{Type: PartImage, ImageURL: pixel, Alt: "[not shown]"}}}}}
			for range 2 {
				if r := collect(t, c.Stream(t.Context(), req)); r.Err != nil || r.Content != "a cat" {
					t.Fatalf("Stream: %s", show(r))
				}
			}
			reqs := srv.ChatRequests()
			if len(reqs) != 3 || len(reqs[0].Images()) != 1 || len(reqs[1].Images()) != 0 || len(reqs[2].Images()) != 0 {
				t.Errorf("%d requests, want 3: with the picture, then twice without", len(reqs))
			}
		})
	}
}
