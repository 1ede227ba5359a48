package bot

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
)

// failingTransport answers every request with err, or else with an HTML page (200), counting them.
type failingTransport struct {
	err   error
	calls atomic.Int32
}

func (f *failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Content-Type": {"text/html"}},
		Body: io.NopCloser(strings.NewReader("<!doctype html><title>Welcome</title>")), Request: r}, nil
}

// TestIdentifyRetryingStopsOnPermanentTransportErrors: failures that no wait fixes (a certificate
// Slack's host does not match or nobody trusts, an HTTPS proxy refusing the bot's credentials) must
// return at once, as Slack's own refusals do: retried, the bot logs a warning every 30 s forever
// and never exits with explainAuth's message, and nobody learns the setting is wrong.
func TestIdentifyRetryingStopsOnPermanentTransportErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"certificate signed by unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}},
		{"certificate for another host", &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "slack.example"}}},
		// net/http's CONNECT failure through HTTPS_PROXY: errors.New(the status text).
		{"proxy 407", errors.New("Proxy Authentication Required")},
		// SLACK_API_URL naming a web site, not the Web API: a page where JSON was expected.
		{"a web page, not the API", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &failingTransport{err: tc.err}
				api := NewSlackAPI(slack.New("xoxb-test", slack.OptionAPIURL("https://slack.example/api/"),
					slack.OptionHTTPClient(&http.Client{Transport: tr})), nil, 0)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				var retried int
				_, err := api.IdentifyRetrying(ctx, 20*time.Second, func(error, time.Duration) { retried++ })
				if err == nil {
					t.Fatal("IdentifyRetrying succeeded")
				}
				if n := tr.calls.Load(); n != 1 || retried != 0 {
					t.Errorf("%d auth.test calls, %d retries reported in 10 minutes; want 1 call and no retry (a permanent error): %v", n, retried, err)
				}
			})
		})
	}
}

// TestIdentifyRetryingRetriesTransientErrors: a refused connection (the pod's network or a sidecar
// proxy not up yet) and a DNS server that does not answer are waited out, with growing waits.
func TestIdentifyRetryingRetriesTransientErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", Name: "slack.example", IsTimeout: true}},
		// A DNS sidecar not ready yet may say so; a typo in SLACK_API_URL then waits, with a warning.
		{"no such host", &net.DNSError{Err: "no such host", Name: "slack.example", IsNotFound: true}},
		// A clock not yet synced at boot.
		{"certificate expired", &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Reason: x509.Expired}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &failingTransport{err: tc.err}
				api := NewSlackAPI(slack.New("xoxb-test", slack.OptionAPIURL("https://slack.example/api/"),
					slack.OptionHTTPClient(&http.Client{Transport: tr})), nil, 0)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				var waits []time.Duration
				_, err := api.IdentifyRetrying(ctx, 20*time.Second, func(_ error, d time.Duration) { waits = append(waits, d) })
				if err == nil {
					t.Fatal("IdentifyRetrying succeeded")
				}
				want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
				if len(waits) < len(want) || !slices.Equal(waits[:len(want)], want) {
					t.Errorf("waits %v over 2 minutes, want them to start %v", waits, want)
				}
			})
		})
	}
}
