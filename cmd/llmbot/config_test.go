package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// setEnv makes env the test's process environment for every setting, and for any other name it
// gives (an MCP config's ${VAR}s): a setting it does not name is unset, so the environment the tests
// run in never leaks into them. t.Setenv puts everything back when the test ends.
func setEnv(t testing.TB, env map[string]string) {
	t.Helper()
	for _, s := range settings() {
		t.Setenv(s.Name, "")
		if err := os.Unsetenv(s.Name); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// validEnv is a complete, valid environment.
func validEnv() map[string]string {
	return map[string]string{
		"SLACK_BOT_TOKEN": "xoxb-1-secret",
		"SLACK_APP_TOKEN": "xapp-1-secret",
		"OPENAI_API_KEY":  "sk-secret",
	}
}

func TestDefaults(t *testing.T) {
	setEnv(t, validEnv())
	cfg, problems := loadConfig()
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Config{
		SlackBotToken: "xoxb-1-secret", SlackAppToken: "xapp-1-secret", OpenAIAPIKey: "sk-secret",
		SlackAPIURL: "https://slack.com/api/", OpenAIBaseURL: "https://api.openai.com/v1",
		ChatModel: "gpt-5.4-mini", ImageModel: "gpt-image-2",
		ReplyMode: "auto", StreamRolloverAfter: 4 * time.Minute, StreamIdleLimit: 4 * time.Minute, PlaceholderAfter: time.Second, EditBudgetPerMinute: 50, ContextTokens: 12000,
		Vision: "auto", MaxFileBytes: 20 << 20, MaxFileText: 20000, ImageInputMaxSide: 2048,
		MaxConcurrentReplies: 50, MaxQueuedReplies: 500, ImaginePerUser: 2, FollowUps: true, AnswerBots: false, Buttons: true, NativeTables: true, Feedback: true, AgentView: true,
		LLMConnectTimeout: 10 * time.Second, LLMHeaderTimeout: 120 * time.Second, LLMIdleTimeout: 90 * time.Second,
		LLMStreamCoalesce: 200 * time.Millisecond, ImageTimeout: 180 * time.Second, LLMMaxRetries: 2, LLMStreamUsage: true, ShutdownGrace: 8 * time.Second, ThreadCacheTTL: 6 * time.Hour,
		AskUser: "auto", MaxToolRounds: 5, ToolApprovalTimeout: 2 * time.Minute, ToolCallTimeout: time.Minute, UsageRetentionDays: 90,
		ExternalUsers: "refused", GuestUsers: "members",
		ChannelInstructionsMax: 2000, SchedulesPerChannel: 10, SchedulesPerPerson: 5, ScheduleCatchUp: time.Hour,
		LogLevel: zapcore.InfoLevel,
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", cfg, want)
	}
}

func TestEmptyCountsAsUnset(t *testing.T) {
	env := validEnv()
	env["CHAT_MODEL"] = "  "
	env["SHUTDOWN_GRACE"] = ""
	env["TEMPERATURE"] = ""
	setEnv(t, env)
	cfg, problems := loadConfig()
	if len(problems) != 0 || cfg.ChatModel != "gpt-5.4-mini" || cfg.ShutdownGrace != 8*time.Second || cfg.Temperature != nil {
		t.Errorf("empty values: %+v, %v", cfg, problems)
	}
}

func TestTemperatureZeroIsSent(t *testing.T) {
	env := validEnv()
	env["TEMPERATURE"] = "0"
	setEnv(t, env)
	cfg, _ := loadConfig()
	if cfg.Temperature == nil || *cfg.Temperature != 0 {
		t.Errorf("TEMPERATURE=0 gave %v, want a pointer to 0", cfg.Temperature)
	}
}

func TestMissingConfigListsEverything(t *testing.T) {
	var stdout, stderr bytes.Buffer
	setEnv(t, nil)
	err := run(context.Background(), []string{"llmbot"}, &stdout, &stderr)
	if err == nil {
		t.Fatal("run with no configuration returned nil")
	}
	msg := err.Error()
	for _, want := range []string{
		"3 problem(s)",
		"SLACK_BOT_TOKEN is missing", "OAuth & Permissions",
		"SLACK_APP_TOKEN is missing", "App-Level Tokens", "connections:write",
		"OPENAI_API_KEY is missing", "platform.openai.com",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if stderr.Len() != 0 || stdout.Len() != 0 {
		t.Errorf("run wrote output besides its error: %q %q", stdout.String(), stderr.String())
	}
}

func TestBadValuesAllReported(t *testing.T) {
	env := map[string]string{
		"SLACK_BOT_TOKEN":          "xapp-looks-like-the-app-SECRET",
		"SLACK_APP_TOKEN":          "xoxb-looks-like-the-bot-SECRET",
		"OPENAI_BASE_URL":          "localhost:11434",
		"TEMPERATURE":              "2.5",
		"REPLY_MODE":               "chunks",
		"MAX_CONCURRENT_REPLIES":   "many",
		"SHUTDOWN_GRACE":           "8",
		"FOLLOW_UPS":               "maybe",
		"LOG_FORMAT":               "xml",
		"LOG_LEVEL":                "loud",
		"LLM_HEADERS":              "api-key SECRET",
		"CONTEXT_TOKENS":           "10",
		"LLM_STREAM_COALESCE":      "5s",
		"HEALTH_ADDR":              "8080",
		"IMAGE_TIMEOUT":            "1h",
		"PLACEHOLDER_AFTER":        "-1s",
		"MAX_QUEUED_REPLIES":       "-5",
		"STREAM_ROLLOVER_AFTER":    "5m",
		"STREAM_IDLE_LIMIT":        "10ms",
		"MAX_FILE_BYTES":           "1073741824",
		"IMAGE_INPUT_MAX_SIDE":     "10000",
		"EXTERNAL_USERS":           "allowed",
		"GUEST_USERS":              "no",
		"REDACT":                   "email,postcode",
		"REDACT_PATTERNS":          "customer=CUS",
		"PRICES":                   "gpt-4o=cheap",
		"BUDGET_PERSON_DAILY":      "-1",
		"USAGE_RETENTION_DAYS":     "0",
		"CHANNEL_EDITORS":          "U0123ABCD, alice",
		"CHANNEL_INSTRUCTIONS_MAX": "0",
		"SCHEDULES_PER_PERSON":     "-1",
		"SCHEDULE_CATCH_UP":        "48h",
	}
	setEnv(t, env)
	cfg, problems := loadConfig()
	err := problemsError(append(problems, cfg.problems()...))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`SLACK_BOT_TOKEN does not start with "xoxb-"`,
		`SLACK_APP_TOKEN does not start with "xapp-"`,
		`OPENAI_BASE_URL: "localhost:11434" is not an http(s) URL`,
		"TEMPERATURE: 2.5 is outside 0 to 2",
		`REPLY_MODE: "chunks" is not one of auto, edit, stream`,
		"STREAM_ROLLOVER_AFTER: 5m0s must be at least 1s and under 5m0s",
		"STREAM_IDLE_LIMIT: 10ms must be at least 1s and under 5m0s",
		`MAX_CONCURRENT_REPLIES: "many" is not a whole number`,
		`SHUTDOWN_GRACE: "8" is not a duration`,
		`FOLLOW_UPS: "maybe" is not true or false`,
		`LOG_FORMAT: "xml" is not one of json, console`,
		`LOG_LEVEL: "loud" is not one of debug, info, warn, error`,
		"LLM_HEADERS: entry 1 is not Name=value",
		"CONTEXT_TOKENS: 10 is below 500",
		"LLM_STREAM_COALESCE: 5s must be between 0 and 1s",
		`HEALTH_ADDR: "8080" is not host:port (like :8080, or 127.0.0.1:8080)`,
		"IMAGE_TIMEOUT: 1h0m0s is over 25m0s",
		"PLACEHOLDER_AFTER: -1s must be between 0 and 1m",
		"MAX_QUEUED_REPLIES: -5 is below 0",
		"MAX_FILE_BYTES: 1073741824 must be from 1024 to 52428800",
		"IMAGE_INPUT_MAX_SIDE: 10000 must be at most 4096",
		`EXTERNAL_USERS: "allowed" is not one of refused, members`,
		`GUEST_USERS: "no" is not one of members, refused`,
		`REDACT: unknown kind "POSTCODE" (want email, phone, card, iban, secret or all)`,
		`REDACT_PATTERNS: pattern "customer=CUS": want NAME=regexp, NAME in capital letters`,
		`PRICES: price "gpt-4o=cheap": want model=input/output per million tokens`,
		"BUDGET_PERSON_DAILY: -1 is below 0 (0: no budget)",
		"USAGE_RETENTION_DAYS: 0 is below 1",
		`CHANNEL_EDITORS: "alice" is not a user ID like U0123ABCD`,
		"CHANNEL_INSTRUCTIONS_MAX: 0 is not between 1 and 4000",
		"SCHEDULES_PER_PERSON: -1 is below 0",
		"SCHEDULE_CATCH_UP: 48h0m0s is not between 0 and 24h",
		"32 problem(s)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "SECRET") {
		t.Errorf("message shows a secret value:\n%s", msg)
	}
}

func TestLocalServerNeedsNoKey(t *testing.T) {
	env := validEnv()
	delete(env, "OPENAI_API_KEY")
	env["OPENAI_BASE_URL"] = "http://localhost:11434/v1"
	setEnv(t, env)
	cfg, problems := loadConfig()
	if len(problems) != 0 || cfg.Validate() != nil {
		t.Errorf("a local server without a key: %v %v", problems, cfg.Validate())
	}
}

// TestValuesReadAsWritten: what the pass in front of envconfig keeps as people write values:
// spaces and one pair of quotes around a value are dropped (the quotes are reported), whole
// numbers are decimal, and a value that does not parse is reported and leaves the default.
func TestValuesReadAsWritten(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        any      // the setting's field
		problems    []string // the beginnings of the problems, in order
	}{
		{"CONTEXT_TOKENS", " 08000 ", 8000, nil},
		{"CONTEXT_TOKENS", "010000", 10000, nil},
		{"MAX_CONCURRENT_REPLIES", "0x10", 50, []string{`MAX_CONCURRENT_REPLIES: "0x10" is not a whole number`}},
		{"IMAGINE_DAILY_QUOTA", "1_000", 0, []string{`IMAGINE_DAILY_QUOTA: "1_000" is not a whole number`}},
		{"SHUTDOWN_GRACE", `"3s"`, 3 * time.Second, []string{"SHUTDOWN_GRACE: the value is in quotes"}},
		{"SHUTDOWN_GRACE", ` '8' `, 8 * time.Second, []string{"SHUTDOWN_GRACE: the value is in quotes", `SHUTDOWN_GRACE: "8" is not a duration`}},
		{"SHUTDOWN_GRACE", "\t5s\n", 5 * time.Second, nil},
		{"TEMPERATURE", "'0.5'", new(0.5), []string{"TEMPERATURE: the value is in quotes"}},
		{"TEMPERATURE", "warm", (*float64)(nil), []string{`TEMPERATURE: "warm" is not a number`}},
		{"TEMPERATURE", "''", (*float64)(nil), []string{"TEMPERATURE: the value is in quotes"}},
		{"LOG_LEVEL", "WARN", zapcore.WarnLevel, nil},
		{"FOLLOW_UPS", "0", false, nil},
		{"BUTTONS", "yes", true, []string{`BUTTONS: "yes" is not true or false`}},
		{"CHAT_MODEL", "  ", "gpt-5.4-mini", nil},
		{"OPENAI_API_KEY", "'sk-1'", "sk-1", []string{"OPENAI_API_KEY: the value is in quotes"}},
	} {
		env := validEnv()
		env[tc.name] = tc.value
		setEnv(t, env)
		cfg, problems := loadConfig()
		if got := settingField(cfg, tc.name); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s=%q: %#v, want %#v", tc.name, tc.value, got, tc.want)
		}
		if len(problems) != len(tc.problems) {
			t.Errorf("%s=%q: problems %q, want %d", tc.name, tc.value, problems, len(tc.problems))
			continue
		}
		for i, want := range tc.problems {
			if !strings.HasPrefix(problems[i], want) {
				t.Errorf("%s=%q: problem %q, want it to begin %q", tc.name, tc.value, problems[i], want)
			}
		}
	}
}

// settingField is the value of cfg's field for the setting name.
func settingField(cfg Config, name string) any {
	v := reflect.ValueOf(cfg)
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get("envconfig") == name {
			return v.Field(i).Interface()
		}
	}
	return nil
}

// TestLoadReadsTheEnvironmentAsMeant: loadConfig reads the process environment with envconfig,
// and leaves there what it read: a value in quotes without them, a blank value unset, a number in
// decimal, so whatever reads the environment after it (a stdio MCP server inherits it) reads the same.
func TestLoadReadsTheEnvironmentAsMeant(t *testing.T) {
	env := validEnv()
	env["CHAT_MODEL"] = `"quoted-model"`
	env["IMAGE_MODEL"] = "  "
	env["CONTEXT_TOKENS"] = "08000"
	setEnv(t, env)
	cfg, problems := loadConfig()
	if cfg.ChatModel != "quoted-model" || cfg.ImageModel != "gpt-image-2" || cfg.ContextTokens != 8000 || len(problems) != 1 {
		t.Errorf("loaded CHAT_MODEL %q, IMAGE_MODEL %q, CONTEXT_TOKENS %d (problems %q); want the model unquoted, the default, 8000 and the quotes said once",
			cfg.ChatModel, cfg.ImageModel, cfg.ContextTokens, problems)
	}
	_, imageSet := os.LookupEnv("IMAGE_MODEL")
	if os.Getenv("CHAT_MODEL") != "quoted-model" || imageSet || os.Getenv("CONTEXT_TOKENS") != "8000" {
		t.Errorf("after loadConfig: CHAT_MODEL %q, IMAGE_MODEL set %v, CONTEXT_TOKENS %q; want them as read",
			os.Getenv("CHAT_MODEL"), imageSet, os.Getenv("CONTEXT_TOKENS"))
	}
}

func TestParseHeaders(t *testing.T) {
	h, err := parseHeaders(" api-key = abc , X-Org=o=1")
	if err != nil {
		t.Fatal(err)
	}
	if h.Get("Api-Key") != "abc" || h.Get("X-Org") != "o=1" || len(h) != 2 {
		t.Errorf("headers %v", h)
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var stdout, stderr bytes.Buffer
		setEnv(t, nil)
		if err := run(context.Background(), []string{"llmbot", arg}, &stdout, &stderr); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		for _, s := range settings() {
			if !strings.Contains(stdout.String(), s.Name) {
				t.Errorf("%s output lacks %s", arg, s.Name)
			}
		}
	}
}

// TestVersionAndUnknownFlags: --version prints one line; a wrong flag is one error naming it and
// --help, with nothing printed besides (main prints the error once).
func TestVersionAndUnknownFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	setEnv(t, nil)
	if err := run(context.Background(), []string{"llmbot", "--version"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "llmbot ") || strings.Count(out, "\n") != 1 || len(out) < len("llmbot x\n") {
		t.Errorf("--version printed %q, want one line \"llmbot <version>\"", out)
	}
	stdout.Reset()
	setEnv(t, nil)
	err := run(context.Background(), []string{"llmbot", "--verbose"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "-verbose") || !strings.Contains(err.Error(), "run with --help") {
		t.Errorf("unknown flag: error %v, want it named with a pointer to --help", err)
	}
	if stdout.Len()+stderr.Len() != 0 {
		t.Errorf("unknown flag printed %q and %q, want nothing (the error says it)", stdout.String(), stderr.String())
	}
}

// TestHealthAddrInUse: a health port that cannot be had stops the bot with a message naming
// HEALTH_ADDR, before it connects anywhere.
func TestHealthAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := validEnv()
	env["HEALTH_ADDR"] = ln.Addr().String()
	env["SLACK_API_URL"] = "http://127.0.0.1:1/api/" // never reached
	setEnv(t, env)
	err = run(t.Context(), []string{"llmbot"}, io.Discard, io.Discard)
	if err == nil || !strings.HasPrefix(err.Error(), "HEALTH_ADDR: ") || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("run = %v, want a HEALTH_ADDR error saying the address is in use", err)
	}
}

// TestBaseURLWithoutPathWarns: a base URL without /v1 (the commonest set-up mistake) is accepted,
// as some services need another path, but the log says at once what answers would then get.
func TestBaseURLWithoutPathWarns(t *testing.T) {
	for _, tc := range []struct {
		url  string
		warn bool
	}{
		{"http://127.0.0.1:1", true},
		{"http://127.0.0.1:1/", true},
		{"http://127.0.0.1:1/v1", false},
		{"http://127.0.0.1:1/v1beta/openai/", false},
	} {
		env := validEnv()
		env["OPENAI_BASE_URL"] = tc.url
		env["SLACK_API_URL"] = "http://127.0.0.1:1/api/" // refused: run waits at auth.test until stopped
		var stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		setEnv(t, env)
		if err := run(ctx, []string{"llmbot"}, io.Discard, &stderr); err != nil {
			t.Errorf("%s: run stopped while starting = %v, want nil", tc.url, err)
		}
		cancel()
		if got := strings.Contains(stderr.String(), "OPENAI_BASE_URL has no path"); got != tc.warn {
			t.Errorf("%s: warned %v, want %v; log:\n%s", tc.url, got, tc.warn, stderr.String())
		}
	}
}

// TestHelpMarkdown keeps testdata/settings.md (the README's settings table) in step with the
// struct tags; go test ./cmd/llmbot -run HelpMarkdown -update rewrites it.
func TestHelpMarkdown(t *testing.T) {
	var stdout bytes.Buffer
	setEnv(t, nil)
	if err := run(context.Background(), []string{"llmbot", "--help-markdown"}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "settings.md")
	if *update {
		if err := os.WriteFile(golden, stdout.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); got != string(want) {
		t.Errorf("--help-markdown differs from %s (run with -update):\n%s", golden, got)
	}
	if n := strings.Count(stdout.String(), "\n| `"); n != len(settings()) {
		t.Errorf("%d rows, want %d", n, len(settings()))
	}
}

func TestLoggerFormats(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, zapcore.InfoLevel, "")
	log.Debug("hidden")
	log.Info("shown", zapcoreString("channel", "C1"))
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not JSON when not on a terminal: %q", buf.String())
	}
	if line["msg"] != "shown" || line["channel"] != "C1" || line["level"] != "info" || line["time"] == nil {
		t.Errorf("log line %v", line)
	}
	buf.Reset()
	newLogger(&buf, zapcore.DebugLevel, "console").Debug("plain")
	if !strings.Contains(buf.String(), "DEBUG\tplain") {
		t.Errorf("console line %q", buf.String())
	}
}

func zapcoreString(k, v string) zapcore.Field {
	return zapcore.Field{Key: k, Type: zapcore.StringType, String: v}
}

// TestThreadCacheTTLBounds: the thread cache is short-lived: 0 (none) to 24h.
func TestThreadCacheTTLBounds(t *testing.T) {
	for _, c := range []struct {
		value, problem string
	}{
		{"0", ""},
		{"24h", ""},
		{"25h", "THREAD_CACHE_TTL: 25h0m0s must be between 0 and 24h0m0s"},
		{"-1h", "THREAD_CACHE_TTL: -1h0m0s must be between 0 and 24h0m0s"},
	} {
		env := validEnv()
		env["THREAD_CACHE_TTL"] = c.value
		setEnv(t, env)
		cfg, problems := loadConfig()
		err := problemsError(append(problems, cfg.problems()...))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if c.problem == "" && err != nil || !strings.Contains(got, c.problem) {
			t.Errorf("THREAD_CACHE_TTL=%s: problems %q, want %q", c.value, got, c.problem)
		}
	}
}
