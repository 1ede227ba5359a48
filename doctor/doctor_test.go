package doctor

// Tests of the checks, run as `llmbot doctor` runs them, against the fake Slack (Web API over
// HTTP, Socket Mode over a real WebSocket) and the fake OpenAI-compatible server. The checklist is
// compared with testdata/doctor_*.golden (go test ./doctor -update rewrites them).

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/llm"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

const (
	doctorWait = 40 * time.Second // bound of one doctor run in tests (its own bounds are shorter)
	botToken   = "xoxb-e2e-SECRET-bot"
	appToken   = "xapp-e2e-SECRET-app"
	llmKey     = "sk-e2e-SECRET-key"
	secret     = "SECRET" // in every credential above; must never reach the output
)

// doctorFakes are the services one doctor run checks.
type doctorFakes struct {
	slack *fakeslack.Server
	llm   *fakellm.Server
	in    Input
}

// newDoctorFakes starts both fakes with the test's credentials; in is a complete, valid input
// pointing at them, with the bot's default settings.
func newDoctorFakes(t *testing.T, scfg fakeslack.Config) *doctorFakes {
	t.Helper()
	scfg.BotToken, scfg.AppToken = botToken, appToken
	scfg.TeamID, scfg.TeamName = "T123", "Acme"
	f := &doctorFakes{slack: fakeslack.New(scfg), llm: fakellm.New()}
	t.Cleanup(f.slack.Close)
	t.Cleanup(f.llm.Close)
	f.llm.SetAPIKey(llmKey)
	f.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("ok") })
	f.in = Input{
		SlackBotToken: botToken,
		SlackAppToken: appToken,
		SlackAPIURL:   f.slack.URL(),
		LLM: llm.Config{
			BaseURL:        f.llm.URL(),
			APIKey:         llmKey,
			Headers:        http.Header{"X-Extra": {secret + "-header"}},
			ChatModel:      "gpt-5.4-mini",
			ImageModel:     "gpt-image-2",
			ConnectTimeout: 10 * time.Second,
		},
		ReplyMode: "edit",
		FollowUps: true,
		Controls:  Controls{Retention: 90},
	}
	return f
}

// runDoctor runs `llmbot doctor` with in and returns its normalised stdout and its error. Every
// run checks that no credential reaches the output and that failures are not printed twice.
func runDoctor(t *testing.T, in Input) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), doctorWait)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := Run(ctx, nil, in, &stdout, &stderr)
	all := stdout.String() + stderr.String()
	if err != nil {
		all += err.Error()
	}
	for _, s := range []string{secret, botToken, appToken, llmKey} {
		if strings.Contains(all, s) {
			t.Errorf("a credential (%q) appears in the output:\n%s", s, all)
		}
	}
	if strings.Contains(all, "[redacted]") {
		t.Errorf("a check put a secret in its text (the checklist blanked it out):\n%s", all)
	}
	if err != nil && !errors.Is(err, ErrReported) {
		t.Errorf("error %v does not wrap ErrReported: main would print it after the checklist", err)
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
	return normalise(stdout.String()), err
}

var (
	latencyRE = regexp.MustCompile(`in [0-9.]+(ns|µs|ms|s)\b`)
	portRE    = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
)

// normalise replaces what changes between runs: latencies and the fakes' ports.
// checkLine is the last line of doctor's output out that reports the check named name ("Chat
// model"), "" if none does.
func checkLine(out, name string) string {
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " "+name+": ") {
			line = l
		}
	}
	return line
}

func normalise(s string) string {
	s = latencyRE.ReplaceAllString(s, "in <latency>")
	return portRE.ReplaceAllString(s, "127.0.0.1:<port>")
}

// checkGolden compares got with testdata/doctor_<name>.golden.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "doctor_"+name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("checklist differs from %s (run with -update):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func TestDoctorAllGood(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	out, err := runDoctor(t, f.in)
	if err != nil {
		t.Errorf("doctor failed: %v", err)
	}
	checkGolden(t, "ok", out)

	// The one-word request reached the model, and the Socket Mode connection was closed.
	reqs := f.llm.ChatRequests()
	if len(reqs) != 1 || reqs[0].Stream || !strings.Contains(reqs[0].Messages[0].Content, "single word") {
		t.Errorf("chat requests: %+v", reqs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.slack.WaitFor(ctx, func() bool { return f.slack.Connections().Current == 0 }); err != nil {
		t.Errorf("the Socket Mode connection stayed open: %+v", f.slack.Connections())
	}
	if n := f.slack.Connections().Total; n != 1 {
		t.Errorf("%d Socket Mode connections, want 1", n)
	}
}

// TestDoctorControlsOn: the checklist says where usage is counted, which budgets hold, what is
// redacted, and who sees everyone's use.
func TestDoctorControlsOn(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.in.Controls = Controls{Shared: true, Retention: 30, Budgets: []string{"person daily 100,000", "channel monthly 5,000,000"},
		Redaction: []string{"EMAIL", "CARD", "CUSTOMER"}, Admins: 2, Prices: 3}
	out, err := runDoctor(t, f.in)
	if err != nil {
		t.Errorf("doctor failed: %v", err)
	}
	for _, want := range []string{
		"✓ Usage, budgets, redaction: usage counted per person, channel and model in Redis, shared by the replicas, kept 30 days",
		"budgets: person daily 100,000, channel monthly 5,000,000",
		"redaction before the model: EMAIL, CARD, CUSTOMER",
		"/usage admins: 2 people, prices for 3 models",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the checklist lacks %q:\n%s", want, out)
		}
	}
}

func TestDoctorMissingScopes(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{Scopes: []string{
		"app_mentions:read", "chat:write", "channels:history", "groups:history", "im:history", "mpim:history", "commands",
	}})
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed without users:read and files:write")
	}
	checkGolden(t, "missing_scopes", out)
}

// A token without the history scopes fails, each note saying what needs the scope: thread reads,
// follow-ups, /summarize and the Summarize thread shortcut.
func TestDoctorMissingHistoryScopes(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{Scopes: []string{
		"app_mentions:read", "chat:write", "im:history", "commands", "files:write", "files:read", "users:read",
	}})
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed without channels:history, groups:history and mpim:history")
	}
	checkGolden(t, "missing_history_scopes", out)
}

// Without files:read the pictures and text files people share cannot be read: a failure whose note
// says so, and names VISION; with VISION=off the text files still need it.
func TestDoctorFilesScope(t *testing.T) {
	for _, vision := range []string{"auto", "off"} {
		t.Run(vision, func(t *testing.T) {
			f := newDoctorFakes(t, fakeslack.Config{Scopes: []string{
				"app_mentions:read", "chat:write", "channels:history", "groups:history", "im:history", "mpim:history",
				"files:write", "users:read", "commands",
			}})
			f.in.Vision = vision
			out, err := runDoctor(t, f.in)
			if err == nil {
				t.Error("doctor passed without files:read")
			}
			checkGolden(t, "missing_files_read_vision_"+vision, out)
		})
	}
}

func TestDoctorCommandsScopeNotListed(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{Scopes: []string{
		"app_mentions:read", "chat:write", "channels:history", "groups:history", "im:history", "mpim:history",
		"files:write", "files:read", "users:read",
	}})
	out, err := runDoctor(t, f.in)
	if err != nil {
		t.Errorf("a missing commands scope is a warning, not a failure: %v", err)
	}
	checkGolden(t, "no_commands_scope", out)
}

func TestDoctorLLMKeyRejected(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.llm.SetAPIKey("sk-another-key-entirely")
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed with a rejected API key")
	}
	checkGolden(t, "llm_401", out)
}

func TestDoctorModelNotFound(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		return fakellm.HTTPError(http.StatusNotFound, fakellm.APIError{
			Message: "The model `" + r.Model + "` does not exist or you do not have access to it.",
			Type:    "invalid_request_error", Code: "model_not_found",
		})
	})
	f.in.LLM.ChatModel = "gpt-nonexistent"
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed with an unknown model")
	}
	checkGolden(t, "model_not_found", out)
}

func TestDoctorModelServiceUnreachable(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.in.LLM.BaseURL = "http://" + closedAddr(t) + "/v1"
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed with no model service")
	}
	checkGolden(t, "llm_unreachable", out)
}

func TestDoctorBadBotToken(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.in.SlackBotToken = "xoxb-e2e-SECRET-revoked"
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed with a bad bot token")
	}
	checkGolden(t, "bad_bot_token", out)
}

func TestDoctorBadAppToken(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.in.SlackAppToken = "xapp-e2e-SECRET-wrong"
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed with a bad app token")
	}
	checkGolden(t, "bad_app_token", out)
}

func TestDoctorSocketModeRefused(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.slack.FailNext("apps.connections.open", "forbidden_team")
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed while apps.connections.open failed")
	}
	checkGolden(t, "socket_refused", out)
}

// TestDoctorSocketModeDisabled: Slack opens the WebSocket but, Socket Mode being off in the
// app's settings, sends disconnect link_disabled instead of hello.
func TestDoctorSocketModeDisabled(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }} // the bot sends Slack's Origin
	link := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"disconnect","reason":"link_disabled","debug_info":{"host":"applink-1"}}`))
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}))
	defer link.Close()
	// Slack's Web API is the fake's, but apps.connections.open points at the link above.
	api := slackInFront(t, f.slack, map[string]string{
		"/api/apps.connections.open": `{"ok":true,"url":"ws` + strings.TrimPrefix(link.URL, "http") + `/link/?ticket=t-SECRET"}`,
	})
	f.in.SlackAPIURL = api + "/api/"
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed with Socket Mode off")
	}
	checkGolden(t, "socket_disabled", out)
}

// TestDoctorTokensOfTwoApps: bots.info says the bot token's app is A2 while the app-level
// token's Socket Mode connection is app A1 (the fake's): events would go elsewhere.
func TestDoctorTokensOfTwoApps(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{AppID: "A1"})
	api := slackInFront(t, f.slack, map[string]string{
		"/api/bots.info": `{"ok":true,"bot":{"id":"BBOT","app_id":"A2","user_id":"UBOT","name":"llmbot"}}`,
	})
	f.in.SlackAPIURL = api + "/api/"
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed with tokens of two apps")
	}
	checkGolden(t, "two_apps", out)
}

// TestDoctorTemperatureRefused: the model refuses TEMPERATURE; the client drops it and the
// answer comes, so it is a warning.
func TestDoctorTemperatureRefused(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.llm.SetChat(fakellm.Sequence(fakellm.UnsupportedTemperature("0.2"), fakellm.Text("ok")))
	f.in.LLM.Temperature = new(0.2)
	out, err := runDoctor(t, f.in)
	if err != nil {
		t.Errorf("doctor failed: %v", err)
	}
	checkGolden(t, "temperature", out)
}

// slackInFront serves the given Web API answers (path -> JSON body) and passes every other
// request to the fake Slack. It returns its base URL.
func slackInFront(t *testing.T, fs *fakeslack.Server, answers map[string]string) string {
	t.Helper()
	target, _ := url.Parse(fs.URL())
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, ok := answers[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(body))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDoctorImageModelListed: a service that lists its models (GET /v1/models) is asked
// whether IMAGE_MODEL is among them; not listed is a warning, not a failure. A list refused for
// the key leaves the image model unchecked (not a ✓ under the chat model's ✗).
func TestDoctorImageModelListed(t *testing.T) {
	for _, tc := range []struct {
		name, imageModel, key string
		wantErr               bool
	}{
		{"image_listed", "gpt-image-2", llmKey, false},
		{"image_not_listed", "dall-e-9", llmKey, false},
		{"image_key_refused", "gpt-image-2", "sk-another-key-entirely", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newDoctorFakes(t, fakeslack.Config{})
			target, _ := url.Parse(f.llm.URL())
			proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
			svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/models" {
					if r.Header.Get("Authorization") != "Bearer "+llmKey {
						http.Error(w, `{"error":{"message":"no key"}}`, http.StatusUnauthorized)
						return
					}
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"gpt-5.4-mini","object":"model"},{"id":"gpt-image-2","object":"model"}]}`))
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			defer svc.Close()
			f.in.LLM.BaseURL = svc.URL + "/v1"
			f.in.LLM.ImageModel = tc.imageModel
			f.in.LLM.APIKey = tc.key
			out, err := runDoctor(t, f.in)
			if (err != nil) != tc.wantErr {
				t.Errorf("doctor: error %v, want an error: %v", err, tc.wantErr)
			}
			checkGolden(t, tc.name, out)
		})
	}
}

// TestDoctorSettingsProblems: the problems a normal start reports are the settings check (here
// those of no tokens, TEMPERATURE=7 and REPLY_MODE=fast); Slack checks without their token are
// skipped rather than sent to Slack.
func TestDoctorSettingsProblems(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.in.SlackBotToken, f.in.SlackAppToken = "", ""
	f.in.LLM.Temperature = new(7.0)
	f.in.ReplyMode = "fast"
	f.in.Problems = []Problem{
		{"Essentials", "SLACK_BOT_TOKEN is missing: the Bot User OAuth Token (xoxb-...) under OAuth & Permissions in your Slack app's settings (https://api.slack.com/apps); install the app to the workspace first"},
		{"Essentials", "SLACK_APP_TOKEN is missing: an app-level token (xapp-...) with the connections:write scope under Basic Information > App-Level Tokens in your Slack app's settings (https://api.slack.com/apps)"},
		{"Features", "TEMPERATURE: 7 is outside 0 to 2 (leave it unset to use the model's default)"},
		{"Features", `REPLY_MODE: "fast" is not one of edit, stream`},
	}
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Error("doctor passed without tokens")
	}
	checkGolden(t, "settings", out)
	if n := len(f.slack.Calls()); n != 0 {
		t.Errorf("%d calls to Slack without tokens", n)
	}
}

// TestChecklistRedacts: the checklist's own net blanks out every credential, header values included.
func TestChecklistRedacts(t *testing.T) {
	in := Input{SlackBotToken: botToken, SlackAppToken: appToken,
		LLM: llm.Config{APIKey: llmKey, Headers: http.Header{"Api-Key": {"azure-" + secret}}}}
	var b bytes.Buffer
	c := &checklist{w: &b, secrets: secretsOf(in)}
	c.print(fail("Leak", "bot "+botToken+" app "+appToken, "key "+llmKey, "header azure-"+secret))
	if strings.Contains(b.String(), secret) || strings.Count(b.String(), "[redacted]") != 4 {
		t.Errorf("checklist output:\n%s", b.String())
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestDoctorSocketNoHello: a WebSocket that never says hello ends at the check's deadline
// (a short one here, through ctx) with what to look at.
func TestDoctorSocketNoHello(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{BotToken: botToken, AppToken: appToken})
	defer fs.Close()
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}))
	defer silent.Close()
	api := slackInFront(t, fs, map[string]string{
		"/api/apps.connections.open": `{"ok":true,"url":"ws` + strings.TrimPrefix(silent.URL, "http") + `/link/?ticket=t1"}`,
	})
	client := slack.New(botToken, slack.OptionAPIURL(api+"/api/"), slack.OptionAppLevelToken(appToken))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := checkSocketMode(ctx, client, "")
	if r.status != statusFail || !strings.Contains(r.detail, "no hello from Slack") || !strings.Contains(r.fix, "Socket Mode is on") {
		t.Errorf("result %+v", r)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the check took %s, past its deadline", took)
	}
}

// TestDoctorChatTimeout: a model that sends no headers within the check's deadline is a
// failure that names the host.
func TestDoctorChatTimeout(t *testing.T) {
	fl := fakellm.New()
	defer fl.Close()
	fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Reply{HeaderDelay: 10 * time.Second} })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	r := modelCheck{cfg: llm.Config{BaseURL: fl.URL(), APIKey: fakellm.DefaultAPIKey, ChatModel: "gpt-5.4-mini"}}.chat(ctx)
	if r.status != statusFail || !strings.Contains(r.detail, "no answer from 127.0.0.1") {
		t.Errorf("result %+v", r)
	}
}

// CHANNEL_CONFIG may name a chat model per channel; the bot then asks the service for that
// model in that channel. When the service does not have it, every answer there fails ("The
// model service refused the request: ..."), and doctor, which "checks the models end to end",
// must say so rather than report all green without a word about the override.
func TestDoctorChannelConfigModelNotFound(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	f.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		if r.Model == "gpt-nonexistent" {
			return fakellm.HTTPError(http.StatusNotFound, fakellm.APIError{
				Message: "The model `" + r.Model + "` does not exist or you do not have access to it.",
				Type:    "invalid_request_error", Code: "model_not_found",
			})
		}
		return fakellm.Text("ok")
	})
	f.in.ChannelModels = map[string][]string{"gpt-nonexistent": {"C0123ABCD"}}
	out, err := runDoctor(t, f.in)
	if err == nil || !strings.Contains(out, "✗ Chat model gpt-nonexistent (CHANNEL_CONFIG: C0123ABCD)") ||
		!strings.Contains(out, "the channel's model in CHANNEL_CONFIG") {
		t.Errorf("doctor = %v, want a failed check of the CHANNEL_CONFIG model the service does not have, with its fix:\n%s", err, out)
	}
}

// TestDoctorChannelConfigModelsWithinBound: doctor's model checks run beside the Slack checks
// and the whole run is meant to take at most about 23 s (see doctorChatTimeout). A model service
// that does not answer must not multiply that by the number of CHANNEL_CONFIG models: asked one
// after another, each waits its own 15 s (here 3 models: 45 s before the image check).
func TestDoctorChannelConfigModelsWithinBound(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the chat check's deadline")
	}
	fl := fakellm.New()
	defer fl.Close()
	fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Reply{HeaderDelay: time.Minute} })
	in := Input{
		LLM:           llm.Config{BaseURL: fl.URL(), APIKey: fakellm.DefaultAPIKey, ChatModel: "gpt-5.4-mini", ImageModel: "gpt-image-2"},
		ChannelModels: map[string][]string{"model-a": {"C0123ABCD"}, "model-b": {"C0456EFGH"}},
	}
	start := time.Now()
	rs := modelChecks(t.Context(), in)
	took := time.Since(start)
	if bound := doctorChatTimeout + doctorModelsTimeout + 3*time.Second; took > bound {
		t.Errorf("model checks took %v with %d results, want at most %v (doctor's 23 s)", took.Round(time.Second), len(rs), bound)
	}
}

// A key that may use models but not list them (an OpenAI restricted key without "Models: Read"
// answers GET /models 401 "Missing scopes: api.model.read"; gateways with per-key scopes answer
// 403) passes the chat check: the service took the key. The image check must not then say "the
// service refused the key" and count as skipped ("an earlier problem makes it meaningless") under
// a ✓ that says the same key works: the person is sent after a key that is fine. Before fdd4644 it
// was the ✓ every other model-list error gets.
func TestDoctorImageModelListRefusedForAWorkingKey(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			f := newDoctorFakes(t, fakeslack.Config{})
			target, _ := url.Parse(f.llm.URL())
			proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
			svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/models" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					_, _ = w.Write([]byte(`{"error":{"message":"You have insufficient permissions for this operation. Missing scopes: api.model.read.","type":"invalid_request_error"}}`))
					return
				}
				proxy.ServeHTTP(w, r)
			}))
			defer svc.Close()
			f.in.LLM.BaseURL = svc.URL + "/v1"
			out, err := runDoctor(t, f.in)
			if err != nil {
				t.Errorf("doctor failed: %v", err)
			}
			chat, image := checkLine(out, "Chat model"), checkLine(out, "Image model")
			if !strings.HasPrefix(chat, "✓") {
				t.Fatalf("chat line %q, want a ✓ (the key works)\n%s", chat, out)
			}
			if strings.Contains(image, "refused the key") || strings.Contains(image, "skipped") {
				t.Errorf("under %q the image check says %q: the same key just worked", chat, image)
			}
			if strings.Contains(out, "skipped") {
				t.Errorf("summary counts a skipped check, yet no earlier problem made one meaningless:\n%s", out)
			}
		})
	}
}

// With the model service unreachable, "✗ Chat model: cannot connect" is not followed by a ✓ on the
// image model (it reads GET /models of the same service, which failed too).
func TestDoctorImageModelNotPassedWhenTheServiceIsUnreachable(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	dead := httptest.NewServer(http.NotFoundHandler())
	base := dead.URL
	dead.Close()
	f.in.LLM.BaseURL = base + "/v1"
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Errorf("doctor passed with an unreachable model service:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " Image model: ") && strings.HasPrefix(l, "✓") {
			t.Errorf("image check %q under an unreachable service:\n%s", l, out)
		}
	}
}

// Services whose model list is public (OpenRouter's takes no key; so do many self-hosted gateways)
// answer it whatever the key: under "✗ Chat model: ... rejected OPENAI_API_KEY (401)" the image
// check is no ✓ saying all is well with IMAGE_MODEL (/imagine sends the same refused key).
func TestDoctorImageModelNotPassedUnderARefusedKeyWithAPublicModelList(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	target, _ := url.Parse(f.llm.URL())
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" { // public: no key needed
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"gpt-5.4-mini","object":"model"},{"id":"gpt-image-2","object":"model"}]}`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer svc.Close()
	f.in.LLM.BaseURL = svc.URL + "/v1"
	f.in.LLM.ImageModel = "gpt-image-2"
	f.llm.SetAPIKey("sk-another-key-entirely")
	out, err := runDoctor(t, f.in)
	if err == nil {
		t.Errorf("doctor passed with a refused key:\n%s", out)
	}
	chat, image := checkLine(out, "Chat model"), checkLine(out, "Image model")
	if !strings.HasPrefix(chat, "✗") {
		t.Fatalf("chat line %q, want a ✗ (the key is refused)\n%s", chat, out)
	}
	if strings.HasPrefix(image, "✓") {
		t.Errorf("under %q the image check is %q: a ✓ under a refused key", chat, image)
	}
}

// With native streaming (REPLY_MODE auto or stream) or the agent pane, the app must be declared as
// an agent: its bot token then has assistant:write. Without either, nothing is checked.
func TestDoctorAgentDeclared(t *testing.T) {
	answers := []string{"app_mentions:read", "chat:write", "channels:history", "groups:history", "im:history",
		"mpim:history", "files:write", "files:read", "users:read", "commands"}
	for _, tc := range []struct {
		name      string
		mode      string
		agentView bool
		agent     bool   // the token has assistant:write
		want      string // the Agent line; "": none
		fails     bool
	}{
		{"auto, declared", "auto", true, true, "declared as an agent (assistant:write granted)", false},
		{"auto, not declared", "auto", false, false, "the app is not declared as an agent", true},
		{"stream, not declared", "stream", false, false, "REPLY_MODE stream streams answers natively", true},
		{"edit with the pane, not declared", "edit", true, false, "AGENT_VIEW: the DM's agent pane", true},
		{"edit without the pane", "edit", false, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scopes := slices.Clone(answers)
			if tc.agent {
				scopes = append(scopes, "assistant:write")
			}
			f := newDoctorFakes(t, fakeslack.Config{Scopes: scopes})
			f.in.ReplyMode, f.in.AgentView = tc.mode, tc.agentView
			out, err := runDoctor(t, f.in)
			if (err != nil) != tc.fails {
				t.Errorf("doctor error %v, want failing %v:\n%s", err, tc.fails, out)
			}
			if has := strings.Contains(out, "Agent"); has != (tc.want != "") || !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q (or has an Agent line it should not):\n%s", tc.want, out)
			}
		})
	}
}

// TestDoctorListsSchedules: each scheduled prompt with its next run; one that cannot be read is a
// warning, not a failure.
func TestDoctorListsSchedules(t *testing.T) {
	f := newDoctorFakes(t, fakeslack.Config{})
	next := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	f.in.Schedules = func(context.Context) ([]Scheduled, error) {
		return []Scheduled{{ID: "ab12cd34", Channel: "C1", Creator: "U1", When: "every weekday at 09:00 Europe/Berlin", Next: next}}, nil
	}
	out, _ := runDoctor(t, f.in)
	if got, want := checkLine(out, "Scheduled prompts"), "1 schedule"; !strings.Contains(got, want) {
		t.Errorf("line %q, want %q", got, want)
	}
	if want := "ab12cd34 in C1 by U1: every weekday at 09:00 Europe/Berlin; next 2026-03-02 08:00 UTC"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	f.in.Schedules = func(context.Context) ([]Scheduled, error) { return nil, errors.New("redis: connection refused") }
	out, _ = runDoctor(t, f.in)
	if got, want := checkLine(out, "Scheduled prompts"), "could not be read: redis: connection refused"; !strings.Contains(got, want) {
		t.Errorf("line %q, want %q", got, want)
	}
}

// With SLACK_SEARCH on, the scopes check wants search:read.public and says what needs it; off, it
// is not asked for.
func TestDoctorSearchScope(t *testing.T) {
	base := []string{"app_mentions:read", "chat:write", "channels:history", "groups:history", "im:history",
		"mpim:history", "files:write", "files:read", "users:read", "commands"}
	for _, tc := range []struct {
		name           string
		search, scoped bool
		wantErr        bool
		want           string
	}{
		{"on, missing", true, false, true, "search:read.public: slack_search (SLACK_SEARCH)"},
		{"on, granted", true, true, false, "all 11 scopes the enabled features need are granted"},
		{"off", false, false, false, "all 10 scopes the enabled features need are granted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scopes := slices.Clone(base)
			if tc.scoped {
				scopes = append(scopes, "search:read.public")
			}
			f := newDoctorFakes(t, fakeslack.Config{Scopes: scopes})
			f.in.Search = tc.search
			out, err := runDoctor(t, f.in)
			if (err != nil) != tc.wantErr || !strings.Contains(out, tc.want) {
				t.Errorf("err %v, checklist lacks %q:\n%s", err, tc.want, out)
			}
		})
	}
}
