package bot

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
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

// outcome describes a slack-go call's error as these tests compare it.
func outcome(err error) string {
	var rl *slack.RateLimitedError
	var sc slack.StatusCodeError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &rl):
		return "rate limited " + rl.RetryAfter.String()
	case errors.As(err, &sc):
		return "status " + strconv.Itoa(sc.Code)
	}
	return err.Error()
}

// TestFirstCallsSendTheFirstCallAlone: while the first chat.postMessage is out, five more wait. When
// Slack answers the first with a 429, the five get the same 429 and Slack sees one call; when it
// answers 200 or the call fails, the five are sent after it. A call made after the first was answered
// goes straight through, whatever the answer.
func TestFirstCallsSendTheFirstCallAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		first  func(*http.Request) (*http.Response, error)
		got    string // what the first call gets
		others string // what the five get
		sent   int    // calls that reached Slack
	}{
		{"429", func(r *http.Request) (*http.Response, error) {
			return answer(r, http.StatusTooManyRequests, `{"ok":false,"error":"ratelimited"}`, "2"), nil
		}, "rate limited 2s", "rate limited 2s", 1},
		{"429 without Retry-After", func(r *http.Request) (*http.Response, error) {
			return answer(r, http.StatusTooManyRequests, `{"ok":false,"error":"ratelimited"}`, ""), nil
		}, "status 429", "status 429", 1},
		{"ok", func(r *http.Request) (*http.Response, error) {
			return answer(r, http.StatusOK, `{"ok":true,"channel":"C1","ts":"1.000001"}`, ""), nil
		}, "ok", "ok", 6},
		{"network error", func(*http.Request) (*http.Response, error) {
			return nil, errors.New("connection reset")
		}, `Post "http://slack.test/api/chat.postMessage": connection reset`, "ok", 6},
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
				first := make(chan error, 1)
				go func() { first <- post() }()
				synctest.Wait()
				others := make([]error, 5)
				var wg sync.WaitGroup
				for i := range others {
					wg.Go(func() { others[i] = post() })
				}
				synctest.Wait()
				if got := net.count(); got != 1 {
					t.Fatalf("%d calls sent while the first was out, want 1", got)
				}
				close(net.release)
				wg.Wait()
				if got := outcome(<-first); got != tc.got {
					t.Errorf("first call: %s, want %s", got, tc.got)
				}
				for i, err := range others {
					if got := outcome(err); got != tc.others {
						t.Errorf("call %d: %s, want %s", i, got, tc.others)
					}
				}
				if got := net.count(); got != tc.sent {
					t.Errorf("%d calls reached Slack, want %d", got, tc.sent)
				}
				if err := post(); err != nil {
					t.Errorf("a call after the first was answered: %v", err)
				}
				if got := net.count(); got != tc.sent+1 {
					t.Errorf("the call after the first was not sent")
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

// TestFirstCallsHoldAtMostTwoSeconds: a first call that hangs holds the others up for firstCallHold,
// then they are sent.
func TestFirstCallsHoldAtMostTwoSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newSlowFirst(func(r *http.Request) (*http.Response, error) {
			return answer(r, http.StatusOK, `{"ok":true,"channel":"C1","ts":"1.000001"}`, ""), nil
		})
		api := slack.New("xoxb-test", slack.OptionAPIURL("http://slack.test/api/"),
			slack.OptionHTTPClient(&http.Client{Transport: NewFirstCalls(net)}))
		post := func() error {
			_, _, err := api.PostMessageContext(t.Context(), "C1", slack.MsgOptionText("hi", false))
			return err
		}
		go func() { _ = post() }() // hangs until release
		synctest.Wait()
		start := time.Now()
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := post(); err != nil {
					t.Errorf("held call: %v", err)
				}
			})
		}
		wg.Wait()
		if waited := time.Since(start); waited != firstCallHold {
			t.Errorf("held calls were sent after %v, want %v", waited, firstCallHold)
		}
		if got := net.count(); got != 4 {
			t.Errorf("%d calls reached Slack, want 4", got)
		}
		close(net.release)
	})
}

// recordedBody is a request body that records whether it was closed.
type recordedBody struct {
	io.Reader
	closed bool
}

func (b *recordedBody) Close() error {
	b.closed = true
	return nil
}

// TestFirstCallsCloseTheBodiesTheyDoNotSend: a held call answered with the first call's 429, and one
// whose context ends while it waits, both close their request bodies (a RoundTripper must).
func TestFirstCallsCloseTheBodiesTheyDoNotSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := newSlowFirst(func(r *http.Request) (*http.Response, error) {
			return answer(r, http.StatusTooManyRequests, `{"ok":false,"error":"ratelimited"}`, "2"), nil
		})
		calls := NewFirstCalls(net)
		request := func(ctx context.Context, b *recordedBody) *http.Request {
			r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://slack.test/api/chat.update", b)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		go func() {
			if resp, err := calls.RoundTrip(request(t.Context(), &recordedBody{Reader: strings.NewReader("n=1")})); err == nil {
				resp.Body.Close()
			}
		}()
		synctest.Wait()
		held, dropped := &recordedBody{Reader: strings.NewReader("n=2")}, &recordedBody{Reader: strings.NewReader("n=3")}
		ctx, cancel := context.WithCancel(t.Context())
		type result struct {
			resp *http.Response
			err  error
		}
		heldDone, droppedDone := make(chan result, 1), make(chan result, 1)
		go func() { resp, err := calls.RoundTrip(request(t.Context(), held)); heldDone <- result{resp, err} }()
		go func() { resp, err := calls.RoundTrip(request(ctx, dropped)); droppedDone <- result{resp, err} }()
		synctest.Wait()
		cancel()
		if r := <-droppedDone; !errors.Is(r.err, context.Canceled) || !dropped.closed {
			t.Errorf("call whose context ended: %v, body closed %v; want context.Canceled and closed", r.err, dropped.closed)
		}
		close(net.release)
		r := <-heldDone
		if r.err != nil || r.resp.StatusCode != http.StatusTooManyRequests || r.resp.Header.Get("Retry-After") != "2" || !held.closed {
			t.Errorf("held call: %v, %v, body closed %v; want the 429 with Retry-After 2 and the body closed", r.resp, r.err, held.closed)
		} else {
			r.resp.Body.Close()
		}
		if got := net.count(); got != 1 {
			t.Errorf("%d calls reached Slack, want 1", got)
		}
	})
}
