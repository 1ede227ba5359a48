package llm

import (
	"cmp"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// reached is a server that answers like the model service and records what reached it: the
// request's credentials and body, never to leave the configured server.
type reached struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // per request: its Authorization, api-key and body
}

func newReached(t *testing.T) *reached {
	t.Helper()
	r := &reached{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Get("Authorization")+" | "+req.Header.Get("Api-Key")+" | "+string(body))
		r.mu.Unlock()
		req.Body = io.NopCloser(strings.NewReader(string(body)))
		serveOK(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *reached) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// redirector answers every request to /v1/... with a redirect of status to target+path
// (target "" is itself), and serves other paths like the model service.
func redirector(t *testing.T, status int, target string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			serveOK(w, r)
			return
		}
		to := cmp.Or(target, srv.URL) + "/v2/" + strings.TrimPrefix(r.URL.Path, "/v1/")
		http.Redirect(w, r, to, status)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A request to the model service carries the API key, extra headers such as Azure's api-key,
// and the conversation. A redirect to another server (another port of the same host is
// another server) is refused, once, with a bad-request error, for every redirect status: net/http
// would drop only Authorization, and re-send the body on a 307 or 308. A redirect within the
// server is followed as before.
func TestRedirectsStayOnTheModelServer(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		otherServer bool
		wantContent string
		wantKind    Kind
	}{
		{"307 to another port", http.StatusTemporaryRedirect, true, "", KindBadRequest},
		{"308 to another port", http.StatusPermanentRedirect, true, "", KindBadRequest},
		{"301 to another port", http.StatusMovedPermanently, true, "", KindBadRequest},
		{"302 to another port", http.StatusFound, true, "", KindBadRequest},
		{"307 within the server", http.StatusTemporaryRedirect, false, "Hello", ""},
		{"308 within the server", http.StatusPermanentRedirect, false, "Hello", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := newReached(t)
			target := ""
			if tc.otherServer {
				target = other.URL
			}
			model := redirector(t, tc.status, target)
			c, w := newTestClient(t, model.URL, func(cfg *Config) {
				cfg.Headers = http.Header{"Api-Key": {"azure-secret-key-123"}}
			})
			got := collect(t, c.Stream(t.Context(), hello))
			if got.Content != tc.wantContent || got.Err != nil && got.Err.Kind != tc.wantKind || got.Err == nil && tc.wantKind != "" {
				t.Errorf("stream = %q, error %+v; want %q, kind %q", got.Content, got.Err, tc.wantContent, tc.wantKind)
			}
			if seen := other.requests(); len(seen) != 0 {
				t.Errorf("the other server got %q", seen)
			}
			if waits := w.all(); len(waits) != 0 {
				t.Errorf("retried after %v: a refused redirect is not retried", waits)
			}
		})
	}
}

// The image request is held to the model's server too; the picture an image model answers
// with a URL of is downloaded wherever its host redirects (the download carries no key).
func TestImageRedirects(t *testing.T) {
	other := newReached(t)
	model := redirector(t, http.StatusTemporaryRedirect, other.URL)
	c, _ := newTestClient(t, model.URL, nil)
	_, err := c.Image(t.Context(), ImageRequest{Prompt: "a fox"})
	if KindOf(err) != KindBadRequest {
		t.Errorf("image request redirected to another server: %v, want a bad-request error", err)
	}
	if seen := other.requests(); len(seen) != 0 {
		t.Errorf("the other server got %q", seen)
	}

	pictures := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes)
	}))
	t.Cleanup(pictures.Close)
	var srv *fakeServer
	srv = newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/signed/fox.png" {
			http.Redirect(w, r, pictures.URL+"/blob/fox.png", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(imagesResponse(t, map[string]any{"embedding": nil, "index": 0, "url": srv.URL + "/signed/fox.png"}))
	})
	c, _ = newTestClient(t, srv.URL, nil)
	img, err := c.Image(t.Context(), ImageRequest{Prompt: "a fox"})
	if err != nil || string(img.Data) != string(pngBytes) {
		t.Errorf("image downloaded through a redirect: %v", err)
	}
}

func TestSameServer(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		want     bool
	}{
		{"https://api.example.com/v1/chat", "https://api.example.com/v2/chat", true},
		{"https://api.example.com/v1/chat", "https://API.example.com:443/v2/chat", true},
		{"http://api.example.com/v1/chat", "https://api.example.com/v1/chat", true},
		{"https://api.example.com/v1/chat", "http://api.example.com/v1/chat", false},
		{"http://127.0.0.1:8000/v1/chat", "http://127.0.0.1:8001/v1/chat", false},
		{"http://127.0.0.1:8000/v1/chat", "https://127.0.0.1:8000/v1/chat", false},
		{"https://api.example.com/v1/chat", "https://evil.example.net/v1/chat", false},
		{"https://api.example.com/v1/chat", "https://example.com/v1/chat", false},
	} {
		from, _ := url.Parse(tc.from)
		to, _ := url.Parse(tc.to)
		if got := sameServer(from, to); got != tc.want {
			t.Errorf("sameServer(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
