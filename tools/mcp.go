// Package tools connects the bot to MCP servers (the Model Context Protocol, through the official
// Go SDK) and offers their tools to the model: it satisfies the Tools interface the answers
// declare (handlers), speaking only the vocabulary below both (toolinfo), so this plumbing imports
// no use case.
//
// Each server of the MCP_CONFIG file (config.go) is kept connected by a goroutine of Run: a stdio
// server is started as a program, an HTTP one dialled; its tools are listed (again when it says they
// changed), and when it dies or its connection breaks its tools disappear until it is back, after a
// backoff that grows while it keeps failing. The model sees a server's tools as "<server>__<tool>",
// so tools of two servers never clash; a channel sees only the tools its access rule gives it
// (Options.Allowed; none by default).
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/toolinfo"
)

// Options tune a Manager. Zero values take the defaults.
type Options struct {
	// Allowed reports whether channel may use the tool of server (CHANNEL_CONFIG). nil: no channel
	// may use any tool.
	Allowed func(channel, server, tool string) bool
	// MinBackoff and MaxBackoff bound the wait before a dead server is started again; it doubles
	// from MinBackoff while the server keeps failing (default 1 s, 1 min).
	MinBackoff, MaxBackoff time.Duration
	// Healthy is how long a connection must last for the backoff to start again from MinBackoff
	// (default 30 s).
	Healthy time.Duration
	// Dial, when set, replaces how a server's transport is made (tests: in-memory transports).
	Dial func(s ServerConfig) (mcp.Transport, error)
	// Version is the bot's version, told to servers.
	Version string
	// Changed, when set, is called when a server's tools change (it came, went or relisted).
	Changed func(server string, tools int)
}

// Manager keeps the configured MCP servers connected and calls their tools. Safe for concurrent use.
type Manager struct {
	log     *zap.Logger
	opt     Options
	servers []*server
	byName  map[string]*server
}

// server is one configured server and, while connected, its session and tools.
type server struct {
	cfg     ServerConfig
	secrets []string

	mu      sync.Mutex
	session *mcp.ClientSession
	tools   []*mcp.Tool // allowed by the config, as listed
	lastErr string      // why it is down (redacted)
	up      bool
}

// sep joins a server's name and a tool's in the names the model sees.
const sep = "__"

// New returns a Manager of cfg's servers. It does no I/O: Run connects them.
func New(cfg Config, log *zap.Logger, opt Options) *Manager {
	if opt.MinBackoff <= 0 {
		opt.MinBackoff = time.Second
	}
	if opt.MaxBackoff <= 0 {
		opt.MaxBackoff = time.Minute
	}
	if opt.Healthy <= 0 {
		opt.Healthy = 30 * time.Second
	}
	m := &Manager{log: log, opt: opt, byName: map[string]*server{}}
	for _, sc := range cfg.Servers {
		s := &server{cfg: sc, secrets: sc.secrets()}
		m.servers = append(m.servers, s)
		m.byName[sc.Name] = s
	}
	return m
}

// Run keeps every server connected until ctx ends, then closes them and returns once all are
// closed. It returns nil at once when there are no servers.
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, s := range m.servers {
		wg.Go(func() { m.keep(ctx, s) })
	}
	wg.Wait()
	return nil
}

// keep connects s again and again until ctx ends.
func (m *Manager) keep(ctx context.Context, s *server) {
	log := m.log.With(zap.String("mcp_server", s.cfg.Name))
	backoff := m.opt.MinBackoff
	for ctx.Err() == nil {
		began := time.Now()
		err := m.session(ctx, s, log)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) >= m.opt.Healthy {
			backoff = m.opt.MinBackoff
		}
		log.Warn("MCP server down: starting it again", zap.Error(err), zap.Duration("after", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, m.opt.MaxBackoff)
	}
}

// session connects s once, lists its tools, and waits until the connection ends (or ctx does).
// The error says why it ended, redacted.
func (m *Manager) session(ctx context.Context, s *server, log *zap.Logger) error {
	t, err := m.transport(s, log)
	if err != nil {
		return s.down(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "llmbot", Version: m.opt.Version}, &mcp.ClientOptions{
		Logger: slog.New(slog.DiscardHandler), // its errors come back to us; its logs would carry no server name
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			if err := m.list(ctx, s); err != nil {
				log.Warn("MCP tools not listed again", zap.Error(err))
			}
		},
	})
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	cs, err := client.Connect(cctx, t, nil)
	cancel()
	if err != nil {
		return s.down(fmt.Errorf("connect: %w", err))
	}
	s.mu.Lock()
	s.session, s.up, s.lastErr = cs, true, ""
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = cs.Close() })
	defer stop()
	if err := m.list(ctx, s); err != nil {
		_ = cs.Close()
		_ = cs.Wait()
		return s.down(err)
	}
	log.Info("MCP server up", zap.Int("tools", len(s.listed())))
	err = cs.Wait()
	_ = cs.Close()
	if err == nil {
		err = errors.New("the connection ended")
	}
	return s.down(err)
}

// connectTimeout bounds a server's start and handshake.
const connectTimeout = 30 * time.Second

// list lists s's tools (all pages) and keeps those its allow list lets through.
func (m *Manager) list(ctx context.Context, s *server) error {
	s.mu.Lock()
	cs := s.session
	s.mu.Unlock()
	if cs == nil {
		return errors.New("not connected")
	}
	lctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	tools := []*mcp.Tool{} // listed, if none: not nil
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if s.cfg.allows(t.Name) && validToolName(t.Name) {
			tools = append(tools, t)
		}
	}
	s.mu.Lock()
	s.tools, s.up, s.lastErr = tools, true, ""
	s.mu.Unlock()
	if f := m.opt.Changed; f != nil {
		f(s.cfg.Name, len(tools))
	}
	return nil
}

// validToolName: a tool's name the model can be given (with the server's, within 64 characters).
func validToolName(name string) bool {
	if name == "" || len(name) > 64-24-len(sep) || strings.Contains(name, sep) {
		return false
	}
	for _, r := range name {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// down records that s is down (its tools gone) and returns err redacted.
func (s *server) down(err error) error {
	err = redact(err, s.secrets)
	s.mu.Lock()
	s.session, s.tools, s.up, s.lastErr = nil, nil, false, err.Error()
	s.mu.Unlock()
	return err
}

func (s *server) listed() []*mcp.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// transport makes the connection to s: its program over stdio, or its URL.
func (m *Manager) transport(s *server, log *zap.Logger) (mcp.Transport, error) {
	if m.opt.Dial != nil {
		return m.opt.Dial(s.cfg)
	}
	if s.cfg.URL != "" {
		hc, err := originClient(s.cfg.URL, s.cfg.Headers, http.DefaultTransport)
		if err != nil {
			return nil, err
		}
		return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc}, nil
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	// Not the bot's environment: it holds the Slack and model credentials. The program gets a PATH
	// and a HOME to run, and what its env names.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range s.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = &lineLog{log: log}
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil
}

// originClient is the HTTP client of the MCP server at endpoint. Its configured headers (a
// bearer token) are for that server alone: they are added only to requests to endpoint's origin
// (scheme, host and port), and a redirect to another origin is refused rather than followed
// without them, since the request also carries the tool call's arguments, taken from the
// conversation (net/http re-sends the body on a 307 or 308).
func originClient(endpoint string, h map[string]string, next http.RoundTripper) (*http.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("mcp url: %w", err)
	}
	home := originOf(u)
	return &http.Client{
		Transport: headers{h: h, origin: home, next: next},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if o := originOf(req.URL); o != home {
				return fmt.Errorf("the server redirected to %s, another origin than its url's: not followed", o)
			}
			if len(via) >= 10 { // net/http's own limit
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}, nil
}

// originOf is u's origin: scheme://host:port, the port written out, the host in lower case.
func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// headers adds the configured headers to every request to origin.
type headers struct {
	h      map[string]string
	origin string
	next   http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.h) == 0 || originOf(r.URL) != h.origin {
		return h.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// lineLog logs what a stdio server writes on stderr, at debug (it may say anything).
type lineLog struct {
	log  *zap.Logger
	mu   sync.Mutex
	part []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := slices.Index(l.part, '\n')
		if i < 0 {
			break
		}
		l.log.Debug("MCP server stderr", zap.ByteString("line", l.part[:min(i, 2000)]))
		l.part = l.part[i+1:]
	}
	if len(l.part) > 64<<10 {
		l.part = l.part[:0]
	}
	return len(p), nil
}

// redact replaces every secret in err's text.
func redact(err error, secrets []string) error {
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg, changed = strings.ReplaceAll(msg, s, "[redacted]"), true
		}
	}
	if !changed {
		return err
	}
	return errors.New(msg)
}

// List returns the tools channel may use now.
func (m *Manager) List(channel string) []toolinfo.Info {
	var out []toolinfo.Info
	for _, s := range m.servers {
		for _, t := range s.listed() {
			if m.opt.Allowed == nil || !m.opt.Allowed(channel, s.cfg.Name, t.Name) {
				continue
			}
			params, _ := json.Marshal(t.InputSchema)
			out = append(out, toolinfo.Info{
				Tool:            llm.Tool{Name: s.cfg.Name + sep + t.Name, Description: clip(t.Description, maxDescription), Parameters: params},
				Server:          s.cfg.Name,
				AutoApprove:     slices.Contains(s.cfg.AutoApprove, t.Name),
				Approvers:       s.cfg.ApproversOf(t.Name),
				PublicArguments: s.cfg.publicArguments(t.Name),
			})
		}
	}
	return out
}

// maxDescription bounds a tool's description in every request.
const maxDescription = 1024

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// maxOutput bounds what a call's result is read into (the handlers cut it further for the model).
const maxOutput = 1 << 20

// Call calls the tool name ("<server>__<tool>") with args. A result the server marks as an error
// is an error, with the result's text.
func (m *Manager) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	srvName, tool, ok := strings.Cut(name, sep)
	s := m.byName[srvName]
	if !ok || s == nil || !s.cfg.allows(tool) {
		return "", fmt.Errorf("no tool %s", name)
	}
	s.mu.Lock()
	cs := s.session
	s.mu.Unlock()
	if cs == nil {
		return "", fmt.Errorf("the MCP server %s is not running", srvName)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) ||
			errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "closed")) {
			return "", fmt.Errorf("the MCP server %s went away during the call", srvName)
		}
		return "", fmt.Errorf("tools/call %s: %w", name, redact(err, s.secrets))
	}
	out := resultText(res)
	if res.IsError {
		return "", errors.New(strings.TrimSpace(clip(out, 500)))
	}
	return clip(out, maxOutput), nil
}

// resultText is a call's result as text: its text parts; other parts named by their kind; the
// structured result when there is no text.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			b.WriteString("[an image, " + c.MIMEType + "]")
		case *mcp.AudioContent:
			b.WriteString("[audio, " + c.MIMEType + "]")
		case *mcp.ResourceLink:
			b.WriteString("[a link: " + c.URI + "]")
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				b.WriteString(c.Resource.Text)
			} else {
				b.WriteString("[a resource]")
			}
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		j, _ := json.Marshal(res.StructuredContent)
		b.Write(j)
	}
	return b.String()
}

// ServerStatus is how one server is (doctor).
type ServerStatus struct {
	Name, Transport string
	Up              bool
	Err             string   // why it is down
	Tools           []string // its allowed tools once listed (nil before)
	AutoApprove     []string
	Approvers       map[string][]string // by tool, those that have approvers
}

// Status reports every server.
func (m *Manager) Status() []ServerStatus {
	var out []ServerStatus
	for _, s := range m.servers {
		s.mu.Lock()
		st := ServerStatus{Name: s.cfg.Name, Transport: s.cfg.Transport(), Up: s.up, Err: s.lastErr, AutoApprove: s.cfg.AutoApprove}
		if s.tools != nil {
			st.Tools = make([]string, 0, len(s.tools))
		}
		for _, t := range s.tools {
			st.Tools = append(st.Tools, t.Name)
			if a := s.cfg.ApproversOf(t.Name); len(a) > 0 {
				if st.Approvers == nil {
					st.Approvers = map[string][]string{}
				}
				st.Approvers[t.Name] = a
			}
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	return out
}
