package main

// How the process behaves when Slack is briefly unavailable
// at start-up, and when it is stopped while starting.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// slackProxy forwards the Web API to fs, letting intercept answer some calls itself.
func slackProxy(t *testing.T, fs *fakeslack.Server, intercept func(w http.ResponseWriter, r *http.Request) bool) string {
	t.Helper()
	target, err := url.Parse(fs.URL())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if intercept(w, r) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + target.Path
}

// TestStartupSurvivesASlackBlip: Slack answers the first auth.test with a 503 (an
// incident, a proxy or DNS not ready yet in a fresh pod). The bot should retry and connect,
// as it does for apps.connections.open, not exit: an exit puts the pod into CrashLoopBackOff,
// the very restart back-off the Deployment's "no startupProbe" comment sets out to avoid.
func TestStartupSurvivesASlackBlip(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{BotToken: botToken, AppToken: appToken})
	t.Cleanup(fs.Close)
	fl := fakellm.New()
	t.Cleanup(fl.Close)
	fl.SetAPIKey(llmKey)
	var authCalls atomic.Int32
	api := slackProxy(t, fs, func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/auth.test") && authCalls.Add(1) == 1 {
			http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	env := map[string]string{
		"SLACK_BOT_TOKEN": botToken, "SLACK_APP_TOKEN": appToken, "OPENAI_API_KEY": llmKey,
		"SLACK_API_URL": api, "OPENAI_BASE_URL": fl.URL(), "LOG_FORMAT": "json", "SHUTDOWN_GRACE": "2s",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	setEnv(t, env)
	go func() { done <- run(ctx, []string{"llmbot"}, io.Discard, logs) }()

	wctx, wcancel := context.WithTimeout(context.Background(), e2eWait)
	defer wcancel()
	connected := make(chan error, 1)
	go func() { connected <- fs.WaitFor(wctx, func() bool { return fs.Connections().Current == 1 }) }()
	select {
	case err := <-done:
		t.Fatalf("run ended after one 503 from auth.test (the pod would restart): %v\n%s", err, logs.String())
	case err := <-connected:
		if err != nil {
			t.Fatalf("no Socket Mode connection after a 503 from auth.test: %v\n%s", err, logs.String())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel: %v", err)
	}
}

// TestStopDuringStartupIsClean: Kubernetes may send SIGTERM while the bot is still in
// auth.test (a rollout replaced quickly, a node drain). That is a requested stop: run should
// return nil (exit 0), not "cannot reach Slack (is SLACK_API_URL right?)" with exit status 1,
// which sends an operator to check a URL that is fine.
func TestStopDuringStartupIsClean(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{BotToken: botToken, AppToken: appToken})
	t.Cleanup(fs.Close)
	inAuth := make(chan struct{}, 1)
	release := make(chan struct{})
	api := slackProxy(t, fs, func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/auth.test") {
			select {
			case inAuth <- struct{}{}:
			default:
			}
			select { // a slow Slack: answers after the stop
			case <-r.Context().Done():
			case <-release:
			}
			return true
		}
		return false
	})
	env := map[string]string{
		"SLACK_BOT_TOKEN": botToken, "SLACK_APP_TOKEN": appToken, "OPENAI_API_KEY": llmKey,
		"SLACK_API_URL": api, "LOG_FORMAT": "json",
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	setEnv(t, env)
	go func() { done <- run(ctx, []string{"llmbot"}, io.Discard, io.Discard) }()
	select {
	case <-inAuth:
	case <-time.After(e2eWait):
		t.Fatal("auth.test never called")
	}
	cancel() // SIGTERM
	select {
	case err := <-done:
		close(release)
		if err != nil {
			t.Errorf("run stopped during start-up = %v, want nil (a clean exit 0)", err)
		}
	case <-time.After(e2eWait):
		t.Fatal("run did not return after cancel")
	}
}

// TestTokensOfTwoAppsStop: SLACK_BOT_TOKEN of one Slack app and SLACK_APP_TOKEN of another (a dev
// and a prod app mixed up). Socket Mode connects to the app-level token's app, so the bot's mentions
// go to the other app and it would run ready and silent. It stops with a message naming both apps
// (doctor says the same: TestDoctorTokensOfTwoApps), once: no reconnect fixes it.
func TestTokensOfTwoAppsStop(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{BotToken: botToken, AppToken: appToken, AppID: "A1"})
	t.Cleanup(fs.Close)
	api := slackProxy(t, fs, func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, "/bots.info") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":true,"bot":{"id":"BBOT","app_id":"A2","user_id":"UBOT","name":"llmbot"}}`))
			return true
		}
		return false
	})
	env := map[string]string{
		"SLACK_BOT_TOKEN": botToken, "SLACK_APP_TOKEN": appToken, "OPENAI_API_KEY": llmKey,
		"SLACK_API_URL": api, "LOG_FORMAT": "json", "SHUTDOWN_GRACE": "2s",
	}
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	setEnv(t, env)
	err := run(ctx, []string{"llmbot"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "app A1") || !strings.Contains(err.Error(), "app A2") {
		t.Errorf("run = %v, want a stop naming both apps", err)
	}
	if ctx.Err() != nil {
		t.Errorf("run returned only when its context ended (%v): it must stop by itself", e2eWait)
	}
	if n := fs.Connections().Total; n != 1 {
		t.Errorf("%d Socket Mode connections, want 1 (no reconnect)", n)
	}
}
