package ops_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/ledger"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/route"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// metricValue returns the value of the series name{labels}: a counter's or gauge's value, a
// histogram's sample count. 0 when the series does not exist.
func metricValue(tb testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	tb.Helper()
	families, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// fakeChat streams a scripted answer; each step waits (fake time under synctest) before its chunk.
type fakeChat struct {
	steps []step
	err   error // yielded after the steps, when set
	got   []llm.ChatRequest
}

type step struct {
	wait  time.Duration
	chunk llm.Chunk
}

func (f *fakeChat) Stream(_ context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error] {
	f.got = append(f.got, req)
	return func(yield func(llm.Chunk, error) bool) {
		for _, s := range f.steps {
			time.Sleep(s.wait)
			if !yield(s.chunk, nil) {
				return
			}
		}
		if f.err != nil {
			yield(llm.Chunk{}, f.err)
		}
	}
}

// fakeImager returns an image or an error after a delay.
type fakeImager struct {
	wait time.Duration
	err  error
}

func (f *fakeImager) Image(context.Context, llm.ImageRequest) (*llm.Image, error) {
	time.Sleep(f.wait)
	if f.err != nil {
		return nil, f.err
	}
	return &llm.Image{Data: []byte("png"), Format: "png", MIMEType: "image/png"}, nil
}

// drain reads a stream to its end and returns its text and error.
func drain(seq iter.Seq2[llm.Chunk, error]) (string, error) {
	var b strings.Builder
	for c, err := range seq {
		if err != nil {
			return b.String(), err
		}
		b.WriteString(c.Content)
	}
	return b.String(), nil
}

// A scripted conversation through every hook and decorator, with fake time so the histograms are
// exact; the llmbot_ exposition is compared with a golden file (go test ./ops -update rewrites it).
func TestScriptedConversationGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ops.NewMetrics()

		// Socket Mode: connect, a refresh, back.
		m.Connection(true)
		m.Connection(false)
		m.Connection(true)

		// An app_mention and its message.im twin, acked; the twin is dropped.
		m.Acked("events_api", 2*time.Millisecond)
		m.Acked("events_api", 3*time.Millisecond)
		m.Duplicate("message")

		// The reply streams: first token after 800ms, usage at the end.
		chat := &fakeChat{steps: []step{
			{800 * time.Millisecond, llm.Chunk{Reasoning: "thinking"}},
			{200 * time.Millisecond, llm.Chunk{Content: "Hello"}},
			{300 * time.Millisecond, llm.Chunk{Content: " world", FinishReason: "stop"}},
			{0, llm.Chunk{Usage: &llm.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150}}},
		}}
		mc := m.Chat(chat, "gpt-test")
		text, err := drain(mc.Stream(t.Context(), llm.ChatRequest{}))
		if text != "Hello world" || err != nil {
			t.Fatalf("stream through the decorator = %q, %v; want the fake's answer", text, err)
		}
		m.ReplyWritten(1200*time.Millisecond, 4)
		m.Done("reply", nil, 1500*time.Millisecond)

		// A channel with a model override, whose stream stalls.
		stall := &fakeChat{
			steps: []step{{time.Second, llm.Chunk{Content: "Par"}}},
			err:   &llm.Error{Kind: llm.KindTimeout, Message: "stalled"},
		}
		if _, err := drain(m.Chat(stall, "gpt-test").Stream(t.Context(), llm.ChatRequest{Model: "gpt-big"})); llm.KindOf(err) != llm.KindTimeout {
			t.Fatalf("stalled stream error = %v, want the fake's timeout", err)
		}
		m.Retry("chat", 1, time.Second, &llm.Error{Kind: llm.KindServer, Status: 502})
		m.ReplyWritten(0, 1)
		m.Done("reply", fmt.Errorf("stream: %w", &llm.Error{Kind: llm.KindTimeout}), 91*time.Second)

		// Busy, then a Stop.
		m.Busy()
		m.Done("reply", fmt.Errorf("reply: %w", handlers.ErrStopped), 4*time.Second)

		// /imagine: one picture, one refused by the provider.
		img := m.Imager(&fakeImager{wait: 12 * time.Second})
		if _, err := img.Image(t.Context(), llm.ImageRequest{Prompt: "a cat"}); err != nil {
			t.Fatal(err)
		}
		refused := m.Imager(&fakeImager{wait: 3 * time.Second, err: &llm.Error{Kind: llm.KindContentPolicy}})
		if _, err := refused.Image(t.Context(), llm.ImageRequest{Prompt: "x"}); llm.KindOf(err) != llm.KindContentPolicy {
			t.Fatalf("refused image error = %v", err)
		}
		m.Acked("slash_commands", time.Millisecond)
		m.Done("imagine", nil, 14*time.Second)
		m.Done("imagine", fmt.Errorf("image: %w", &llm.Error{Kind: llm.KindContentPolicy}), 3*time.Second)

		// Slack calls: edits, one 429, a transport error; access control.
		m.SlackCall("chat.postMessage", 200, nil, 80*time.Millisecond)
		m.SlackCall("chat.update", 200, nil, 60*time.Millisecond)
		m.SlackCall("chat.update", 429, nil, 40*time.Millisecond)
		m.SlackCall("conversations.replies", 0, errors.New("connection reset"), time.Second)
		m.AccessDenied("mention", "channel_not_allowed")
		m.AccessDenied("imagine", "quota")
		m.TemperatureDropped("o3")

		// The ledger: an answer's reported use, a summary's estimated one, a picture, two
		// redactions, a refusal by a spent budget.
		hooks := m.LedgerHooks()
		hooks.Used("mention", ledger.Use{Model: "gpt-test", Input: 120, Output: 30})
		hooks.Used("summarize", ledger.Use{Model: "gpt-test", Input: 900, Output: 80, Estimated: true})
		hooks.Used("imagine", ledger.Use{Model: "img-test", Input: 3, Estimated: true, Images: 1, ImageBytes: 2048})
		hooks.Redacted("EMAIL", 2)
		hooks.Redacted("CARD", 1)
		hooks.Refused("dm", &ledger.OverBudget{Scope: "person", Period: ledger.Day, Limit: 100})
		// Scheduled prompts: two started, one could not, one missed while no replica ran.
		m.ScheduledRun("ok")
		m.ScheduledRun("ok")
		m.ScheduledRun("failed")
		m.ScheduledRun("skipped")

		var buf bytes.Buffer
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, f := range families {
			if strings.HasPrefix(f.GetName(), "llmbot_") {
				if err := enc.Encode(f); err != nil {
					t.Fatal(err)
				}
			}
		}
		golden(t, "conversation.golden", buf.Bytes())
	})
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./ops -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("exposition differs from %s (go test ./ops -update rewrites it):\n--- got\n%s", path, got)
	}
}

// The outcome label of a finished reply or /imagine job.
func TestOutcome(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"ok", nil, "ok"},
		{"ignored", fmt.Errorf("reply: %w", handlers.ErrIgnored), "ignored"},
		{"stopped", fmt.Errorf("reply: %w", handlers.ErrStopped), "stopped"},
		{"shutdown beats the model error it caused", errors.Join(handlers.ErrShutdown, &llm.Error{Kind: llm.KindCanceled}), "shutdown"},
		{"model kind", fmt.Errorf("stream: %w", &llm.Error{Kind: llm.KindTruncated}), "model_truncated"},
		{"unknown model kind", &llm.Error{Kind: "brand_new"}, "model_error"},
		{"model error and final write failed", errors.Join(&llm.Error{Kind: llm.KindServer}, fmt.Errorf("final write: %w", slack.SlackErrorResponse{Err: "msg_too_long"})), "model_server"},
		{"slack 429", fmt.Errorf("chat.update: %w", &slack.RateLimitedError{RetryAfter: time.Second}), "slack_rate_limited"},
		{"slack error", fmt.Errorf("chat.postMessage: %w", slack.SlackErrorResponse{Err: "not_in_channel"}), "slack_error"},
		{"slack status", fmt.Errorf("conversations.replies: %w", slack.StatusCodeError{Code: 502}), "slack_error"},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), "canceled"},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), "timeout"},
		{"other", errors.New("boom"), "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ops.Outcome(tt.err); got != tt.want {
				t.Errorf("Outcome(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestReplyWritten(t *testing.T) {
	m := ops.NewMetrics()
	m.ReplyWritten(900*time.Millisecond, 6)
	m.ReplyWritten(0, 1) // the model failed before any text
	if got := metricValue(t, m.Registry(), "llmbot_time_to_first_text_seconds", nil); got != 1 {
		t.Errorf("first-text observations = %v, want 1 (a reply without text has none)", got)
	}
	if got := metricValue(t, m.Registry(), "llmbot_edits_per_reply", nil); got != 2 {
		t.Errorf("edits-per-reply observations = %v, want 2", got)
	}
}

func TestReconnectsCountConnectionsAfterTheFirst(t *testing.T) {
	m := ops.NewMetrics()
	m.Connection(false) // connecting
	m.Connection(true)
	if got := metricValue(t, m.Registry(), "llmbot_socket_reconnects_total", nil); got != 0 {
		t.Errorf("reconnects after the first connection = %v, want 0", got)
	}
	for range 3 {
		m.Connection(false)
		m.Connection(true)
	}
	m.Connection(false)
	if got := metricValue(t, m.Registry(), "llmbot_socket_reconnects_total", nil); got != 3 {
		t.Errorf("reconnects = %v, want 3", got)
	}
	if got := metricValue(t, m.Registry(), "llmbot_socket_connected", nil); got != 0 {
		t.Errorf("connected = %v, want 0", got)
	}
}

// The Chat decorator passes the stream through unchanged and counts how it ended.
func TestChatOutcomes(t *testing.T) {
	m := ops.NewMetrics()
	chunks := []step{{0, llm.Chunk{Content: "a"}}, {0, llm.Chunk{Content: "b"}}, {0, llm.Chunk{Content: "c"}}}

	// The whole stream.
	text, err := drain(m.Chat(&fakeChat{steps: chunks}, "m").Stream(t.Context(), llm.ChatRequest{}))
	if text != "abc" || err != nil {
		t.Errorf("drained %q, %v; want \"abc\", nil", text, err)
	}
	// The caller stops after one chunk: the inner stream sees the break.
	n := 0
	for range m.Chat(&fakeChat{steps: chunks}, "m").Stream(t.Context(), llm.ChatRequest{}) {
		n++
		break
	}
	// An error before any chunk.
	_, err = drain(m.Chat(&fakeChat{err: &llm.Error{Kind: llm.KindAuth}}, "m").Stream(t.Context(), llm.ChatRequest{}))
	if llm.KindOf(err) != llm.KindAuth {
		t.Errorf("error through the decorator = %v, want the auth error", err)
	}

	for outcome, want := range map[string]float64{"ok": 1, "abandoned": 1, "auth": 1} {
		got := metricValue(t, m.Registry(), "llmbot_model_requests_total", map[string]string{"op": "chat", "outcome": outcome})
		if got != want {
			t.Errorf("model requests{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := metricValue(t, m.Registry(), "llmbot_time_to_first_token_seconds", nil); got != 2 {
		t.Errorf("first-token observations = %v, want 2 (the errored stream had no token)", got)
	}
	if got := testutil.CollectAndCount(m.Registry(), "llmbot_tokens_total"); got != 0 {
		t.Errorf("token series without usage = %d, want 0", got)
	}
}

// Usage sent twice (some providers repeat it) is counted once: the last one.
func TestChatCountsLastUsageOnce(t *testing.T) {
	m := ops.NewMetrics()
	chat := &fakeChat{steps: []step{
		{0, llm.Chunk{Content: "a", Usage: &llm.Usage{PromptTokens: 10, CompletionTokens: 1}}},
		{0, llm.Chunk{Content: "b", Usage: &llm.Usage{PromptTokens: 10, CompletionTokens: 2}}},
	}}
	if _, err := drain(m.Chat(chat, "small").Stream(t.Context(), llm.ChatRequest{})); err != nil {
		t.Fatal(err)
	}
	for typ, want := range map[string]float64{"prompt": 10, "completion": 2} {
		if got := metricValue(t, m.Registry(), "llmbot_tokens_total", map[string]string{"model": "small", "type": typ}); got != want {
			t.Errorf("tokens{type=%q} = %v, want %v", typ, got, want)
		}
	}
}

// blocking is a route handler whose Run holds until released.
type blocking struct{ entered, release chan struct{} }

func (b blocking) Accept(*route.Request) route.Decision {
	return route.Decision{Run: true, Say: "Generating…"}
}

func (b blocking) Run(context.Context, *route.Request) error {
	b.entered <- struct{}{}
	<-b.release
	return nil
}

func TestInFlight(t *testing.T) {
	m := ops.NewMetrics()
	b := blocking{entered: make(chan struct{}), release: make(chan struct{})}
	h := m.Middleware(b)
	if d := h.Accept(&route.Request{}); d != (route.Decision{Run: true, Say: "Generating…"}) {
		t.Errorf("Accept through the middleware = %+v", d)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, req := range []*route.Request{{Feature: "mention", Reply: &route.ReplyRequest{}}, {Feature: "imagine"}} {
		wg.Go(func() { _ = h.Run(t.Context(), req) })
	}
	<-b.entered
	<-b.entered
	for _, kind := range []string{"reply", "imagine"} {
		if got := metricValue(t, m.Registry(), "llmbot_in_flight", map[string]string{"kind": kind}); got != 1 {
			t.Errorf("in flight{kind=%q} while running = %v, want 1", kind, got)
		}
	}
	b.release <- struct{}{}
	b.release <- struct{}{}
	wg.Wait()
	for _, kind := range []string{"reply", "imagine"} {
		if got := metricValue(t, m.Registry(), "llmbot_in_flight", map[string]string{"kind": kind}); got != 0 {
			t.Errorf("in flight{kind=%q} after the end = %v, want 0", kind, got)
		}
	}
}

func TestSlackTransport(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/chat.update" && r.URL.Query().Get("n") == "2" {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/commands/") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer hs.Close()
	m := ops.NewMetrics()
	client := &http.Client{Transport: m.SlackTransport(hs.Client().Transport), Timeout: 5 * time.Second}
	for _, path := range []string{
		"/api/chat.update?n=1",
		"/api/chat.update?n=2",
		"/api/chat.postMessage",
		"/commands/T1/123/xoxb-looks-secret", // a response_url: never a label
	} {
		resp, err := client.Post(hs.URL+path, "application/x-www-form-urlencoded", strings.NewReader("token=xoxb-secret"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	if _, err := client.Get(closedURL + "/api/users.info"); err == nil {
		t.Fatal("request to a closed server succeeded")
	}

	want := map[[2]string]float64{
		{"chat.update", "2xx"}:      1,
		{"chat.update", "429"}:      1,
		{"chat.postMessage", "2xx"}: 1,
		{"other", "4xx"}:            1,
		{"users.info", "error"}:     1,
	}
	for k, v := range want {
		if got := metricValue(t, m.Registry(), "llmbot_slack_api_calls_total", map[string]string{"method": k[0], "status": k[1]}); got != v {
			t.Errorf("slack calls{method=%q,status=%q} = %v, want %v", k[0], k[1], got, v)
		}
	}
	if got := metricValue(t, m.Registry(), "llmbot_slack_rate_limited_total", map[string]string{"method": "chat.update"}); got != 1 {
		t.Errorf("chat.update 429s = %v, want 1", got)
	}
	assertNoSecrets(t, m)
}

func TestSlackMethod(t *testing.T) {
	tests := []struct{ url, want string }{
		{"https://slack.com/api/chat.update", "chat.update"},
		{"https://slack-gov.com/api/files.getUploadURLExternal", "files.getUploadURLExternal"},
		{"http://127.0.0.1:4000/api/assistant.threads.setStatus?x=1", "assistant.threads.setStatus"},
		{"https://hooks.slack.com/commands/T1/2/AbCdEf", "other"},
		{"https://files.slack.com/upload/v1/CwABAAAAXAoAAZ", "other"},
		{"https://slack.com/api/", "other"},
		{"https://slack.com/api/chat", "other"},
		{"https://slack.com/api/a/chat.update", "other"},
		{"https://slack.com/api/xoxb-123.abc", "other"},
		{"https://slack.com/api/chat..update", "other"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := ops.SlackMethod(u); got != tt.want {
			t.Errorf("SlackMethod(%s) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

// Whatever reaches the hooks, labels never carry a token or free text.
func TestLabelsNeverHoldSecrets(t *testing.T) {
	m := ops.NewMetrics()
	hostile := []string{"xoxb-1234-5678-abcdef", "xapp-1-A1-2-abc", "sk-proj-abc123", "Bearer abc", "hello world", "U0123ABC says hi", strings.Repeat("a", 100)}
	for _, s := range hostile {
		m.Acked(s, time.Millisecond)
		m.Duplicate(s)
		m.Done(s, errors.New(s), time.Second)
		m.Retry(s, 1, 0, &llm.Error{Kind: llm.Kind(s)})
		m.Usage(s, llm.Usage{PromptTokens: 1, CompletionTokens: 1})
		m.AccessDenied(s, s)
		m.SlackCall(s, 200, nil, time.Millisecond)
		_, _ = drain(m.Chat(&fakeChat{steps: []step{{0, llm.Chunk{Content: s}}}}, s).Stream(t.Context(), llm.ChatRequest{Model: s}))
	}
	assertNoSecrets(t, m)
	if got := metricValue(t, m.Registry(), "llmbot_tokens_total", map[string]string{"model": "other", "type": "prompt"}); got != float64(len(hostile)) {
		t.Errorf("tokens of unlabelable models = %v, want them counted under model=\"other\"", got)
	}
}

func assertNoSecrets(t *testing.T, m *ops.Metrics) {
	t.Helper()
	out, err := testutil.GatherAndFormat(m.Registry(), expfmt.TypeTextPlain)
	if err != nil {
		t.Fatal(err)
	}
	lower := strings.ToLower(string(out))
	for _, bad := range []string{"xox", "xapp", "sk-", "bearer", "hello", "u0123abc", "aaaaaaaaaa", "looks-secret"} {
		if strings.Contains(lower, bad) {
			t.Errorf("exposition contains %q", bad)
		}
	}
}
