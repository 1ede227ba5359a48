// Package fakeslack is an in-process fake Slack workspace for tests and benchmarks.
//
// It speaks the real protocols on 127.0.0.1: the Web API over HTTP (form-encoded or JSON
// POSTs, as slack-go sends them) and Socket Mode over a real WebSocket (hello, envelopes,
// acks, pings, disconnects). It enforces Slack's rate limits with token buckets and answers
// HTTP 429 with Retry-After beyond them, stores channels and messages, and records every call,
// every applied message write and every ack so tests and the load benchmark can observe what
// a user would have seen and when.
//
// It imports nothing of this module but internal/watch, so tests of any package may use it.
package fakeslack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/llmbot/llmbot/internal/watch"
)

// Config sets up a fake workspace. The zero value is usable: every empty field gets the
// default named in its comment.
type Config struct {
	BotToken  string // "xoxb-test"; any other bot token gets invalid_auth
	AppToken  string // "xapp-test"; required (as Bearer) by apps.connections.open
	TeamID    string // "T1"
	TeamName  string // "Test Team"; also the team domain ("test-team")
	BotUserID string // "UBOT"
	BotID     string // "BBOT"
	AppID     string // "A1"
	// EnterpriseID, when set, makes the workspace part of an Enterprise Grid org: auth.test
	// returns it as enterprise_id. "": a workspace on its own.
	EnterpriseID string
	BotName      string // "llmbot"
	// Scopes are returned in the x-oauth-scopes header of auth.test (comma separated).
	// Nil: the scopes of the project's manifest.
	Scopes []string
	// PingInterval is how often the server sends WebSocket pings on each Socket Mode
	// connection. 0: 2 s, which keeps slack-go's 30 s ping watchdog satisfied.
	PingInterval time.Duration
	// RefreshGrace is how long a connection that got a disconnect frame (other than "warning")
	// still gets envelopes while the app has no other connection: Slack may have sent some
	// before it took the refresh into account (how long it does is not published). 0: none
	// after the frame. A slash command or a click sent while no connection takes envelopes
	// fails for the person (Envelope.Failed).
	RefreshGrace time.Duration
	// Limits are the rate limits enforced by the Web API. Zero value: unlimited.
	Limits Limits
	// Subscriptions are the bot events delivered by PostUserMessage. Nil: app_mention,
	// message.channels, message.groups, message.im and message.mpim.
	Subscriptions []string
	// EchoBotMessages makes the bot's own posts and edits produce message events, as
	// Slack does (a plain message with bot_id for a post, subtype message_changed for an
	// edit), for loop-prevention tests. Off by default.
	EchoBotMessages bool
	// RedeliverAfter, when > 0, re-queues an events_api envelope delivered but not acked within
	// this time (retry_attempt+1, retry_reason "timeout", the same event_id), up to 3 times. As
	// Slack's retries may land on any of the app's connections, the fake sends each to one other
	// than the connection that did not ack it, when the app has another. Off by default.
	RedeliverAfter time.Duration
	// PageLimit caps the `limit` of conversations.replies/history (Slack: 1000 for
	// internal apps, 15 for new commercially distributed ones). 0: 1000.
	PageLimit int
	// ResponseURLUses is how many posts a response_url accepts (Slack: 5). 0: 5.
	ResponseURLUses int
	// MaxConnections is how many Socket Mode connections the app may hold at once. A connection
	// opened beyond it gets a disconnect with reason too_many_websockets as its only frame, no
	// hello and no envelope, and is closed. 0: DefaultMaxConnections (10, as Slack).
	MaxConnections int
	// StreamExpiry, when > 0, ends a native stream (chat.startStream) not stopped within this
	// time of its start, as Slack does to an abandoned one: appendStream and stopStream then
	// answer message_not_in_streaming_state, and chat.update may finish the message. Slack's
	// limit is reported as roughly five minutes, but whether it counts from the start or from the
	// last append is not known; the fake counts from the start (StreamIdleExpiry counts from
	// the last append). Off by default (see also ExpireStream).
	StreamExpiry time.Duration
	// StreamIdleExpiry, when > 0, ends a native stream that got no chat.startStream or
	// chat.appendStream within this time, as StreamExpiry does: the other reading of Slack's
	// limit. Off by default.
	StreamIdleExpiry time.Duration
	// NotAgent makes agents.sessions.setStatus answer not_authorized, as Slack does for an app
	// not declared as an agent (features.agent_view).
	NotAgent bool
	// RefuseTables makes chat.postMessage and chat.update refuse every table block with
	// invalid_blocks, as a workspace or an API that does not take them would (tables.go).
	RefuseTables bool
	// UserTeams makes every person's message event (and the message in conversations.replies and
	// history) name their team as user_team and source_team, the workspace's own members too.
	// Off (the default): only people of another workspace (User.Team) carry them.
	//
	// What Slack does is verified only in part. slack-go documents both fields as set "when
	// Message comes from a channel that is shared between workspaces" (slackevents.MessageEvent,
	// AppMentionEvent; slack-go/slack#695, citing Slack's Enterprise Grid guide). Payloads
	// published by others differ for members of the workspace: a member's DM message in an
	// Enterprise Grid org carries both (slackapi/bolt-python,
	// tests/scenario_tests/test_events_assistant.py), so does a 2019 member's message
	// (team = user_team = source_team); a 2019 DM message (slackapi/java-slack-sdk#218) and
	// new messages in a 2025 private channel of a workspace on its own carry only "team", while
	// the same 2025 messages' message_changed events carry both in "message". So the bot must
	// not count on them: a member's message without them is looked up (users.info), and the
	// default keeps that case under test; UserTeams measures the other.
	UserTeams bool
}

// Limits configures the Web API's rate limits.
type Limits struct {
	// Methods maps a method name ("chat.update") to its workspace-wide limit.
	// A method without an entry is unlimited.
	Methods map[string]Limit
	// PostMessagePerChannel limits chat.postMessage per channel (Slack: about 1/s with
	// bursts). Zero: unlimited.
	PostMessagePerChannel Limit
}

// Limit is a token bucket: PerMinute tokens are added per minute, up to Burst.
// The zero Limit is unlimited. Burst 0 with a rate means a burst of 1.
type Limit struct {
	PerMinute float64
	Burst     int
}

// SlackLimits returns limits shaped like Slack's published tiers (slack-platform.md §3) for
// the methods the bot uses: Tier 2 (20/min) chat.startStream, chat.stopStream and users.list; Tier 3
// (50/min) chat.update, chat.delete, conversations.replies/history, reactions.*, agents.sessions.setStatus,
// apps.connections.open; Tier 4 (100/min) chat.appendStream, chat.postEphemeral,
// users.info, files.*, auth.test; and chat.postMessage 1/s per channel. Slack's "special"
// workspace limits of chat.postMessage and assistant.threads.setStatus are not published;
// they get 600/min here. burst is the bucket size for every method.
func SlackLimits(burst int) Limits {
	tier := func(perMinute float64) Limit { return Limit{PerMinute: perMinute, Burst: burst} }
	return Limits{
		Methods: map[string]Limit{
			"chat.update":                  tier(50),
			"chat.startStream":             tier(20),
			"chat.stopStream":              tier(20),
			"chat.appendStream":            tier(100),
			"chat.postEphemeral":           tier(100),
			"conversations.replies":        tier(50),
			"conversations.history":        tier(50),
			"users.info":                   tier(100),
			"users.list":                   tier(20),
			"files.info":                   tier(100),
			"files.getUploadURLExternal":   tier(100),
			"files.completeUploadExternal": tier(100),
			"reactions.add":                tier(50),
			"apps.connections.open":        tier(50),
			"assistant.threads.setStatus":  tier(600),
			"chat.postMessage":             tier(600),
			"chat.delete":                  tier(50),
			"reactions.remove":             tier(50),
			"auth.test":                    tier(100),
			"assistant.threads.setTitle":   tier(100),
			"agents.sessions.setStatus":    tier(50),
			"views.open":                   tier(100),
			"chat.getPermalink":            tier(100),
			"conversations.info":           tier(100),
		},
		PostMessagePerChannel: Limit{PerMinute: 60, Burst: burst},
	}
}

// Server is a running fake Slack workspace. Its methods are safe for concurrent use.
type Server struct {
	cfg  Config
	http *httptest.Server
	cdn  *cdn // the other host of RedirectOtherHost

	mu      sync.Mutex
	changes *watch.Changes // every state change wakes the waiters (WaitFor)
	closed  bool

	// Web API state.
	limits       Limits
	buckets      map[string]*bucket // per method
	chanBuckets  map[string]*bucket // chat.postMessage per channel
	spent        time.Time          // when SpendBudgets emptied them (zero: buckets start full)
	faults       map[string][]fault
	calls        []Call
	count429     map[string]int
	streamingErr string
	search       searchState // assistant.search.context

	// Workspace state.
	channels   map[string]*channel
	users      map[string]*User
	userGroups map[string][]string // usergroups.users.list
	lastTS     int64               // last message ts, in microseconds
	writes     []Write
	ephemeral  []Ephemeral
	files      map[string]*File
	fileOrder  []string
	responses  map[string]*responseURL
	respPosts  []ResponseURLPost
	statuses   map[string]string      // channel/thread -> assistant status
	sessions   map[string][]string    // channel/thread -> the agent session's statuses, in order
	triggers   map[string]trigger     // trigger_id -> who clicked, and when
	views      []View                 // modals opened
	streams    map[*Message]time.Time // messages streaming now -> when their stream started
	lastWrite  map[*Message]time.Time // messages streaming now -> their last start or append
	seq        int

	// Socket Mode state.
	tickets   map[string]bool
	conns     map[*wsConn]bool // the app's open connections
	connLog   []*wsConn        // every connection, by id (id-1)
	refusing  map[*wsConn]bool // connections beyond MaxConnections, being told so
	lastConn  int              // the connection the last envelope sent in turn went to
	connTotal int
	pongs     int
	gaps      int           // see ConnStats.Gaps
	gapTime   time.Duration // of the gaps that ended
	gapSince  time.Time     // when the gap under way began (zero: none)
	pending   []*envelope   // not yet delivered
	envelopes map[string]*envelope
	envOrder  []string
	acks      []Ack
	wg        sync.WaitGroup // Socket Mode goroutines
	stop      chan struct{}  // closed by Close
	// pinnedPending counts the envelopes in pending sent to a chosen connection (Via,
	// RedeliverTo): while there are none, a connection looks no further than the first.
	pinnedPending int
}

// New starts a fake workspace on 127.0.0.1. Close it when done.
func New(cfg Config) *Server {
	cfg = withDefaults(cfg)
	s := &Server{
		cfg:         cfg,
		changes:     watch.New(),
		limits:      cfg.Limits,
		buckets:     map[string]*bucket{},
		chanBuckets: map[string]*bucket{},
		faults:      map[string][]fault{},
		count429:    map[string]int{},
		channels:    map[string]*channel{},
		users:       map[string]*User{},
		files:       map[string]*File{},
		responses:   map[string]*responseURL{},
		statuses:    map[string]string{},
		sessions:    map[string][]string{},
		triggers:    map[string]trigger{},
		tickets:     map[string]bool{},
		conns:       map[*wsConn]bool{},
		refusing:    map[*wsConn]bool{},
		streams:     map[*Message]time.Time{},
		lastWrite:   map[*Message]time.Time{},
		envelopes:   map[string]*envelope{},
		stop:        make(chan struct{}),
	}
	s.users[cfg.BotUserID] = &User{ID: cfg.BotUserID, Name: cfg.BotName, RealName: cfg.BotName, IsBot: true, BotID: cfg.BotID}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.serveAPI)
	mux.HandleFunc("/socket", s.serveSocket)
	mux.HandleFunc("/upload/", s.serveUpload)
	mux.HandleFunc("/response/", s.serveResponseURL)
	mux.HandleFunc("/files-pri/", s.serveFileDownload)
	// Set s.http before the server accepts anything: handlers read s.http.URL, and a client in another
	// process gives the race detector no happens-before edge from this assignment.
	s.http = httptest.NewUnstartedServer(mux)
	s.http.Start()
	s.cdn = newCDN(s)
	if cfg.RedeliverAfter > 0 {
		s.wg.Add(1)
		go s.redeliverLoop()
	}
	return s
}

func withDefaults(cfg Config) Config {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&cfg.BotToken, "xoxb-test")
	def(&cfg.AppToken, "xapp-test")
	def(&cfg.TeamID, "T1")
	def(&cfg.TeamName, "Test Team")
	def(&cfg.BotUserID, "UBOT")
	def(&cfg.BotID, "BBOT")
	def(&cfg.AppID, "A1")
	def(&cfg.BotName, "llmbot")
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"app_mentions:read", "chat:write", "channels:history", "groups:history",
			"im:history", "mpim:history", "files:write", "files:read", "commands", "users:read", "reactions:write", "assistant:write",
			"search:read.public", "usergroups:read"}
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 2 * time.Second
	}
	if cfg.Subscriptions == nil {
		cfg.Subscriptions = []string{"app_mention", "message.channels", "message.groups", "message.im", "message.mpim"}
	}
	if cfg.PageLimit <= 0 {
		cfg.PageLimit = 1000
	}
	if cfg.ResponseURLUses <= 0 {
		cfg.ResponseURLUses = 5
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	return cfg
}

// URL is the Web API base URL with its trailing slash, for slack.OptionAPIURL and
// SLACK_API_URL ("http://127.0.0.1:port/api/").
func (s *Server) URL() string { return s.http.URL + "/api/" }

// Config returns the configuration in effect, defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Close drops every Socket Mode connection, stops the server's goroutines and the HTTP
// server. It returns when all of them have ended.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.stop)
	for c := range s.conns {
		c.ws.Close()
	}
	for c := range s.refusing {
		c.ws.Close()
	}
	s.notifyLocked()
	s.mu.Unlock()
	s.wg.Wait()
	s.http.Close()
	s.cdn.srv.Close()
}

// notifyLocked wakes every waiter (WaitFor, connection writers). Call with s.mu held.
func (s *Server) notifyLocked() {
	s.changes.Notify()
}

// WaitFor calls cond after every change of the fake's state until it returns true or ctx
// ends. cond runs without the fake's lock held, so it may call the observation methods.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	return s.changes.WaitFor(ctx, cond)
}

// writeJSON answers with a JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) nextIDLocked(prefix string) string {
	s.seq++
	return prefix + strings.ToUpper(strings.TrimLeft(itoa36(s.seq), "0"))
}

func itoa36(n int) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := []byte("000000")
	for i := len(b) - 1; i >= 0 && n > 0; i-- {
		b[i] = digits[n%36]
		n /= 36
	}
	return string(b)
}
