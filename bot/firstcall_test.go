package bot

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
)

// slowFirst is the network behind FirstCalls: the first call of each path waits until release is
// closed and is then answered by first; every other call is answered at once with ok:true.
type slowFirst struct {
	release chan struct{}
	first   func(*http.Request) (*http.Response, error)

	mu   sync.Mutex
	seen map[string]bool
	sent []string // paths, in the order they were sent
}

func newSlowFirst(first func(*http.Request) (*http.Response, error)) *slowFirst {
	return &slowFirst{release: make(chan struct{}), first: first, seen: map[string]bool{}}
}

func (s *slowFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	s.mu.Lock()
	first := !s.seen[r.URL.Path]
	s.seen[r.URL.Path] = true
	s.sent = append(s.sent, r.URL.Path)
	s.mu.Unlock()
	if first {
		<-s.release
		return s.first(r)
	}
	return answer(r, http.StatusOK, `{"ok":true,"channel":"C1","ts":"1.000002"}`, ""), nil
}

func (s *slowFirst) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

func answer(r *http.Request, status int, body, retryAfter string) *http.Response {
	h := http.Header{"Content-Type": {"application/json"}}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}
}

// TestFirstCallsSendTheFirstCallAlone: while the first chat.postMessage is out, five more wait. When
// Slack answers the first with a 429, the five get the same 429 (slack-go reads it as a
// RateLimitedError) and Slack sees one call; when it answers 200 or the call fails, the five are
// sent after it.
func TestFirstCallsSendTheFirstCallAlone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(*http.Request) (*http.Response, error)
		sent  int           // calls that reached Slack
		err   time.Duration // the Retry-After the five get (0: they succeed)
	}{
		{"429", func(r *http.Request) (*http.Response, error) {
			return answer(r, http.StatusTooManyRequests, `{"ok":false,"error":"ratelimited"}`, "2"), nil
		}, 1, 2 * time.Second},
		{"ok", func(r *http.Request) (*http.Response, error) {
			return answer(r, http.StatusOK, `{"ok":true,"channel":"C1","ts":"1.000001"}`, ""), nil
		}, 6, 0},
		{"network error", func(*http.Request) (*http.Response, error) {
			return nil, errors.New("connection reset")
		}, 6, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				net := newSlowFirst(tc.first)
				api := slack.New("xoxb-test", slack.OptionAPIURL("http://slack.test/api/"),
					slack.OptionHTTPClient(&http.Client{Transport: NewFirstCalls(net)}))
				post := func() error {
					_, _, err := api.PostMessageContext(t.Context(), "C1", slack.MsgOptionText("hi", false))
					return err
				}
				go func() { _ = post() }() // the first
				synctest.Wait()
				errs := make([]error, 5)
				var wg sync.WaitGroup
				for i := range errs {
					wg.Go(func() { errs[i] = post() })
				}
				synctest.Wait()
				if got := net.count(); got != 1 {
					t.Fatalf("%d calls sent while the first was out, want 1", got)
				}
				close(net.release)
				wg.Wait()
				for i, err := range errs {
					var rl *slack.RateLimitedError
					switch {
					case tc.err == 0 && err != nil:
						t.Errorf("call %d: %v", i, err)
					case tc.err != 0 && (!errors.As(err, &rl) || rl.RetryAfter != tc.err):
						t.Errorf("call %d: %v, want a RateLimitedError of %v", i, err, tc.err)
					}
				}
				if got := net.count(); got != tc.sent {
					t.Errorf("%d calls reached Slack, want %d", got, tc.sent)
				}
				time.Sleep(2 * time.Second)
				if err := post(); err != nil { // later calls go straight through
					t.Errorf("a call after the first: %v", err)
				}
			})
		})
	}
}

// TestFirstCallsHoldOnlyTheSameMethod: other methods, and requests that are not Web API calls (an
// upload), go while a method's first call is out; a held call whose context ends returns at once.
func TestFirstCallsHoldOnlyTheSameMethod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newSlowFirst(func(r *http.Request) (*http.Response, error) {
			return answer(r, http.StatusOK, `{"ok":true}`, ""), nil
		})
		client := &http.Client{Transport: NewFirstCalls(net)}
		call := func(ctx context.Context, url string) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("token=xoxb-test"))
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		go func() { _ = call(t.Context(), "http://slack.test/api/chat.update") }()
		synctest.Wait()
		// users.info's first call and an upload are sent while chat.update's first is out (the fake
		// network holds their answers too, until release closes).
		for _, url := range []string{"http://slack.test/api/users.info", "http://files.test/upload/v1/abc"} {
			go func() { _ = call(t.Context(), url) }()
		}
		synctest.Wait()
		if got := net.count(); got != 3 {
			t.Fatalf("%d calls sent, want 3 (one per path)", got)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- call(ctx, "http://slack.test/api/chat.update") }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("held call after its context ended: %v, want context.Canceled", err)
		}
		if got := net.count(); got != 3 {
			t.Errorf("%d calls sent, want 3: the cancelled one was held, then dropped", got)
		}
		close(net.release)
	})
}
