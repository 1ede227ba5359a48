package llm

import (
	"bytes"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
)

// TestAgainstFakeLLM drives the client against the team's fake OpenAI-compatible server
// (internal/fakellm), which the end-to-end tests of the bot use: both must agree on the
// protocol.
func TestAgainstFakeLLM(t *testing.T) {
	boom := fakellm.APIError{Message: "upstream boom", Type: "server_error"}
	for _, tc := range []struct {
		name    string
		reply   fakellm.Reply
		content string
		kind    Kind
	}{
		{"text", fakellm.Text("Hello, world!"), "Hello, world!", ""},
		{"paced with keep-alives", keepAlive(fakellm.Text("Hello").Paced(300*time.Millisecond, 10*time.Millisecond)), "Hello", ""},
		{"error event", fakellm.Tokens("Hel", "lo").ErrorAfter(1, boom), "Hel", KindServer},
		{"cut", fakellm.Tokens("Hel", "lo").CutAfter(1), "Hel", KindTruncated},
		{"stall", fakellm.Tokens("Hel", "lo").StallAfter(1), "Hel", KindTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakellm.New()
			defer srv.Close()
			srv.SetAPIKey(testKey)
			srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return tc.reply })
			c, err := New(Config{BaseURL: srv.URL(), APIKey: testKey, ChatModel: "m", IdleTimeout: 150 * time.Millisecond, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			r := collect(t, c.Stream(t.Context(), hello))
			var kind Kind
			if r.Err != nil {
				kind = r.Err.Kind
			}
			if r.Content != tc.content || kind != tc.kind {
				t.Errorf("got %s, want %q and kind %q", show(r), tc.content, tc.kind)
			}
		})
	}

	t.Run("temperature fallback", func(t *testing.T) {
		srv := fakellm.New()
		defer srv.Close()
		srv.SetAPIKey(testKey)
		srv.SetChat(func(req fakellm.ChatRequest) fakellm.Reply {
			if req.Temperature != nil {
				return fakellm.UnsupportedTemperature("0.2")
			}
			return fakellm.Text("ok")
		})
		c, _ := New(Config{BaseURL: srv.URL(), APIKey: testKey, ChatModel: "m", Temperature: ptr(0.2)})
		if comp, err := c.Complete(t.Context(), hello); err != nil || comp.Content != "ok" {
			t.Errorf("Complete = %+v, %v", comp, err)
		}
	})

	t.Run("usage", func(t *testing.T) { // fakellm, like OpenAI, sends usage only when asked
		for _, tc := range []struct {
			noUsage bool // Config.NoStreamUsage
			usage   bool // include_usage asked for, and the answer carries the usage chunk's counts
		}{{false, true}, {true, false}} {
			srv := fakellm.New()
			defer srv.Close()
			srv.SetAPIKey(testKey)
			asked := make(chan bool, 1) // one request
			srv.SetChat(func(req fakellm.ChatRequest) fakellm.Reply {
				asked <- req.IncludeUsage
				return fakellm.Text("Hello, world!")
			})
			c, _ := New(Config{BaseURL: srv.URL(), APIKey: testKey, ChatModel: "m", NoStreamUsage: tc.noUsage})
			r := collect(t, c.Stream(t.Context(), hello))
			if r.Err != nil || r.Content != "Hello, world!" {
				t.Fatalf("NoStreamUsage %v: %s", tc.noUsage, show(r))
			}
			if got := <-asked; got != tc.usage {
				t.Errorf("NoStreamUsage %v: include_usage %v", tc.noUsage, got)
			}
			u := r.Usage
			if (u != nil) != tc.usage {
				t.Errorf("NoStreamUsage %v: usage %+v, want usage: %v", tc.noUsage, u, tc.usage)
			}
			if u != nil && (u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens) {
				t.Errorf("usage %+v, want counts from the usage chunk", *u)
			}
		}
	})

	t.Run("image", func(t *testing.T) {
		for _, asURL := range []bool{false, true} {
			srv := fakellm.New()
			defer srv.Close()
			srv.SetAPIKey(testKey)
			png := fakellm.PNG(16, 16)
			srv.SetImage(func(fakellm.ImageRequest) fakellm.ImageReply {
				return fakellm.ImageReply{Image: png, AsURL: asURL, RevisedPrompt: "an otter, calm"}
			})
			c, _ := New(Config{BaseURL: srv.URL(), APIKey: testKey, ImageModel: "gpt-image-test"})
			img, err := c.Image(t.Context(), ImageRequest{Prompt: "an otter"})
			if err != nil || !bytes.Equal(img.Data, png) || img.Format != "png" || img.RevisedPrompt != "an otter, calm" {
				t.Errorf("url %v: Image = %+v, %v", asURL, img, err)
			}
		}
	})
}

// keepAlive makes r send keep-alive comments every 20 ms while it waits (its first token
// comes after twice the idle timeout of the test).
func keepAlive(r fakellm.Reply) fakellm.Reply {
	r.KeepAlive = 20 * time.Millisecond
	return r
}
