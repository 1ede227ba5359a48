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
// being sent, so Slack sees one 429 instead of one per call in flight, and the bot's budgets learn from
// each 429 as from a volley (they pause, and lower their rate once). Every later call goes straight
// through, whatever the first one's answer; a method's first call is tried once per process.
//
// chat.postMessage is also limited per channel, and Slack does not say which limit a 429 hit: posts
// waiting in other channels get the first post's 429 too, as if the workspace's budget were spent. At
// worst they wait out its Retry-After and their channels' budgets slow down for a while; the bot's
// post budgets treat every post 429 as both limits' anyway.
//
// Only Web API calls (a URL path /api/<method>, files.getUploadURLExternal among them) are held; the
// upload to the URL it returns and response_url posts are not. A call is held at most firstCallHold: a
// first call that hangs does not hold the others up.
type FirstCalls struct {
	next http.RoundTripper

	mu      sync.Mutex
	methods map[string]*firstCall // Slack's methods: a few dozen at most
}

// firstCallHold bounds how long a call waits for its method's first call (Slack answers in well under
// a second).
const firstCallHold = 2 * time.Second

// firstCall is the first call of one method. Its fields are set before done is closed.
type firstCall struct {
	done    chan struct{} // closed once it is answered (or failed)
	limited bool          // Slack answered it with a 429
	retry   string        // that 429's Retry-After header ("" when it had none)
	until   time.Time     // when that Retry-After ends (zero: none, or not a number)
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
			first.limited, first.retry = true, resp.Header.Get("Retry-After")
			if s, err := strconv.Atoi(first.retry); err == nil && s > 0 {
				first.until = time.Now().Add(time.Duration(s) * time.Second)
			}
		}
		close(first.done)
		return resp, err
	}
	select {
	case <-first.done:
		return t.next.RoundTrip(r) // answered before this call came: nothing to wait for
	default:
	}
	hold := time.NewTimer(firstCallHold)
	defer hold.Stop()
	select {
	case <-first.done:
	case <-hold.C:
		return t.next.RoundTrip(r) // the first call is slow: send this one anyway
	case <-r.Context().Done():
		closeBody(r)
		return nil, context.Cause(r.Context())
	}
	if !first.limited {
		return t.next.RoundTrip(r)
	}
	retry := first.retry // no number: the same header, for slack-go to read as Slack's
	if !first.until.IsZero() {
		left := time.Until(first.until)
		if left <= 0 {
			return t.next.RoundTrip(r) // the pause is over
		}
		retry = strconv.Itoa(int(math.Ceil(left.Seconds())))
	}
	closeBody(r)
	return rateLimitedResponse(r, retry), nil
}

// rateLimitedResponse is a 429 for r, with the given Retry-After header ("" for none).
func rateLimitedResponse(r *http.Request, retryAfter string) *http.Response {
	body := `{"ok":false,"error":"ratelimited"}`
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
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
