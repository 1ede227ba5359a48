package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/toolinfo"
)

// The tests run real MCP servers built with the same SDK: over stdio (this test binary started
// again as the server: TestMain), over streamable HTTP on loopback, and in memory.

const serverEnv = "LLMBOT_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) == "1" {
		// The stdio server: serves until its stdin closes.
		if err := testServer(func() { os.Exit(3) }).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type echoArgs struct {
	Text string `json:"text" jsonschema:"what to say back"`
}

// testServer is an MCP server with a few tools; crash is what its "crash" tool does mid-call.
func testServer(crash func()) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Says the text back"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the backend is down"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Tells what it sees of the environment"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			txt := "token=" + os.Getenv("TEST_TOOL_TOKEN") + " slack=" + os.Getenv("SLACK_BOT_TOKEN")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: txt}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Dies mid-call"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			crash()
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	return s
}

func all(string, string, string) bool { return true }

// waitFor polls cond (a server comes and goes in its own goroutines) for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func names(m *Manager, channel string) []string {
	var out []string
	for _, t := range m.List(channel) {
		out = append(out, t.Name)
	}
	return out
}

func run(t *testing.T, m *Manager) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestStdioServer(t *testing.T) {
	t.Setenv("SLACK_BOT_TOKEN", "xoxb-not-for-tools")
	cfg, err := ParseConfig([]byte(`
servers:
  - name: local
    command: `+os.Args[0]+`
    args: ["-test.run=^$"]
    env: {`+serverEnv+`: "1", TEST_TOOL_TOKEN: "${TEST_TOOL_TOKEN}"}
    tools: [echo, fail, env, crash]
    auto_approve: [echo]
`), "test.yaml", func(k string) string { return map[string]string{"TEST_TOOL_TOKEN": "s3cret-value"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	m := New(cfg, zaptest.NewLogger(t), Options{Allowed: all, MinBackoff: 20 * time.Millisecond})
	run(t, m)
	waitFor(t, "the tools", func() bool { return len(m.List("C1")) == 4 })

	got := m.List("C1")
	slices.SortFunc(got, func(a, b toolinfo.Info) int { return strings.Compare(a.Name, b.Name) })
	if got[1].Name != "local__echo" || !got[1].AutoApprove || got[0].AutoApprove || got[1].Server != "local" {
		t.Errorf("tools %+v", got)
	}
	var schema map[string]any
	if err := json.Unmarshal(got[1].Parameters, &schema); err != nil || schema["type"] != "object" {
		t.Errorf("echo's parameters %s", got[1].Parameters)
	}
	for _, tc := range []struct{ tool, args, want, err string }{
		{"local__echo", `{"text":"hi"}`, "echo: hi", ""},
		{"local__fail", `{}`, "", "the backend is down"},
		{"local__env", `{}`, "token=s3cret-value slack=", ""}, // its env, not the bot's
		{"local__nope", `{}`, "", ""},                         // unknown to the server: an error
		{"other__echo", `{}`, "", "no tool other__echo"},
	} {
		out, err := m.Call(t.Context(), tc.tool, json.RawMessage(tc.args))
		if out != tc.want || (err == nil) != (tc.err == "" && tc.want != "") || (tc.err != "" && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Call %s = %q, %v; want %q, %q", tc.tool, out, err, tc.want, tc.err)
		}
	}

	// A server that dies mid-call: the call fails, its tools go, and it is started again.
	_, err = m.Call(t.Context(), "local__crash", json.RawMessage(`{}`))
	if err == nil || !strings.Contains(err.Error(), "went away") {
		t.Errorf("crash mid-call: %v", err)
	}
	waitFor(t, "the tools back after the restart", func() bool {
		out, err := m.Call(t.Context(), "local__echo", json.RawMessage(`{"text":"again"}`))
		return err == nil && out == "echo: again"
	})
	waitFor(t, "the tools listed again", func() bool { return len(m.Status()[0].Tools) == 4 })
	st := m.Status()
	if len(st) != 1 || !st[0].Up || st[0].Transport != "stdio" || len(st[0].Tools) != 4 {
		t.Errorf("status %+v", st)
	}
}

func TestHTTPServer(t *testing.T) {
	srv := testServer(func() {})
	var auth []string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-123" {
			auth = append(auth, r.Header.Get("Authorization"))
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close) // after the manager (cleanups run last first): its open stream would hold Close
	cfg, err := ParseConfig([]byte(`
servers:
  - name: remote
    url: `+hs.URL+`
    headers: {Authorization: "Bearer ${REMOTE_TOKEN}"}
    tools: [echo]
`), "test.yaml", func(k string) string { return map[string]string{"REMOTE_TOKEN": "tok-123"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	only := func(channel, server, tool string) bool { return channel == "C1" }
	m := New(cfg, zaptest.NewLogger(t), Options{Allowed: only, MinBackoff: 20 * time.Millisecond})
	run(t, m)
	waitFor(t, "the tools", func() bool { return len(m.List("C1")) == 1 })
	if got := names(m, "C2"); got != nil {
		t.Errorf("channel C2 sees %v", got)
	}
	if out, err := m.Call(t.Context(), "remote__echo", json.RawMessage(`{"text":"over http"}`)); err != nil || out != "echo: over http" {
		t.Errorf("Call = %q, %v", out, err)
	}
	if _, err := m.Call(t.Context(), "remote__fail", json.RawMessage(`{}`)); err == nil {
		t.Error("a tool off the allow list was called")
	}
	if len(auth) > 0 {
		t.Errorf("requests without the header: %q", auth)
	}
}

func TestInMemoryServerComesAndGoes(t *testing.T) {
	done := make(chan *mcp.ServerSession, 4)
	dial := func(ServerConfig) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		ss, err := testServer(func() {}).Connect(t.Context(), st, nil)
		if err != nil {
			return nil, err
		}
		done <- ss
		return ct, nil
	}
	cfg := Config{Servers: []ServerConfig{{Name: "mem", Command: "unused"}}}
	var mu sync.Mutex
	var changes []int
	m := New(cfg, zaptest.NewLogger(t), Options{Allowed: all, Dial: dial, MinBackoff: 10 * time.Millisecond,
		Changed: func(_ string, n int) { mu.Lock(); changes = append(changes, n); mu.Unlock() }})
	run(t, m)
	waitFor(t, "the tools", func() bool { return len(m.List("C1")) == 4 })
	first := <-done
	_ = first.Close() // the server goes away
	waitFor(t, "the tools gone or back", func() bool { return len(done) > 0 })
	waitFor(t, "the tools back", func() bool { return len(m.List("C1")) == 4 })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(changes, 4) {
		t.Errorf("changes %v", changes)
	}
}

func TestNoChannelRuleNoTools(t *testing.T) {
	dial := func(ServerConfig) (mcp.Transport, error) {
		ct, st := mcp.NewInMemoryTransports()
		_, err := testServer(func() {}).Connect(t.Context(), st, nil)
		return ct, err
	}
	m := New(Config{Servers: []ServerConfig{{Name: "mem", Command: "x"}}}, zaptest.NewLogger(t), Options{Dial: dial})
	run(t, m)
	waitFor(t, "up", func() bool { return len(m.Status()[0].Tools) == 4 })
	if got := names(m, "C1"); got != nil {
		t.Errorf("tools without a channel rule: %v", got)
	}
}

func TestParseConfig(t *testing.T) {
	env := func(k string) string { return map[string]string{"TOKEN": "abc"}[k] }
	for _, tc := range []struct {
		name, yaml, err string
	}{
		{"stdio", "servers:\n  - {name: a, command: /bin/x, env: {T: \"${TOKEN}\"}}\n", ""},
		{"http", "servers:\n  - {name: b, url: \"https://x/mcp\", headers: {Authorization: \"Bearer ${TOKEN}\"}}\n", ""},
		{"empty", "servers: []\n", ""},
		{"unknown key", "servers:\n  - {name: a, command: x, cmd: y}\n", "not found"},
		{"both", "servers:\n  - {name: a, command: x, url: \"http://x\"}\n", "either command"},
		{"neither", "servers:\n  - {name: a}\n", "either command"},
		{"bad name", "servers:\n  - {name: \"a b\", command: x}\n", "name must be"},
		{"duplicate", "servers:\n  - {name: a, command: x}\n  - {name: a, command: y}\n", "second server"},
		{"missing env", "servers:\n  - {name: a, command: x, env: {T: \"${NOPE}\"}}\n", "not set: NOPE"},
		{"auto not allowed", "servers:\n  - {name: a, command: x, tools: [s], auto_approve: [t]}\n", "does not allow"},
		{"headers on a command", "servers:\n  - {name: a, command: x, headers: {A: b}}\n", "headers are for a url"},
		{"not http", "servers:\n  - {name: a, url: \"ftp://x\"}\n", "http(s)"},
		{"approvers", "servers:\n  - {name: a, command: x, approvers: [U0123, W0456, S0789], tool_approvers: {t: [U1AB]}}\n", ""},
		{"approver not an id", "servers:\n  - {name: a, command: x, approvers: [\"@alice\"]}\n", "is not a Slack user"},
		{"approver a channel", "servers:\n  - {name: a, command: x, tool_approvers: {t: [C0123]}}\n", "is not a Slack user"},
		{"tool approvers not allowed", "servers:\n  - {name: a, command: x, tools: [s], tool_approvers: {t: [U0123]}}\n", "does not allow"},
		{"public arguments", "servers:\n  - {name: a, command: x, tools: [s], public_arguments: [s]}\n", ""},
		{"public arguments not allowed", "servers:\n  - {name: a, command: x, tools: [s], public_arguments: [t]}\n", "does not allow"},
		{"tool approvers empty", "servers:\n  - {name: a, command: x, tool_approvers: {t: []}}\n", "lists nobody"},
		{"built-ins' name", "servers:\n  - {name: LLMbot, command: x}\n", "built-in tools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.yaml), "f.yaml", env)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err %v, want %q", err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "abc") {
				t.Errorf("error shows a secret: %v", err)
			}
			if tc.name == "http" && c.Servers[0].Headers["Authorization"] != "Bearer abc" {
				t.Errorf("headers %v", c.Servers[0].Headers)
			}
		})
	}
}

// An MCP server's headers (a bearer token) go to its url's origin alone. A redirect to another
// origin (another port of the same host is one) is not followed, so neither the token nor the
// tool call's arguments reach it; the same server's tools still work (TestHTTPServer).
func TestHTTPServerRedirectElsewhere(t *testing.T) {
	var mu sync.Mutex
	var reached []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "no", http.StatusNotFound)
	}))
	t.Cleanup(other.Close)
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, status)
		}))
		t.Cleanup(moved.Close)
		cfg, err := ParseConfig([]byte(`
servers:
  - name: remote
    url: `+moved.URL+`/mcp
    headers: {Authorization: "Bearer ${REMOTE_TOKEN}"}
`), "test.yaml", func(k string) string { return map[string]string{"REMOTE_TOKEN": "tok-123"}[k] })
		if err != nil {
			t.Fatal(err)
		}
		m := New(cfg, zaptest.NewLogger(t), Options{Allowed: all, MinBackoff: 20 * time.Millisecond})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		waitFor(t, "the connection to fail", func() bool { return m.Status()[0].Err != "" })
		cancel()
		<-done
		if st := m.Status()[0]; st.Up || !strings.Contains(st.Err, "another origin") {
			t.Errorf("redirect %d: status %+v, want down, the redirect refused", status, st)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reached) != 0 {
		t.Errorf("the other origin was reached: %q", reached)
	}
}

// The headers transport adds the configured headers only to requests to the server's origin,
// whatever sends them there.
func TestHeadersOnlyForTheOrigin(t *testing.T) {
	var got []string
	record := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.URL.String()+" "+r.Header.Get("Authorization"))
		return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
	})
	hc, err := originClient("https://tools.example.com/mcp", map[string]string{"Authorization": "Bearer tok"}, record)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"https://tools.example.com/mcp", "https://TOOLS.example.com:443/other", "http://tools.example.com/mcp",
		"https://tools.example.com:8443/mcp", "https://evil.example.net/mcp"} {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := []string{"https://tools.example.com/mcp Bearer tok", "https://TOOLS.example.com:443/other Bearer tok", "http://tools.example.com/mcp ",
		"https://tools.example.com:8443/mcp ", "https://evil.example.net/mcp "}
	if !slices.Equal(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
