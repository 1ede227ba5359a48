package ops_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/ops"
)

// get fetches path from srv and returns the status and body.
func get(tb testing.TB, client *http.Client, url string) (int, string) {
	tb.Helper()
	resp, err := client.Get(url)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func newTestServer(t *testing.T, ready func() (bool, string), m *ops.Metrics) *httptest.Server {
	t.Helper()
	var g = m.Registry()
	hs := httptest.NewServer(ops.NewServer(":0", ready, g, zaptest.NewLogger(t)).Handler())
	t.Cleanup(hs.Close)
	return hs
}

func TestHealthzAlwaysOK(t *testing.T) {
	hs := newTestServer(t, func() (bool, string) { return false, "whatever" }, ops.NewMetrics())
	status, body := get(t, hs.Client(), hs.URL+"/healthz")
	if status != http.StatusOK || body != "ok\n" {
		t.Errorf("GET /healthz = %d %q, want 200 \"ok\\n\"", status, body)
	}
}

func TestOnlyGET(t *testing.T) {
	hs := newTestServer(t, ops.NewReadiness().Ready, ops.NewMetrics())
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := hs.Client().Post(hs.URL+path, "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST %s = %d, want 405", path, resp.StatusCode)
		}
	}
	status, _ := get(t, hs.Client(), hs.URL+"/other")
	if status != http.StatusNotFound {
		t.Errorf("GET /other = %d, want 404", status)
	}
}

// The readiness sequence of a real start: auth.test, connect, a refresh (down, up), a failure.
func TestReadyzFlips(t *testing.T) {
	r := ops.NewReadiness()
	hs := newTestServer(t, r.Ready, ops.NewMetrics())
	check := func(step string, wantStatus int, wantBody string) {
		t.Helper()
		status, body := get(t, hs.Client(), hs.URL+"/readyz")
		if status != wantStatus || !strings.HasPrefix(body, wantBody) {
			t.Errorf("%s: GET /readyz = %d %q, want %d %q...", step, status, body, wantStatus, wantBody)
		}
	}
	check("at start", 503, "not ready: Slack auth not checked yet")
	r.Auth(nil)
	check("auth good", 503, "not ready: Socket Mode not connected yet")
	r.Connection(true)
	check("connected", 200, "ready")
	r.Connection(false)
	check("disconnected", 503, "not ready: Socket Mode disconnected for ")
	r.Connection(true)
	check("reconnected", 200, "ready")
	r.Auth(errors.New("invalid_auth"))
	check("token revoked", 503, "not ready: Slack rejected the bot token")
}

func TestMetricsEndpoint(t *testing.T) {
	m := ops.NewMetrics()
	m.Busy()
	hs := newTestServer(t, ops.NewReadiness().Ready, m)
	resp, err := hs.Client().Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want the text exposition format", ct)
	}
	for _, want := range []string{
		"llmbot_busy_refusals_total 1\n",
		`llmbot_replies_total{outcome="ok"} 0`,
		"go_goroutines ",                 // Go collector
		"process_resident_memory_bytes ", // process collector
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Metrics are exposed from their own registry: nothing registered on the global default
// registry appears, and two Metrics do not collide.
func TestOwnRegistry(t *testing.T) {
	a, b := ops.NewMetrics(), ops.NewMetrics()
	a.Busy()
	if got := metricValue(t, b.Registry(), "llmbot_busy_refusals_total", nil); got != 0 {
		t.Errorf("second Metrics sees %v busy refusals, want 0", got)
	}
	if got := metricValue(t, a.Registry(), "llmbot_busy_refusals_total", nil); got != 1 {
		t.Errorf("busy refusals = %v, want 1", got)
	}
}

func TestRunServesAndShutsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	s := ops.NewServer(ln.Addr().String(), func() (bool, string) { return true, "" }, ops.NewMetrics().Registry(), zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()

	client := &http.Client{Timeout: 5 * time.Second}
	if status, _ := get(t, client, addr+"/readyz"); status != 200 {
		t.Fatalf("GET /readyz = %d, want 200", status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(ops.ShutdownTimeout + 5*time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	client.CloseIdleConnections()
	if _, err := client.Get(addr + "/healthz"); err == nil {
		t.Error("the listener still answers after shutdown")
	}
}

// A request in progress when the context ends is finished, not cut.
func TestShutdownFinishesRequestInProgress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	ready := func() (bool, string) {
		close(entered)
		<-release
		return true, ""
	}
	s := ops.NewServer("", ready, nil, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()

	type result struct {
		status int
		err    error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + ln.Addr().String() + "/readyz")
		if err != nil {
			got <- result{err: err}
			return
		}
		resp.Body.Close()
		got <- result{status: resp.StatusCode}
	}()
	<-entered
	cancel()
	time.Sleep(50 * time.Millisecond) // let Shutdown begin; the result does not depend on it
	close(release)
	if r := <-got; r.err != nil || r.status != 200 {
		t.Errorf("request in progress at shutdown: %d %v, want 200", r.status, r.err)
	}
	if err := <-done; err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
}

func TestRunCannotListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s := ops.NewServer(ln.Addr().String(), func() (bool, string) { return true, "" }, nil, zaptest.NewLogger(t))
	err = s.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "health listener") {
		t.Errorf("Run on a busy port = %v, want a health listener error", err)
	}
}

func TestRunWithoutAddress(t *testing.T) {
	err := ops.NewServer("", func() (bool, string) { return true, "" }, nil, nil).Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "HEALTH_ADDR") {
		t.Errorf("Run with no address = %v, want an error naming HEALTH_ADDR", err)
	}
}

func TestNoMetricsWithoutGatherer(t *testing.T) {
	hs := httptest.NewServer(ops.NewServer("", func() (bool, string) { return true, "" }, nil, nil).Handler())
	defer hs.Close()
	if status, _ := get(t, hs.Client(), hs.URL+"/metrics"); status != http.StatusNotFound {
		t.Errorf("GET /metrics without a gatherer = %d, want 404", status)
	}
}
