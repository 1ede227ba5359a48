package fakellm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
)

const waitLimit = 10 * time.Second

func newServer(t *testing.T) *fakellm.Server {
	t.Helper()
	srv := fakellm.New()
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, ctx context.Context, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sse reads data payloads (comments skipped) until EOF or error, and counts comments.
func sse(r io.Reader) (data []string, comments int, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":"):
			comments++
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	return data, comments, sc.Err()
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

const streamBody = `{"model":"gpt-test","stream":true,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`

func TestStreamShapesAndRecords(t *testing.T) {
	srv := newServer(t)
	srv.SetChat(func(req fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Tokens("Hel", "lo", " world").Paced(20*time.Millisecond, 5*time.Millisecond)
	})
	resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, streamBody)
	if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, "text/event-stream") {
		t.Errorf("content type = %q", got)
	}
	data, _, err := sse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 6 || data[5] != "[DONE]" {
		t.Fatalf("events = %q, want role, 3 tokens, finish, [DONE]", data)
	}
	var text strings.Builder
	var id string
	for i, d := range data[:5] {
		var c chunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		if c.Object != "chat.completion.chunk" || c.Model != "gpt-test" || len(c.Choices) != 1 {
			t.Errorf("chunk %d = %s", i, d)
		}
		if id == "" {
			id = c.ID
		} else if c.ID != id {
			t.Errorf("chunk %d id %q, want %q", i, c.ID, id)
		}
		if c.Usage != nil {
			t.Errorf("usage without include_usage: %s", d)
		}
		if c.Choices[0].Delta.Content != nil {
			text.WriteString(*c.Choices[0].Delta.Content)
		}
		fr := c.Choices[0].FinishReason
		if (i == 4) != (fr != nil) || (fr != nil && *fr != "stop") {
			t.Errorf("chunk %d finish_reason = %v", i, fr)
		}
	}
	if got := text.String(); got != "Hello world" {
		t.Errorf("text = %q", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d", len(reqs))
	}
	r := reqs[0]
	if !r.Finished || r.ClientGone || len(r.Tokens) != 3 || r.Status != 200 {
		t.Errorf("record = %+v", r)
	}
	if r.Tokens[0].Time.Sub(r.Time) < 20*time.Millisecond || !r.Tokens[2].Time.After(r.Tokens[1].Time) {
		t.Errorf("token times = %+v after %v", r.Tokens, r.Time)
	}
	if c := r.Chat; c == nil || c.Model != "gpt-test" || len(c.Messages) != 2 || c.Messages[0].Role != "system" || c.Messages[1].Content != "hi" || c.Temperature != nil {
		t.Errorf("decoded request = %+v", r.Chat)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+fakellm.DefaultAPIKey {
		t.Errorf("recorded Authorization = %q", got)
	}
}

func TestUsageChunkAndTemperature(t *testing.T) {
	srv := newServer(t)
	body := `{"model":"m","stream":true,"temperature":0,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"part one"}]}]}`
	data, _, err := sse(post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, body).Body)
	if err != nil {
		t.Fatal(err)
	}
	var last chunk
	if err := json.Unmarshal([]byte(data[len(data)-2]), &last); err != nil {
		t.Fatal(err)
	}
	if len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens == 0 {
		t.Errorf("usage chunk = %s", data[len(data)-2])
	}
	if !strings.Contains(data[0], `"usage":null`) {
		t.Errorf("first chunk without usage:null: %s", data[0])
	}
	req := srv.ChatRequests()[0]
	if req.Temperature == nil || *req.Temperature != 0 || !req.Has("temperature") || !req.IncludeUsage {
		t.Errorf("temperature = %v, include_usage %v", req.Temperature, req.IncludeUsage)
	}
	if req.Messages[0].Content != "part one" {
		t.Errorf("content from parts = %q", req.Messages[0].Content)
	}
}

// TestNoUsageAndRefusedStreamOptions: a server that ignores stream_options sends no usage when
// asked; one that refuses it answers 400 naming it.
func TestNoUsageAndRefusedStreamOptions(t *testing.T) {
	srv := newServer(t)
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Reply{Tokens: []string{"a"}, NoUsage: true} })
	data, _, err := sse(post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, body).Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range data {
		if strings.Contains(d, `"usage"`) {
			t.Errorf("a chunk with usage from a server that sends none: %s", d)
		}
	}
	srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.RefuseStreamOptions() })
	resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "stream_options") {
		t.Errorf("refusal: %d %s", resp.StatusCode, b)
	}
}

func TestNonStreamCompletion(t *testing.T) {
	srv := newServer(t)
	srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Just an answer.") })
	resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, `{"model":"m","messages":[{"role":"user","content":"q"}]}`)
	var got struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role, Content string
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "chat.completion" || len(got.Choices) != 1 || got.Choices[0].Message.Content != "Just an answer." ||
		got.Choices[0].Message.Role != "assistant" || got.Choices[0].FinishReason != "stop" || got.Usage.TotalTokens == 0 {
		t.Errorf("completion = %+v", got)
	}
}

func TestAuth(t *testing.T) {
	srv := newServer(t)
	for _, key := range []string{"sk-wrong-key-123456", ""} {
		resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", key, streamBody)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), `"code":"invalid_api_key"`) {
			t.Errorf("key %q: %d %s", key, resp.StatusCode, b)
		}
		if key != "" && strings.Contains(string(b), key) {
			t.Errorf("error body repeats the key: %s", b)
		}
	}
	if got := srv.Counts().Unauthorized; got != 2 {
		t.Errorf("unauthorized = %d", got)
	}
	srv.SetAPIKey("")
	if resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", "", streamBody); resp.StatusCode != 200 {
		t.Errorf("no key required: status %d", resp.StatusCode)
	}
}

func TestHTTPErrorWithRetryAfter(t *testing.T) {
	srv := newServer(t)
	srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		r := fakellm.HTTPError(429, fakellm.APIError{Message: "Rate limit reached", Type: "requests", Code: "rate_limit_exceeded"})
		r.Header = http.Header{"Retry-After": {"2"}}
		return r
	})
	resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, streamBody)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" ||
		string(b) != `{"error":{"code":"rate_limit_exceeded","message":"Rate limit reached","param":null,"type":"requests"}}` {
		t.Errorf("got %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}

func TestMidStreamFailures(t *testing.T) {
	srv := newServer(t)
	reply := fakellm.Tokens("a", "b", "c")
	srv.SetChat(func(req fakellm.ChatRequest) fakellm.Reply {
		switch req.Messages[0].Content {
		case "error":
			return reply.ErrorAfter(1, fakellm.APIError{Message: "boom", Type: "server_error"})
		case "cut":
			return reply.CutAfter(2)
		}
		return reply
	})
	body := func(content string) string {
		return `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + content + `"}]}`
	}

	data, _, err := sse(post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, body("error")).Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 3 || data[2] != `{"error":{"code":null,"message":"boom","param":null,"type":"server_error"}}` {
		t.Errorf("error stream = %q", data)
	}

	data, _, err = sse(post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, body("cut")).Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut stream read error = %v, want unexpected EOF", err)
	}
	if len(data) != 3 || strings.Contains(strings.Join(data, ""), "finish_reason\":\"") || strings.Contains(strings.Join(data, ""), "[DONE]") {
		t.Errorf("cut stream = %q, want role + 2 tokens only", data)
	}
}

func TestStallEndsWhenClientLeaves(t *testing.T) {
	srv := newServer(t)
	srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		r := fakellm.Tokens("a", "b").StallAfter(1)
		r.KeepAlive = 10 * time.Millisecond
		return r
	})
	// Read into the stall (5 keep-alives, 50 ms and more), then leave. A fixed 150 ms deadline for the
	// whole exchange saw fewer events when the machine was busy.
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	resp := post(t, ctx, srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, streamBody)
	var data []string
	comments := 0
	for sc := bufio.NewScanner(resp.Body); comments < 5 && sc.Scan(); {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, ":"):
			comments++
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	cancel()
	if len(data) != 2 || comments == 0 {
		t.Errorf("stalled stream: %d events, %d comments; want 2 events and keep-alives", len(data), comments)
	}
	err := srv.WaitFor(ctxFor(t), func() bool { r := srv.Requests(); return len(r) == 1 && r[0].ClientGone })
	if err != nil {
		t.Fatalf("client gone not recorded: %+v", srv.Requests())
	}
}

func TestCloseEndsStalls(t *testing.T) {
	srv := fakellm.New()
	srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Tokens("a").StallAfter(0) })
	resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, streamBody)
	if err := srv.WaitFor(ctxFor(t), func() bool { return len(srv.Requests()) == 1 }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("Close blocked on a stalled stream")
	}
	_, _ = io.ReadAll(resp.Body)
}

func TestSplitAndAnswer(t *testing.T) {
	text := "Hello, world! Here's a `code` block:\n\n```go\nx := 12345678901\n```\nsupercalifragilistic done."
	pieces := fakellm.Split(text)
	if got := strings.Join(pieces, ""); got != text {
		t.Fatalf("joined = %q", got)
	}
	for _, p := range pieces {
		if len(p) == 0 || len(p) > 9 {
			t.Errorf("piece %q", p)
		}
	}
	if pieces[0] != "Hello" || pieces[1] != "," || pieces[2] != " world" {
		t.Errorf("pieces = %q", pieces[:3])
	}
	a := fakellm.Answer(400, 1)
	if n := len(fakellm.Split(a)); n < 350 || n > 700 {
		t.Errorf("Answer(400) has %d pieces", n)
	}
	if a != fakellm.Answer(400, 1) || a == fakellm.Answer(400, 2) {
		t.Error("Answer is not deterministic per seed")
	}
}

func TestImages(t *testing.T) {
	srv := newServer(t)
	want := fakellm.PNG(4, 3)
	srv.SetImage(func(req fakellm.ImageRequest) fakellm.ImageReply {
		switch req.Prompt {
		case "blocked":
			return fakellm.ModerationBlocked()
		case "url":
			return fakellm.ImageReply{Image: want, AsURL: true}
		}
		return fakellm.ImageReply{Image: want, RevisedPrompt: "a red fox"}
	})
	url := srv.URL() + "/images/generations"
	var got struct {
		Data []struct {
			B64JSON       string `json:"b64_json"`
			URL           string `json:"url"`
			RevisedPrompt string `json:"revised_prompt"`
		} `json:"data"`
	}
	resp := post(t, ctxFor(t), url, fakellm.DefaultAPIKey, `{"model":"gpt-image-1.5","prompt":"fox"}`)
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(got.Data[0].B64JSON)
	if err != nil || !bytes.Equal(b, want) || got.Data[0].RevisedPrompt != "a red fox" {
		t.Errorf("b64 image: %v, equal %v, revised %q", err, bytes.Equal(b, want), got.Data[0].RevisedPrompt)
	}
	if img, err := png.Decode(bytes.NewReader(b)); err != nil || img.Bounds().Dx() != 4 {
		t.Errorf("png: %v", err)
	}

	resp = post(t, ctxFor(t), url, fakellm.DefaultAPIKey, `{"model":"m","prompt":"url"}`)
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	dl, err := http.Get(got.Data[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Body.Close()
	if b, _ := io.ReadAll(dl.Body); !bytes.Equal(b, want) {
		t.Error("downloaded image differs")
	}

	resp = post(t, ctxFor(t), url, fakellm.DefaultAPIKey, `{"model":"m","prompt":"blocked"}`)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":"moderation_blocked"`) {
		t.Errorf("blocked: %d %s", resp.StatusCode, body)
	}
	if reqs := srv.Requests(); reqs[0].Image == nil || reqs[0].Image.Model != "gpt-image-1.5" || reqs[0].Image.Has("size") {
		t.Errorf("image request = %+v", reqs[0].Image)
	}
}

func TestSequenceHeaderDelayAndCounts(t *testing.T) {
	srv := newServer(t)
	srv.SetChat(fakellm.Sequence(fakellm.UnsupportedTemperature("0.7"), fakellm.Tokens("ok")))
	resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, streamBody)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), `"param":"temperature"`) {
		t.Errorf("first answer: %d %s", resp.StatusCode, b)
	}
	for range 2 {
		if resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, streamBody); resp.StatusCode != 200 {
			t.Errorf("later answer: %d", resp.StatusCode)
		}
	}

	srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		r := fakellm.Tokens("x")
		r.HeaderDelay = time.Minute
		return r
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(streamBody))
	req.Header.Set("Authorization", "Bearer "+fakellm.DefaultAPIKey)
	if _, err := http.DefaultClient.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("header delay: %v, want deadline exceeded", err)
	}
	err := srv.WaitFor(ctxFor(t), func() bool { c := srv.Counts(); return c.ClientGone == 1 && c.Active == 0 })
	if err != nil {
		t.Fatalf("counts = %+v", srv.Counts())
	}
	if c := srv.Counts(); c.Chat != 4 || c.Peak < 1 {
		t.Errorf("counts = %+v", c)
	}
}

func TestRawBodyAndErrorWith200(t *testing.T) {
	srv := newServer(t)
	srv.SetChat(func(req fakellm.ChatRequest) fakellm.Reply {
		if req.Stream {
			return fakellm.Reply{Raw: ": OPENROUTER PROCESSING\r\n\r\ndata:{\"choices\":[]}\r\n\r\n"}
		}
		return fakellm.Tokens("x").ErrorAfter(0, fakellm.APIError{Message: "Unexpected endpoint or method.", Type: "invalid_request_error"})
	})
	resp := post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, streamBody)
	b, _ := io.ReadAll(resp.Body)
	if string(b) != ": OPENROUTER PROCESSING\r\n\r\ndata:{\"choices\":[]}\r\n\r\n" || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("raw body = %q (%s)", b, resp.Header.Get("Content-Type"))
	}
	resp = post(t, ctxFor(t), srv.URL()+"/chat/completions", fakellm.DefaultAPIKey, `{"model":"m","messages":[{"role":"user","content":"q"}]}`)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"message":"Unexpected endpoint or method."`) {
		t.Errorf("non-stream error: %d %s", resp.StatusCode, b)
	}
}
