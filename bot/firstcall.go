package bot

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FirstCalls is an http.RoundTripper for the Slack Web API that sends the first call of each method
// alone. Slack's budgets may be used up when the bot starts (by its previous instance, just before a
// restart). The calls of a method made while its first call is out wait for that call's answer; when
// Slack answers it with a 429, they get the same 429 (with what is left of its Retry-After) without
// being sent, so Slack sees one 429 instead of one per call in flight, and the bot's budgets, which
// learn from every 429, pause as they would have. Every later call goes straight through.
//
// Only Web API calls (a URL path /api/<method>) are held: uploads and response_url posts are not.
type FirstCalls struct {
	next http.RoundTripper

	mu      sync.Mutex
	methods map[string]*firstCall // Slack's methods: a few dozen at most
}

// firstCall is the first call of one method.
type firstCall struct {
	done  chan struct{} // closed once it is answered (or failed)
	until time.Time     // set before done is closed: when its 429's Retry-After ends; zero if no 429
}

// NewFirstCalls wraps next (http.DefaultTransport when nil).
func NewFirstCalls(next http.RoundTripper) *FirstCalls {
	if next == nil {
		next = http.DefaultTransport
	}
	return &FirstCalls{next: next, methods: map[string]*firstCall{}}
}

// RoundTrip sends r, or, when r waited for its method's first call and that got a 429, answers 429.
func (t *FirstCalls) RoundTrip(r *http.Request) (*http.Response, error) {
	_, method, ok := strings.Cut(r.URL.Path, "/api/")
	if !ok || method == "" || strings.Contains(method, "/") {
		return t.next.RoundTrip(r)
	}
	t.mu.Lock()
	first, seen := t.methods[method]
	if !seen {
		first = &firstCall{done: make(chan struct{})}
		t.methods[method] = first
	}
	t.mu.Unlock()
	if !seen {
		resp, err := t.next.RoundTrip(r)
		if err == nil && resp.StatusCode == http.StatusTooManyRequests {
			first.until = time.Now().Add(retryAfter(resp.Header))
		}
		close(first.done)
		return resp, err
	}
	select {
	case <-first.done:
		return t.next.RoundTrip(r) // answered before this call came: nothing to wait for
	default:
	}
	select {
	case <-first.done:
	case <-r.Context().Done():
		closeBody(r)
		return nil, context.Cause(r.Context())
	}
	if left := time.Until(first.until); left > 0 {
		closeBody(r)
		return rateLimitedResponse(r, left), nil
	}
	return t.next.RoundTrip(r)
}

// retryAfter reads a 429's Retry-After (whole seconds); 1 s when it is missing or not a number.
func retryAfter(h http.Header) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return time.Second
}

// rateLimitedResponse is the 429 Slack would give r: Retry-After in whole seconds, rounded up.
func rateLimitedResponse(r *http.Request, left time.Duration) *http.Response {
	body := `{"ok":false,"error":"ratelimited"}`
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(left.Seconds()))))
	return &http.Response{
		Status:        "429 Too Many Requests",
		StatusCode:    http.StatusTooManyRequests,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}
}

// closeBody closes a request body that will not be sent (a RoundTripper must close it).
func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}
