package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Tiny but real-looking image heads: enough for format detection, which reads magic bytes.
var (
	pngBytes  = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{7}, 64)...)
	jpegBytes = append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), bytes.Repeat([]byte{7}, 64)...)
	webpBytes = append([]byte("RIFF\x24\x00\x00\x00WEBPVP8 "), bytes.Repeat([]byte{7}, 64)...)
	gifBytes  = append([]byte("GIF89a\x01\x00\x01\x00"), bytes.Repeat([]byte{7}, 64)...)
)

// imagesResponse is an ImagesResponse body as GPT image models send it (openai-wire.md §2.3).
func imagesResponse(t *testing.T, item map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"created": 1713833628, "data": []any{item}, "output_format": "png", "size": "1024x1024",
		"quality": "high", "usage": map[string]any{"total_tokens": 100, "input_tokens": 50, "output_tokens": 50,
			"input_tokens_details": map[string]any{"text_tokens": 10, "image_tokens": 40}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := validateJSON(t, "ImagesResponse", b); err != nil {
		t.Fatalf("test response is not a valid ImagesResponse: %v", err)
	}
	return b
}

func TestImageFormats(t *testing.T) {
	for _, tc := range []struct {
		name         string
		img          []byte
		format, mime string
	}{
		{"png", pngBytes, "png", "image/png"},
		{"jpeg", jpegBytes, "jpeg", "image/jpeg"},
		{"webp", webpBytes, "webp", "image/webp"},
		{"gif", gifBytes, "gif", "image/gif"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := imagesResponse(t, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(tc.img), "revised_prompt": "a calm otter"})
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Write(body)
			})
			c, _ := newTestClient(t, srv.URL, nil)
			img, err := c.Image(t.Context(), ImageRequest{Prompt: "an otter"})
			if err != nil {
				t.Fatal(err)
			}
			want := &Image{Data: tc.img, Format: tc.format, MIMEType: tc.mime, RevisedPrompt: "a calm otter"}
			if !reflect.DeepEqual(img, want) {
				t.Errorf("got %+v\nwant %+v", img, want)
			}
		})
	}
}

func TestImageRequestShape(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options map[string]any
		req     ImageRequest
		want    map[string]any
	}{
		{"minimal", nil, ImageRequest{Prompt: "an otter"},
			map[string]any{"model": "gpt-image-test", "prompt": "an otter"}},
		{"options and user", map[string]any{"size": "1024x1024", "quality": "high", "prompt": "ignored", "model": "ignored"},
			ImageRequest{Model: "gpt-image-2", Prompt: "an otter", User: "5f2b-hash"},
			map[string]any{"model": "gpt-image-2", "prompt": "an otter", "size": "1024x1024", "quality": "high", "user": "5f2b-hash"}},
		{"legacy fields only when configured", map[string]any{"response_format": "b64_json", "style": "vivid"}, ImageRequest{Prompt: "x"},
			map[string]any{"model": "gpt-image-test", "prompt": "x", "response_format": "b64_json", "style": "vivid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := imagesResponse(t, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(pngBytes)})
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.ImageOptions = tc.options })
			if _, err := c.Image(t.Context(), tc.req); err != nil {
				t.Fatal(err)
			}
			got := srv.got()[0]
			if got.Path != "/v1/images/generations" || !reflect.DeepEqual(got.Body, tc.want) {
				t.Errorf("%s %v\nwant %v", got.Path, got.Body, tc.want)
			}
		})
	}
}

func TestImageURL(t *testing.T) {
	var auth atomic.Value
	auth.Store("unset")
	var srv *fakeServer
	srv = newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/generated-images/b64abc.png": // LocalAI's url answer
			auth.Store(r.Header.Get("Authorization"))
			w.Header().Set("Content-Type", "image/png")
			w.Write(pngBytes)
		case "/generated-images/missing.png":
			http.NotFound(w, r)
		default:
			var req struct{ Prompt string }
			json.Unmarshal(must(r), &req)
			w.Header().Set("Content-Type", "application/json")
			w.Write(imagesResponse(t, map[string]any{"embedding": nil, "index": 0, "url": srv.URL + "/generated-images/" + req.Prompt}))
		}
	})
	c, _ := newTestClient(t, srv.URL, nil)
	img, err := c.Image(t.Context(), ImageRequest{Prompt: "b64abc.png"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img.Data, pngBytes) || img.Format != "png" {
		t.Errorf("got %+v", img)
	}
	if got := auth.Load(); got != "" {
		t.Errorf("the download sent Authorization %q: the key must not go to image hosts", got)
	}
	_, err = c.Image(t.Context(), ImageRequest{Prompt: "missing.png"})
	if e, ok := err.(*Error); !ok || e.Status != 404 || !strings.Contains(e.Message, "image download: 404") {
		t.Errorf("missing image: %v", err)
	}
}

func TestImageFailures(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	big := append(append([]byte{}, pngBytes...), make([]byte, 4<<10)...)
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		kind     Kind
		message  string
		requests int
	}{
		{"no image", 200, `{"created":1,"data":[]}`, KindInvalid, "no image in the response", 1},
		{"item without data", 200, `{"created":1,"data":[{"revised_prompt":"x"}]}`, KindInvalid, "no image in the response", 1},
		{"null body", 200, `null`, KindInvalid, "no image in the response", 1},
		{"corrupt base64", 200, `{"created":1,"data":[{"b64_json":"iVBORw0KGgo%%%%"}]}`, KindInvalid, "the image's base64 is corrupt", 1},
		{"not an image", 200, `{"created":1,"data":[{"b64_json":"` + b64([]byte("<svg xmlns='http://www.w3.org/2000/svg'/>")) + `"}]}`,
			KindInvalid, "the service sent 41 bytes that is not a PNG, JPEG, WebP or GIF image", 1},
		{"oversize base64", 200, `{"created":1,"data":[{"b64_json":"` + b64(big) + `"}]}`, KindInvalid, "the image is larger than 4.0 KiB", 1},
		{"oversize body", 200, `{"created":1,"data":[{"b64_json":"` + strings.Repeat("A", 2<<20) + `"}]}`, KindInvalid, "the image response is larger than 1.0 MiB", 1},
		{"ftp url", 200, `{"created":1,"data":[{"url":"ftp://example.com/x.png"}]}`, KindInvalid, "the image URL is not an http(s) URL", 1},
		{"moderation_blocked", 400, string(readFixture(t, "openai_moderation_blocked_400.json")), KindContentPolicy,
			"Your request was rejected by the safety system. If you believe this is an error, contact us at help.openai.com and include the request ID req_img1.", 1},
		{"retired model", 404, `{"error":{"message":"The model ` + "`dall-e-3`" + ` has been deprecated","type":"invalid_request_error","param":null,"code":"model_not_found"}}`,
			KindBadRequest, "The model `dall-e-3` has been deprecated", 1},
		{"error in a 200", 200, `{"error":{"message":"Image generation failed","code":500}}`, KindServer, "Image generation failed", 1},
		{"gateway timeout not retried (the image may be billed)", 504, "", KindServer, "gateway timeout", 1},
		{"500s are retried", 500, `{"error":{"message":"busy","type":"server_error"}}`, KindServer, "busy", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			})
			c, _ := newTestClient(t, srv.URL, func(c *Config) { c.MaxImageBytes = 4 << 10 })
			img, err := c.Image(t.Context(), ImageRequest{Prompt: "an otter"})
			e, ok := err.(*Error)
			if img != nil || !ok {
				t.Fatalf("got %v, %v; want an *Error", img, err)
			}
			checkNoKey(t, e)
			if e.Kind != tc.kind || e.Message != tc.message {
				t.Errorf("got %q %q, want %q %q", e.Kind, e.Message, tc.kind, tc.message)
			}
			if n := len(srv.got()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

// TestImageDownloadFailures: an images response's url points at a blob store that gets no API
// key (dall-e's Azure blob SAS URLs, S3 presigned URLs, LocalAI's own files), so its 401 and 403
// are not about the key: Azure answers an expired SAS URL with 403 AuthenticationFailed "Signed
// expiry time …", S3 one with 403 AccessDenied "Request has expired", and a cleaned-up file is 404
// or 410. The user must not be told the bot's API key was rejected. 429 and 5xx are the host being
// busy. The download is made once whatever the answer.
func TestImageDownloadFailures(t *testing.T) {
	const sasExpired = `<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code>` +
		`<Message>Server failed to authenticate the request. Signed expiry time [Mon, 01 Jan 2024 00:00:00 GMT] must be after signed start time</Message></Error>`
	for _, tc := range []struct {
		status  int
		body    string
		kind    Kind
		message string
	}{
		{401, "", KindInvalid, "image download: 401 Unauthorized (the image URL may have expired)"},
		{403, sasExpired, KindInvalid, "image download: 403 Forbidden (the image URL may have expired)"},
		{404, "", KindInvalid, "image download: 404 Not Found (the image URL may have expired)"},
		{410, "", KindInvalid, "image download: 410 Gone (the image URL may have expired)"},
		{400, "", KindInvalid, "image download: 400 Bad Request"},
		{408, "", KindServer, "image download: 408 Request Timeout"},
		{429, "", KindServer, "image download: 429 Too Many Requests"},
		{503, "", KindServer, "image download: 503 Service Unavailable"},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			var srv *fakeServer
			srv = newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet { // the image host
					w.Header().Set("Content-Type", "application/xml")
					w.WriteHeader(tc.status)
					w.Write([]byte(tc.body))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"created":1,"data":[{"url":"` + srv.URL + `/private/img.png?se=2024-01-01&sig=abc"}]}`))
			})
			c, waits := newTestClient(t, srv.URL, nil)
			_, err := c.Image(t.Context(), ImageRequest{Prompt: "an otter"})
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("got %v, want an *Error", err)
			}
			if e.Kind != tc.kind || e.Status != tc.status || e.Message != tc.message {
				t.Errorf("got %q %d %q\nwant %q %d %q", e.Kind, e.Status, e.Message, tc.kind, tc.status, tc.message)
			}
			if n := len(srv.got()); n != 2 || len(waits.all()) != 0 {
				t.Errorf("%d requests, %d retries; want the generation and one download", n, len(waits.all()))
			}
		})
	}
}

func TestImageOversizeDownload(t *testing.T) {
	var srv *fakeServer
	srv = newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Write(pngBytes)
			w.Write(make([]byte, 8<<10))
			return
		}
		w.Write([]byte(`{"created":1,"data":[{"url":"` + srv.URL + `/big.png"}]}`))
	})
	c, _ := newTestClient(t, srv.URL, func(c *Config) { c.MaxImageBytes = 4 << 10 })
	_, err := c.Image(t.Context(), ImageRequest{Prompt: "an otter"})
	if KindOf(err) != KindInvalid || !strings.Contains(err.Error(), "larger than 4.0 KiB") {
		t.Errorf("got %v", err)
	}
}

// TestImageTimeout: the whole call is bounded by ImageTimeout and never retried after it.
func TestImageTimeout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stalls string // the method of the request the server does not answer: the generation's or the download's
	}{
		{"generation", http.MethodPost},
		{"download", http.MethodGet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var srv *fakeServer
			srv = newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == tc.stalls {
					select {
					case <-r.Context().Done():
					case <-time.After(5 * time.Second):
					}
					return
				}
				w.Write([]byte(`{"created":1,"data":[{"url":"` + srv.URL + `/slow.png"}]}`))
			})
			c, waits := newTestClient(t, srv.URL, func(c *Config) { c.ImageTimeout = 150 * time.Millisecond })
			start := time.Now()
			_, err := c.Image(t.Context(), ImageRequest{Prompt: "an otter"})
			if KindOf(err) != KindTimeout {
				t.Errorf("got %v, want a timeout", err)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("took %v", d)
			}
			posts := slices.DeleteFunc(srv.got(), func(r recorded) bool { return r.Path != "/v1/images/generations" })
			if len(posts) != 1 || len(waits.all()) != 0 {
				t.Errorf("%d generation requests, %d retries: a timed-out image must not be retried", len(posts), len(waits.all()))
			}
		})
	}
}

// TestDecodeImageWrappedBase64: base64 in lines, as MIME encoders and Python's
// base64.encodebytes write it (76 characters a line, padded, a line break after the last), which
// a compatible server that encodes with Python sends in b64_json as it is.
func TestDecodeImageWrappedBase64(t *testing.T) {
	wrap := func(enc *base64.Encoding, eol string) string {
		raw := enc.EncodeToString(pngBytes) // 80 bytes: "==" at the end when padded
		var b strings.Builder
		for i := 0; i < len(raw); i += 76 {
			b.WriteString(raw[i:min(i+76, len(raw))] + eol)
		}
		return b.String()
	}
	c, _ := newTestClient(t, "http://127.0.0.1:1", nil)
	for _, s := range []string{
		wrap(base64.StdEncoding, "\n"),   // base64.encodebytes
		wrap(base64.StdEncoding, "\r\n"), // MIME
		wrap(base64.RawStdEncoding, "\n"),
		" " + base64.StdEncoding.EncodeToString(pngBytes) + " \n",
	} {
		got, err := c.decodeImage(s)
		if err != nil || !bytes.Equal(got, pngBytes) {
			t.Errorf("decodeImage(%q) = %v", s, err)
		}
	}
}

func TestDecodeImageVariants(t *testing.T) {
	c, _ := newTestClient(t, "http://127.0.0.1:1", nil)
	for _, s := range []string{
		base64.StdEncoding.EncodeToString(pngBytes),
		base64.RawStdEncoding.EncodeToString(pngBytes),
		"data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes),
	} {
		got, err := c.decodeImage(s)
		if err != nil || !bytes.Equal(got, pngBytes) {
			t.Errorf("decodeImage(%.30q…) = %v", s, err)
		}
	}
}

// pipeTransport answers every request with 200 and a JSON body the test writes through a pipe,
// noting when the client starts reading each body.
type pipeTransport struct {
	mu     sync.Mutex
	bodies []*pipedBody
}

type pipedBody struct {
	*io.PipeReader
	w    *io.PipeWriter
	read atomic.Bool // the client has started reading it
	done bool        // the test has written it whole (test goroutine only)
}

func (b *pipedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.PipeReader.Read(p)
}

func (t *pipeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	context.AfterFunc(r.Context(), func() { pr.CloseWithError(context.Cause(r.Context())) }) // as net/http ends a cancelled body
	b := &pipedBody{PipeReader: pr, w: pw}
	t.mu.Lock()
	t.bodies = append(t.bodies, b)
	t.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: b, ContentLength: -1, Request: r}, nil
}

// reading returns the bodies the client reads and the test has not finished.
func (t *pipeTransport) reading() []*pipedBody {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*pipedBody
	for _, b := range t.bodies {
		if b.read.Load() && !b.done {
			out = append(out, b)
		}
	}
	return out
}

// imageJobs runs n Image calls in goroutines; their results come on the channel returned.
func imageJobs(t *testing.T, c *Client, n int) <-chan imageResult {
	start := time.Now()
	res := make(chan imageResult, n)
	for range n {
		go func() {
			img, err := c.Image(t.Context(), ImageRequest{Prompt: "an otter"})
			if err == nil && !bytes.Equal(img.Data, pngBytes) {
				err = errors.New("wrong picture")
			}
			res <- imageResult{err, time.Since(start)}
		}()
	}
	return res
}

type imageResult struct {
	err error
	at  time.Duration // since the jobs started
}

// TestImageResponsesHeldAtOnce: image responses (each about three times its picture in memory
// until decoded) are read and decoded at most imageBodiesAtOnce at a time; the others wait for
// a slot, and every job gets its picture.
func TestImageResponsesHeldAtOnce(t *testing.T) {
	body := imagesResponse(t, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(pngBytes)})
	synctest.Test(t, func(t *testing.T) {
		tr := &pipeTransport{}
		c, _ := newTestClient(t, "http://model.test", func(c *Config) { c.HTTPClient = &http.Client{Transport: tr} })
		var holding atomic.Int32
		release := make(chan struct{})
		c.imageHeld = func() {
			holding.Add(1)
			<-release
			holding.Add(-1)
		}
		const jobs = imageBodiesAtOnce + 2
		res := imageJobs(t, c, jobs)
		synctest.Wait()
		for _, b := range tr.reading() { // every response comes whole at once
			go func() { b.w.Write(body); b.w.Close() }()
		}
		for left := jobs; left > 0; left-- {
			synctest.Wait()
			if got, want := int(holding.Load()), min(imageBodiesAtOnce, left); got != want {
				t.Fatalf("%d jobs left: %d responses held at once, want %d", left, got, want)
			}
			release <- struct{}{}
			if r := <-res; r.err != nil {
				t.Fatalf("Image: %v", r.err)
			}
		}
	})
}

// TestImageStalledResponsesGiveTheirSlotsUp: a response whose body stops coming gives its slot up
// after imageBodyIdle with a timeout, so a picture that is ready waits seconds behind stalled
// ones, not the whole image timeout: without that bound, two stalled responses (imageBodiesAtOnce)
// would make every other job wait out the image timeout.
func TestImageStalledResponsesGiveTheirSlotsUp(t *testing.T) {
	body := imagesResponse(t, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(pngBytes)})
	synctest.Test(t, func(t *testing.T) {
		tr := &pipeTransport{}
		c, _ := newTestClient(t, "http://model.test", func(c *Config) { c.HTTPClient = &http.Client{Transport: tr} })
		const jobs = imageBodiesAtOnce + 1
		res := imageJobs(t, c, jobs)
		synctest.Wait()
		r := tr.reading()
		if len(r) != jobs {
			t.Fatalf("%d responses waited for, want %d", len(r), jobs)
		}
		for _, b := range r[:imageBodiesAtOnce] { // these send their first byte, take the slots, then stall
			go b.w.Write(body[:1])
		}
		synctest.Wait()
		go func() { r[jobs-1].w.Write(body); r[jobs-1].w.Close() }() // ready, behind them
		pictures, stalls := 0, 0
		for range jobs { // all at imageBodyIdle: the stalled ones give up, then the ready one is read
			got := <-res
			switch {
			case got.at != imageBodyIdle:
				t.Errorf("a job ended after %v (%v), want after %v", got.at, got.err, imageBodyIdle)
			case got.err == nil:
				pictures++
			case KindOf(got.err) == KindTimeout && strings.Contains(got.err.Error(), "the image response stopped coming for 10s"):
				stalls++
			default:
				t.Errorf("a job failed with %v", got.err)
			}
		}
		if pictures != 1 || stalls != imageBodiesAtOnce {
			t.Errorf("%d pictures and %d stalls, want 1 and %d", pictures, stalls, imageBodiesAtOnce)
		}
	})
}

// TestImageBodyAfterAWait: a server that answers 200 at once and sends the body when the picture
// is ready, padding with white space meanwhile (as some gateways do), gets its picture however
// long that takes within the image timeout: the wait for the body's first byte takes no slot and
// has no idle bound.
func TestImageBodyAfterAWait(t *testing.T) {
	body := imagesResponse(t, map[string]any{"b64_json": base64.StdEncoding.EncodeToString(pngBytes)})
	synctest.Test(t, func(t *testing.T) {
		tr := &pipeTransport{}
		c, _ := newTestClient(t, "http://model.test", func(c *Config) { c.HTTPClient = &http.Client{Transport: tr} })
		res := imageJobs(t, c, 1)
		synctest.Wait()
		r := tr.reading()
		go func() {
			for range 4 {
				time.Sleep(15 * time.Second) // generating
				r[0].w.Write([]byte(" \n"))
			}
			r[0].w.Write(body)
			r[0].w.Close()
		}()
		if got := <-res; got.err != nil || got.at != time.Minute {
			t.Errorf("Image: %v after %v, want the picture after 1m", got.err, got.at)
		}
	})
}
