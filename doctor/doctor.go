// Package doctor is `llmbot doctor`: the bot's configuration checked end to end (the settings,
// the Slack bot token and its scopes, a Socket Mode connection, the chat and image models) and
// printed as a checklist with a fix for each failure. It owns the checks, their time limits and
// their wording; the command gives it, as an Input, the settings the bot would run with, so it
// checks what the bot runs. Tokens and keys never appear in its output.
package doctor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/llm"
)

// Time bounds of the checks. The Slack checks and the model checks run side by side, so the
// whole run takes at most about max(auth.test+bots.info+socket+close, chat+models), 23 s.
const (
	doctorAuthTimeout    = 8 * time.Second  // auth.test
	doctorBotInfoTimeout = 4 * time.Second  // bots.info (optional: the app of the bot token)
	doctorSocketTimeout  = 10 * time.Second // apps.connections.open + WebSocket dial + hello
	doctorCloseWait      = time.Second      // Slack's answer to our close frame
	doctorChatTimeout    = 15 * time.Second // one short completion, connection included
	doctorModelsTimeout  = 5 * time.Second  // GET {base}/models
	doctorMaxModelsBody  = 8 << 20          // a long model list (OpenRouter's is several MB with descriptions)
	doctorPrompt         = "Reply with the single word: ok"
)

// ErrReported is wrapped by Run's error when the checklist already said what failed: the caller
// exits non-zero without printing it again.
var ErrReported = errors.New("already reported")

// Input is what the checks need from the bot's settings.
type Input struct {
	// Problems are those a normal start would refuse to start with (none: the settings are
	// valid), in the order they are listed: grouped by the tiers of their settings.
	Problems []Problem

	SlackBotToken string // SLACK_BOT_TOKEN
	SlackAppToken string // SLACK_APP_TOKEN
	SlackAPIURL   string // SLACK_API_URL
	// SlackHTTPClient makes the Web API calls, as the bot's client does (nil: http.DefaultClient).
	SlackHTTPClient *http.Client

	// LLM is the model client's configuration as the bot builds it, without hooks: its chat model
	// is asked with its URL, key and headers, under the checks' own time limits and without retries.
	LLM llm.Config
	// BadHeaders says LLM_HEADERS did not parse, so LLM lacks headers the service may need: the
	// model checks are skipped (the settings check reports it).
	BadHeaders bool
	// ChannelModels are the chat models CHANNEL_CONFIG names, each with its channels: they answer
	// there, so each is asked too.
	ChannelModels map[string][]string

	// The features whose scopes the bot token needs.
	ReplyMode string // REPLY_MODE: "stream" and "auto" write with native streaming (auto in DMs)
	AgentView bool   // AGENT_VIEW: the DM is the agent pane
	FollowUps bool   // FOLLOW_UPS: thread messages without a mention
	Vision    string // VISION: "off" reads no pictures (text files still need files:read)
	Search    bool   // SLACK_SEARCH: slack_search needs search:read.public

	// RedisHost is REDIS_URL's host ("": not set, the Redis check is skipped), and PingRedis
	// connects to it as the bot does and asks PING.
	RedisHost string
	PingRedis func(ctx context.Context) error
	// ThreadCacheTTL is THREAD_CACHE_TTL: the Redis check says where the threads are cached
	// (0: nothing is said, there is no cache).
	ThreadCacheTTL time.Duration

	// MCPServers starts the MCP servers of MCP_CONFIG as the bot does and reports each one and its
	// tools (tools.go); nil: none configured.
	MCPServers func(ctx context.Context) []MCPServer

	// Controls are usage counting, budgets and redaction as the settings turn them on.
	Controls Controls
	// Schedules reads the scheduled prompts and the next run of each from the shared state, as the
	// bot does; nil: the state was not opened (the check is skipped).
	Schedules func(ctx context.Context) ([]Scheduled, error)
}

// Problem is one problem of the settings, with the heading of its setting's tier (Essentials,
// Features, ...; "": it names no setting). The checklist prints a heading where it changes.
type Problem struct {
	Tier string
	Text string
}

// status is the outcome of one check.
type status int

const (
	statusOK   status = iota
	statusWarn        // works, or may work; worth a look
	statusFail        // will not work until fixed
	statusSkip        // not run: an earlier problem makes it meaningless
)

func (s status) symbol() string {
	switch s {
	case statusOK:
		return "✓"
	case statusWarn:
		return "!"
	case statusFail:
		return "✗"
	}
	return "-"
}

// result is one line of the checklist, with indented notes and what to do.
type result struct {
	name   string
	status status
	detail string
	notes  []string
	fix    string
}

func ok(name, format string, args ...any) result {
	return result{name: name, status: statusOK, detail: fmt.Sprintf(format, args...)}
}

func fail(name, detail, fix string, notes ...string) result {
	return result{name: name, status: statusFail, detail: detail, fix: fix, notes: notes}
}

func skip(name, why string) result {
	return result{name: name, status: statusSkip, detail: "skipped (" + why + ")"}
}

// printUsage is `llmbot doctor --help`.
func printUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: llmbot doctor

Checks the configuration end to end, with the same environment as the bot, and prints a
checklist with the fix for each failure. It exits non-zero when a check fails.

  1. Settings: the same validation as a normal start, its problems under the headings of
     llmbot --help (essentials, features, limits, operations).
  2. Slack bot token: auth.test.
  3. Slack scopes: those granted to the bot token against those the enabled features need.
  4. Socket Mode: apps.connections.open with the app token, then the WebSocket until Slack's hello.
     It is safe while the bot runs: the connection is closed right after hello (an event Slack
     happens to send to it in that moment is not acknowledged, so Slack sends it again).
  5. Chat model: a one-word request to CHAT_MODEL, and to each model CHANNEL_CONFIG names (a few tokens each).
  6. Image model: IMAGE_MODEL is set, and listed by the service if it lists models (no image is
     generated: that costs money).
  7. Redis, when REDIS_URL is set: connect and PING, as the replicas do to share their state.
  8. Tools, when MCP_CONFIG is set: each server started and its tools listed.
  9. Usage, budgets and redaction: which are on (where usage is counted, the budgets, what is
     redacted before the model, the /usage admins and prices).

Every network step has a time limit; the whole run takes under 30 seconds. Tokens and keys are
never printed.
`)
}

// Run is `llmbot doctor`, args being the command line after "doctor": it runs every check with
// in and prints the checklist on stdout. It returns an error wrapping ErrReported when a check
// failed.
func Run(ctx context.Context, args []string, in Input, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llmbot doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(stdout) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("doctor: unknown argument %q (run llmbot doctor --help)", fs.Arg(0))
	}

	out := &checklist{w: stdout, secrets: secretsOf(in)}
	out.header(in)
	out.print(checkSettings(in))

	// The model checks do not depend on Slack: they run meanwhile and are printed after.
	modelResults := make(chan []result, 1) // size 1: the goroutine never waits for the printer
	go func() { modelResults <- modelChecks(ctx, in) }()
	for _, r := range slackChecks(ctx, in) {
		out.print(r)
	}
	for _, r := range <-modelResults {
		out.print(r)
	}
	out.print(checkRedis(ctx, in))
	for _, r := range checkTools(ctx, in) {
		out.print(r)
	}
	out.print(checkControls(in))
	for _, r := range checkSchedules(ctx, in) {
		out.print(r)
	}
	return out.summary()
}

// checklist prints results, with every secret of the configuration blanked out of them
// (checks never put one in; this is the net under that rule).
type checklist struct {
	w       io.Writer
	secrets []string
	failed  int
	warned  int
	skipped int
}

func (c *checklist) line(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	for _, secret := range c.secrets {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	fmt.Fprintln(c.w, s)
}

func (c *checklist) header(in Input) {
	c.line("llmbot doctor: Slack at %s, model service at %s", hostOf(in.SlackAPIURL), hostOf(in.LLM.BaseURL))
	c.line("")
}

func (c *checklist) print(r result) {
	switch r.status {
	case statusFail:
		c.failed++
	case statusWarn:
		c.warned++
	case statusSkip:
		c.skipped++
	}
	c.line("%s %s: %s", r.status.symbol(), r.name, r.detail)
	for _, n := range r.notes {
		c.line("    %s", n)
	}
	if r.fix != "" {
		c.line("    fix: %s", r.fix)
	}
}

func (c *checklist) summary() error {
	c.line("")
	var extra []string
	if c.warned > 0 {
		extra = append(extra, plural(c.warned, "warning", "warnings"))
	}
	if c.skipped > 0 {
		extra = append(extra, plural(c.skipped, "check", "checks")+" skipped")
	}
	tail := ""
	if len(extra) > 0 {
		tail = " (" + strings.Join(extra, ", ") + ")"
	}
	if c.failed == 0 {
		c.line("All checks passed%s.", tail)
		return nil
	}
	c.line("%s failed%s.", plural(c.failed, "check", "checks"), tail)
	return fmt.Errorf("doctor: %s failed: %w", plural(c.failed, "check", "checks"), ErrReported)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// secretsOf lists the values that must never be printed.
func secretsOf(in Input) []string {
	var s []string
	for _, v := range []string{in.SlackBotToken, in.SlackAppToken, in.LLM.APIKey} {
		if len(v) >= 4 {
			s = append(s, v)
		}
	}
	for _, vs := range in.LLM.Headers {
		for _, v := range vs {
			if len(v) >= 4 {
				s = append(s, v)
			}
		}
	}
	return s
}

// checkSettings is the validation of a normal start.
func checkSettings(in Input) result {
	if len(in.Problems) > 0 {
		return fail("Settings", plural(len(in.Problems), "problem", "problems"),
			"set the variables named above (llmbot --help lists every setting with its default)",
			grouped(in.Problems)...)
	}
	follow := "off"
	if in.FollowUps {
		follow = "on"
	}
	return ok("Settings", "valid (REPLY_MODE %s, FOLLOW_UPS %s, CHAT_MODEL %s, IMAGE_MODEL %s)",
		in.ReplyMode, follow, in.LLM.ChatModel, in.LLM.ImageModel)
}

// grouped lists problems as bullets, each group of one tier under its heading.
func grouped(problems []Problem) []string {
	var out []string
	for i, p := range problems {
		if p.Tier != "" && (i == 0 || problems[i-1].Tier != p.Tier) {
			out = append(out, p.Tier+":")
		}
		out = append(out, "- "+p.Text)
	}
	return out
}

func validHTTPURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// slackChecks are checks 2 to 4: bot token, scopes, Socket Mode.
func slackChecks(ctx context.Context, in Input) []result {
	const (
		tokenCheck  = "Slack bot token"
		scopesCheck = "Slack scopes"
		socketCheck = "Socket Mode"
	)
	if !validHTTPURL(in.SlackAPIURL) {
		why := "SLACK_API_URL is not a URL"
		return []result{skip(tokenCheck, why), skip(scopesCheck, why), skip(socketCheck, why)}
	}
	api := slack.New(in.SlackBotToken,
		slack.OptionAPIURL(strings.TrimRight(in.SlackAPIURL, "/")+"/"),
		slack.OptionAppLevelToken(in.SlackAppToken),
		slack.OptionHTTPClient(cmp.Or(in.SlackHTTPClient, http.DefaultClient)),
	)
	var (
		out    []result
		botApp string // the app of the bot token, when Slack says
	)
	if in.SlackBotToken == "" {
		out = append(out, skip(tokenCheck, "SLACK_BOT_TOKEN is not set"), skip(scopesCheck, "no bot token"))
	} else {
		actx, cancel := context.WithTimeout(ctx, doctorAuthTimeout)
		auth, err := api.AuthTestContext(actx)
		cancel()
		if err != nil {
			out = append(out, explainBotToken(err, in.SlackAPIURL), skip(scopesCheck, "the bot token did not work"))
		} else if auth.BotID == "" {
			out = append(out, fail(tokenCheck,
				fmt.Sprintf("valid, but it is a user's token (@%s in %s, %s), not the bot's", auth.User, auth.Team, auth.TeamID),
				"set SLACK_BOT_TOKEN to the Bot User OAuth Token (xoxb-...) under OAuth & Permissions in your app's settings (https://api.slack.com/apps)"),
				skip(scopesCheck, "not a bot token"))
		} else {
			out = append(out, ok(tokenCheck, "valid (bot @%s in %s, %s)", auth.User, auth.Team, auth.TeamID),
				checkScopes(in, auth.Header))
			if in.Streams() || in.AgentView {
				out = append(out, checkAgent(in, auth.Header))
			}
			botApp = botAppID(ctx, api, auth.BotID)
		}
	}
	if in.SlackAppToken == "" {
		out = append(out, skip(socketCheck, "SLACK_APP_TOKEN is not set"))
	} else {
		out = append(out, checkSocketMode(ctx, api, botApp))
	}
	return out
}

// botAppID returns the app the bot belongs to (bots.info, which needs users:read), or "" when
// Slack does not say.
func botAppID(ctx context.Context, api *slack.Client, botID string) string {
	ctx, cancel := context.WithTimeout(ctx, doctorBotInfoTimeout)
	defer cancel()
	bot, err := api.GetBotInfoContext(ctx, slack.GetBotInfoParameters{Bot: botID})
	if err != nil {
		return ""
	}
	return bot.AppID
}

// slackFixToken is what to do about a bad bot token.
const slackFixToken = "copy the Bot User OAuth Token (xoxb-...) again from OAuth & Permissions in your app's settings (https://api.slack.com/apps) into SLACK_BOT_TOKEN; if the app was uninstalled, install it again first"

// explainBotToken turns an auth.test failure at apiURL into a checklist line.
func explainBotToken(err error, apiURL string) result {
	const name = "Slack bot token"
	var se slack.SlackErrorResponse
	var rl *slack.RateLimitedError
	switch {
	case errors.As(err, &se):
		switch se.Err {
		case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired":
			return fail(name, "Slack rejected SLACK_BOT_TOKEN ("+se.Err+")", slackFixToken)
		case "not_allowed_token_type":
			return fail(name, "SLACK_BOT_TOKEN is not a bot token (not_allowed_token_type)", slackFixToken)
		}
		return fail(name, "auth.test failed: "+se.Err, slackFixToken)
	case errors.As(err, &rl):
		return fail(name, fmt.Sprintf("Slack is rate limiting auth.test (retry after %s)", rl.RetryAfter),
			"run llmbot doctor again in a minute")
	}
	return fail(name, "cannot reach Slack at "+hostOf(apiURL)+": "+errText(err),
		"check SLACK_API_URL (https://slack.com/api/ unless you are on GovSlack) and that this machine can reach it over HTTPS (proxy: HTTPS_PROXY)")
}

// scopeNeed is one bot scope and what needs it.
type scopeNeed struct {
	scope string
	why   string
}

// neededScopes lists the bot scopes the enabled features need, in the order of manifest.yaml.
// Streams reports whether the bot writes some answers with Slack's native streaming: REPLY_MODE
// stream everywhere, auto in DMs and the agent pane.
func (in Input) Streams() bool { return in.ReplyMode == "stream" || in.ReplyMode == "auto" }

func neededScopes(in Input) []scopeNeed {
	followUps := func(s string) string {
		if in.FollowUps {
			return s + "; follow-ups without a mention (FOLLOW_UPS)"
		}
		return s
	}
	write := "posting and editing answers"
	if in.Streams() {
		write += ", native streaming (REPLY_MODE " + in.ReplyMode + ")"
	}
	summaries := "; /summarize and Summarize thread there"
	need := []scopeNeed{
		{"app_mentions:read", "app_mention events: someone @mentions the bot"},
		{"channels:history", followUps("reading threads in public channels" + summaries)},
		{"groups:history", followUps("reading threads in private channels" + summaries)},
		{"im:history", "direct messages (message.im) and their history" + summaries},
		{"mpim:history", followUps("group DMs the bot is added to" + summaries)},
		{"chat:write", write},
		{"files:write", "/imagine: uploading the picture"},
		{"files:read", filesWhy(in.Vision)},
		{"users:read", "people's names, so the model knows who said what"},
	}
	if in.Search {
		need = append(need, scopeNeed{"search:read.public", "slack_search (SLACK_SEARCH): assistant.search.context in public channels"})
	}
	return need
}

// filesWhy is why files:read is needed: the text files people share are always read, their
// pictures unless VISION is off.
func filesWhy(vision string) string {
	if vision == "off" {
		return "reading the text files people share (logs, code, CSV)"
	}
	return "reading the files people share: pictures for the model (VISION " + cmp.Or(vision, "auto") + "), text files"
}

// checkScopes compares the x-oauth-scopes header of auth.test with what the features need.
func checkScopes(in Input, h http.Header) result {
	const name = "Slack scopes"
	raw := h.Get("X-OAuth-Scopes")
	if strings.TrimSpace(raw) == "" {
		return result{name: name, status: statusWarn,
			detail: "Slack did not say which scopes the bot token has (no x-oauth-scopes header), so they were not checked",
			notes:  []string{"a proxy between here and Slack may drop the header"},
			fix:    "compare OAuth & Permissions > Bot Token Scopes in your app's settings with manifest.yaml"}
	}
	granted := map[string]bool{}
	for _, s := range strings.Split(raw, ",") {
		granted[strings.TrimSpace(s)] = true
	}
	need := neededScopes(in)
	var missing, notes []string
	for _, n := range need {
		if !granted[n.scope] {
			missing = append(missing, n.scope)
			notes = append(notes, n.scope+": "+n.why)
		}
	}
	eventsNote := "event subscriptions cannot be read with a token: if mentions or DMs get no answer, compare Event Subscriptions in your app's settings with manifest.yaml"
	if len(missing) > 0 {
		return fail(name, "missing "+strings.Join(missing, ", "),
			"add them under OAuth & Permissions > Bot Token Scopes in your app's settings (or re-create the app from manifest.yaml), then reinstall the app (Install App > Reinstall to Workspace)",
			notes...)
	}
	// Slack adds the commands scope with the app's first slash command or shortcut and lists it
	// among the bot token's scopes; were a workspace not to list it, the commands may still
	// work, so this is a warning, not a failure.
	if !granted["commands"] {
		return result{name: name, status: statusWarn,
			detail: fmt.Sprintf("the %d scopes answers need are granted; commands is not", len(need)),
			notes: []string{"commands: the /imagine and /summarize slash commands and the Summarize thread message shortcut " +
				"(Slack adds it with the app's first slash command)", "note: " + eventsNote},
			fix: "if /imagine, /summarize or Summarize thread does nothing, add them under Slash Commands and Interactivity & Shortcuts " +
				"in your app's settings (or re-create the app from manifest.yaml), then reinstall the app"}
	}
	return result{name: name, status: statusOK,
		detail: fmt.Sprintf("all %d scopes the enabled features need are granted", len(need)+1),
		notes:  []string{"note: " + eventsNote}}
}

// agentScope is the scope Slack grants an app declared as an agent (features.agent_view).
const agentScope = "assistant:write"

// checkAgent checks that the app is declared as an agent, as native streaming (Slack's agent
// sessions and their Stop) and the agent pane need: its bot token then has assistant:write.
func checkAgent(in Input, h http.Header) result {
	const name = "Agent"
	raw := h.Get("X-OAuth-Scopes")
	if strings.TrimSpace(raw) == "" {
		return result{name: name, status: statusWarn, detail: "not checked: Slack did not say which scopes the bot token has",
			fix: "check that your app's manifest has features.agent_view, as manifest.yaml does"}
	}
	for s := range strings.SplitSeq(raw, ",") {
		if strings.TrimSpace(s) == agentScope {
			return ok(name, "declared as an agent (%s granted): agent sessions, their Stop and the agent pane work", agentScope)
		}
	}
	var uses []string
	if in.Streams() {
		uses = append(uses, "REPLY_MODE "+in.ReplyMode+" streams answers natively: Slack shows its Stop on them, which does "+
			"nothing and leaves a spinner for an hour unless the app keeps agent sessions, which only agents may")
	}
	if in.AgentView {
		uses = append(uses, "AGENT_VIEW: the DM's agent pane (suggested prompts, titles, the thinking status) needs "+agentScope)
	}
	return fail(name, "the app is not declared as an agent (its bot token lacks "+agentScope+")",
		"add features.agent_view to your app's manifest (App Manifest in your app's settings; manifest.yaml has it) and "+
			"reinstall the app (Install App > Reinstall to Workspace); or set REPLY_MODE=edit and AGENT_VIEW=false",
		uses...)
}

// appTokenFix is what to do about a bad app-level token.
const appTokenFix = "generate an app-level token with the connections:write scope under Basic Information > App-Level Tokens in your app's settings (https://api.slack.com/apps) and set SLACK_APP_TOKEN to it (xapp-...)"

// socketModeFix is what to do when Slack will not open a Socket Mode connection.
const socketModeFix = "turn on Socket Mode under Settings > Socket Mode in your app's settings (https://api.slack.com/apps); the app-level token needs the connections:write scope"

// checkSocketMode opens a Socket Mode connection as the bot does, waits for Slack's hello and
// closes it.
//
// botApp, when known, is the app of the bot token: the app-level token must be the same app's,
// or Slack sends this bot's events to a connection of another app.
func checkSocketMode(ctx context.Context, api *slack.Client, botApp string) result {
	const name = "Socket Mode"
	ctx, cancel := context.WithTimeout(ctx, doctorSocketTimeout)
	defer cancel()
	_, wsURL, err := api.StartSocketModeContext(ctx)
	if err != nil {
		var se slack.SlackErrorResponse
		if errors.As(err, &se) {
			switch se.Err {
			case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired":
				return fail(name, "Slack rejected SLACK_APP_TOKEN ("+se.Err+")", appTokenFix)
			case "not_allowed_token_type":
				return fail(name, "SLACK_APP_TOKEN is not an app-level token (not_allowed_token_type)", appTokenFix)
			case "missing_scope":
				return fail(name, "the app-level token lacks the connections:write scope (missing_scope)", appTokenFix)
			}
			return fail(name, "apps.connections.open failed: "+se.Err, socketModeFix)
		}
		return fail(name, "apps.connections.open failed: "+errText(err),
			"check SLACK_API_URL and that this machine can reach Slack over HTTPS (proxy: HTTPS_PROXY)")
	}
	host := hostOf(wsURL) // never the whole URL: its ticket opens a connection
	dialer := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: doctorSocketTimeout}
	conn, resp, err := dialer.DialContext(ctx, wsURL, http.Header{"Origin": {"https://api.slack.com"}})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		detail := "cannot open the WebSocket to " + host + ": " + scrub(errText(err), wsURL)
		if resp != nil {
			detail += " (HTTP " + resp.Status + ")"
		}
		return fail(name, detail,
			"allow outbound WebSocket connections (wss://, port 443) to "+host+" through firewalls and proxies (HTTPS_PROXY)")
	}
	defer conn.Close()
	hello, err := awaitHello(ctx, conn)
	closeSocket(conn)
	if err != nil {
		var d disconnectError
		if errors.As(err, &d) && d.reason == "link_disabled" {
			return fail(name, "Slack closed the connection: Socket Mode is turned off for this app (link_disabled)", socketModeFix)
		}
		return fail(name, "no hello from Slack on "+host+": "+scrub(errText(err), wsURL),
			"check that Socket Mode is on (Settings > Socket Mode) and that WebSocket traffic to "+host+" is not cut by a proxy")
	}
	app := hello.ConnectionInfo.AppID
	if botApp != "" && app != "" && app != botApp {
		return fail(name, fmt.Sprintf("connected, but SLACK_APP_TOKEN belongs to app %s and SLACK_BOT_TOKEN to app %s: the bot's events would never reach it", app, botApp),
			"take both tokens from the same app at https://api.slack.com/apps: the bot token under OAuth & Permissions, the app-level token under Basic Information > App-Level Tokens")
	}
	return ok(name, "connected to app %s, Slack said hello (it counts %s for this app, this one included; at most 10)",
		cmp.Or(app, "?"), plural(hello.NumConnections, "connection", "connections"))
}

// helloFrame is the part of Slack's first Socket Mode frame the doctor reads.
type helloFrame struct {
	Type           string `json:"type"`
	Reason         string `json:"reason"`
	NumConnections int    `json:"num_connections"`
	ConnectionInfo struct {
		AppID string `json:"app_id"`
	} `json:"connection_info"`
}

// disconnectError is a disconnect frame received instead of hello.
type disconnectError struct{ reason string }

func (d disconnectError) Error() string { return "Slack sent disconnect (" + d.reason + ")" }

// awaitHello reads frames until hello, a disconnect, an error or ctx's deadline.
func awaitHello(ctx context.Context, conn *websocket.Conn) (helloFrame, error) {
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Now()) }) // cancellation ends the read
	defer stop()
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return helloFrame{}, err
		}
		var f helloFrame
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		switch f.Type {
		case "hello":
			return f, nil
		case "disconnect":
			return helloFrame{}, disconnectError{reason: f.Reason}
		}
		// Anything else before hello (Slack sends hello first) is left unacknowledged: Slack retries it.
	}
}

// closeSocket sends a normal close frame and waits briefly for Slack's, so the connection ends
// cleanly rather than being cut.
func closeSocket(conn *websocket.Conn) {
	deadline := time.Now().Add(doctorCloseWait)
	if conn.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, "llmbot doctor done"), deadline) != nil {
		return
	}
	_ = conn.SetReadDeadline(deadline)
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			return // the close frame in answer (or the deadline)
		}
	}
}

// scrub removes s (a URL with a ticket) from an error text.
func scrub(text, s string) string {
	if s == "" {
		return text
	}
	return strings.ReplaceAll(text, s, "[socket url]")
}

// errText is an error's text on one line.
func errText(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// modelChecks are checks 5 and 6: the chat model answers, the image model is configured.
func modelChecks(ctx context.Context, in Input) []result {
	const (
		chatCheck  = "Chat model"
		imageCheck = "Image model"
	)
	if in.BadHeaders || !validHTTPURL(in.LLM.BaseURL) {
		why := "OPENAI_BASE_URL or LLM_HEADERS is not valid"
		return []result{skip(chatCheck, why), skip(imageCheck, why)}
	}
	c := modelCheck{cfg: in.LLM}
	// CHAT_MODEL and the models CHANNEL_CONFIG names (they answer in their channels) are each asked
	// the same word, all at once: together they take no longer than one.
	models := maps.Clone(in.ChannelModels)
	delete(models, in.LLM.ChatModel)
	names := slices.Sorted(maps.Keys(models))
	out := make([]result, 1+len(names))
	var wg sync.WaitGroup
	wg.Go(func() { out[0] = c.chat(ctx) })
	for i, model := range names {
		wg.Go(func() {
			oc := c
			oc.cfg.ChatModel = model
			r := oc.chat(ctx)
			r.name = chatCheck + " " + model + " (CHANNEL_CONFIG: " + strings.Join(models[model], ", ") + ")"
			if r.status != statusOK && r.fix != "" {
				r.fix = strings.Replace(r.fix, "CHAT_MODEL", "the channel's model in CHANNEL_CONFIG", 1)
			}
			out[1+i] = r
		})
	}
	wg.Wait()
	return append(out, c.image(ctx, out[0].status != statusFail))
}

// modelCheck holds what the model checks share: the model client's configuration.
type modelCheck struct {
	cfg llm.Config
}

// chat sends the one-word request. No retries: the point is to see the first answer.
func (m modelCheck) chat(ctx context.Context) result {
	const name = "Chat model"
	if m.cfg.ChatModel == "" {
		return fail(name, "CHAT_MODEL is empty", "set CHAT_MODEL to a chat model your service offers")
	}
	connect := m.cfg.ConnectTimeout
	if connect <= 0 || connect > doctorChatTimeout {
		connect = doctorChatTimeout
	}
	var tempDropped atomic.Bool
	lc := m.cfg // what the bot runs, with doctor's short limits and no retries
	lc.ConnectTimeout, lc.HeaderTimeout, lc.IdleTimeout, lc.MaxRetries = connect, doctorChatTimeout, doctorChatTimeout, -1
	lc.Hooks = llm.Hooks{TemperatureDropped: func(string) { tempDropped.Store(true) }}
	client, err := llm.New(lc)
	if err != nil {
		return fail(name, "cannot build the model client: "+errText(err), "fix OPENAI_BASE_URL and OPENAI_API_KEY")
	}
	ctx, cancel := context.WithTimeout(ctx, doctorChatTimeout)
	defer cancel()
	start := time.Now()
	comp, err := client.Complete(ctx, llm.ChatRequest{Messages: []llm.Message{{Role: llm.RoleUser, Content: doctorPrompt}}})
	took := time.Since(start)
	if err != nil {
		return m.explainChat(err, took)
	}
	answer := strings.Join(strings.Fields(comp.Content), " ")
	switch {
	case answer == "" && comp.Refusal != "":
		answer = "a refusal"
	case answer == "":
		answer = "an empty answer (finish reason " + cmp.Or(comp.FinishReason, "none") + ")"
	default:
		answer = fmt.Sprintf("%q", clipRunes(answer, 40))
	}
	r := ok(name, "%s answered %s in %s", m.cfg.ChatModel, answer, roundLatency(took))
	if tempDropped.Load() {
		r.status = statusWarn
		r.notes = []string{"the model refused TEMPERATURE; the bot then sends its requests without it"}
		r.fix = "leave TEMPERATURE unset for this model (its own default applies)"
	}
	return r
}

// explainChat turns a failed completion into a line with what to fix.
func (m modelCheck) explainChat(err error, took time.Duration) result {
	const name = "Chat model"
	host := hostOf(m.cfg.BaseURL)
	var e *llm.Error
	if !errors.As(err, &e) {
		return fail(name, errText(err), "check OPENAI_BASE_URL, OPENAI_API_KEY and CHAT_MODEL")
	}
	said := "error: " + errText(e)
	if e.Status != 0 {
		said = "the service said: " + errText(e)
	}
	switch {
	case e.Kind == llm.KindAuth && e.Status == http.StatusForbidden:
		return fail(name, host+" refused the request (403)",
			"the key works but may not use "+m.cfg.ChatModel+": check the key's project and model permissions, or pick another CHAT_MODEL", said)
	case e.Kind == llm.KindAuth:
		fix := "set OPENAI_API_KEY to a valid key for " + host
		if host == "api.openai.com" {
			fix += " (create one at https://platform.openai.com/api-keys)"
		}
		fix += "; services that take the key in another header (Azure: api-key) use LLM_HEADERS"
		detail := host + " rejected OPENAI_API_KEY (401)"
		if m.cfg.APIKey == "" {
			detail = host + " wants an API key and OPENAI_API_KEY is not set (401)"
		}
		return fail(name, detail, fix, said)
	case e.Status == http.StatusNotFound || e.Code == "model_not_found":
		return fail(name, "model "+m.cfg.ChatModel+" not found at "+host+" (404)",
			"set CHAT_MODEL to a model this service offers, and check OPENAI_BASE_URL (it ends in /v1, e.g. https://api.openai.com/v1 or http://localhost:11434/v1)", said)
	case e.Kind == llm.KindQuota:
		return fail(name, host+" says the account is out of quota or credits",
			"add credits or raise the spending limit in the service's billing settings", said)
	case e.Kind == llm.KindRateLimit:
		return result{name: name, status: statusWarn,
			detail: host + " is rate limiting (429): the key and model were accepted, but answers will wait or fail at this rate",
			notes:  []string{said},
			fix:    "check the rate limits of your plan, or lower MAX_CONCURRENT_REPLIES"}
	case e.Kind == llm.KindConnection:
		return fail(name, "cannot connect to "+host,
			"check OPENAI_BASE_URL, that the model server is running and reachable from here (firewall, proxy: HTTPS_PROXY; in Docker, localhost is the container itself)", said)
	case e.Kind == llm.KindTimeout:
		return fail(name, fmt.Sprintf("no answer from %s in %s", host, roundLatency(took)),
			"check OPENAI_BASE_URL and that the server is reachable and not overloaded (a local model may still be loading: try again)", said)
	case e.Kind == llm.KindServer:
		return fail(name, host+" failed to answer (server error)",
			"try again later; if it lasts, check the service's status page or the server's logs", said)
	case e.Kind == llm.KindInvalid:
		return fail(name, host+" answered, but not with a chat completion",
			"check that OPENAI_BASE_URL points to an OpenAI-compatible API (ending in /v1)", said)
	case e.Kind == llm.KindBadRequest && e.Param == "temperature":
		return fail(name, "the model refused TEMPERATURE",
			"leave TEMPERATURE unset (the model's default)", said)
	}
	return fail(name, host+" refused the request",
		"check CHAT_MODEL and the settings the service names below", said)
}

// image checks IMAGE_MODEL without generating a picture (that costs money): it is set, and
// listed by GET {base}/models when the service lists models. chatOK is the chat check's outcome,
// against the same service and key.
func (m modelCheck) image(ctx context.Context, chatOK bool) result {
	const name = "Image model"
	if strings.TrimSpace(m.cfg.ImageModel) == "" {
		return fail(name, "IMAGE_MODEL is empty", "set IMAGE_MODEL to an image model your service offers (e.g. gpt-image-2)")
	}
	if !chatOK {
		// /imagine goes to the same service with the same key: a ✓ here would contradict the chat
		// check's ✗, which says what is wrong (a model list may answer whatever the key).
		return skip(name, m.cfg.ImageModel+" set; not checked, as the chat check against the same service failed")
	}
	ids, err := m.listModels(ctx)
	switch {
	case errors.As(err, new(modelsRefused)): // a key that may use models but not list them (OpenAI's restricted keys)
		return ok(name, "%s set (no image generated: it costs money; this key may not list the service's models: %s)", m.cfg.ImageModel, err)
	case err != nil:
		return ok(name, "%s set (no image generated: it costs money; the service's model list: %s)", m.cfg.ImageModel, err)
	case slices.Contains(ids, m.cfg.ImageModel):
		return ok(name, "%s set and listed by the service (no image generated: it costs money)", m.cfg.ImageModel)
	}
	return result{name: name, status: statusWarn,
		detail: m.cfg.ImageModel + " is not listed by the service (the server may not list image models)",
		fix:    "if /imagine fails with an unknown model, set IMAGE_MODEL to an image model your service offers"}
}

// modelsRefused is GET {base}/models answering 401 or 403 (the status).
type modelsRefused int

func (e modelsRefused) Error() string { return fmt.Sprintf("GET /models answered %d", int(e)) }

// listModels returns the model ids of GET {base}/models. Its errors never quote the body.
func (m modelCheck) listModels(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, doctorModelsTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(m.cfg.BaseURL, "/")+"/models", nil)
	if err != nil {
		return nil, errors.New("bad URL")
	}
	for k, vs := range m.cfg.Headers {
		req.Header[k] = vs
	}
	if m.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.cfg.APIKey)
	}
	resp, err := (&http.Client{Timeout: doctorModelsTimeout}).Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, errors.New("no answer in " + doctorModelsTimeout.String())
		}
		return nil, errors.New("connection failed")
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized, http.StatusForbidden:
		return nil, modelsRefused(resp.StatusCode)
	default:
		return nil, fmt.Errorf("GET /models answered %d", resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, doctorMaxModelsBody)).Decode(&list); err != nil {
		return nil, errors.New("GET /models answered something other than a model list")
	}
	ids := make([]string, len(list.Data))
	for i, d := range list.Data {
		ids[i] = d.ID
	}
	return ids, nil
}

// roundLatency shows a latency with a precision a person reads (12ms, 1.4s).
func roundLatency(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// hostOf returns the host of a URL (never its user info or query, which may hold secrets).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// redisTimeout bounds the Redis check.
const redisTimeout = 5 * time.Second

// checkRedis connects to REDIS_URL and asks PING. Without it there is nothing to check: one
// replica keeps its state itself.
func checkRedis(ctx context.Context, in Input) result {
	const name = "Redis"
	if in.RedisHost == "" || in.PingRedis == nil {
		return ok(name, "REDIS_URL not set: fine for one replica (its state is kept by the process and STATE_DIR)%s",
			threadCache(in.ThreadCacheTTL, "in its memory"))
	}
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := in.PingRedis(ctx); err != nil {
		return fail(name, "cannot use Redis at "+in.RedisHost+": "+err.Error(),
			"check REDIS_URL (redis://[:password@]host:6379/0, rediss:// for TLS) and that Redis answers from here; "+
				"the bot runs without it, but replicas then answer twice and cannot stop each other's answers")
	}
	return ok(name, "%s answers PING; replicas share their state there%s", in.RedisHost,
		threadCache(in.ThreadCacheTTL, "there too"))
}

// threadCache says where the threads the bot takes part in are cached, and for how long ("" when
// they are not).
func threadCache(ttl time.Duration, where string) string {
	if ttl <= 0 {
		return ""
	}
	d := ttl.String() // 6h0m0s: 6h, 1h30m0s: 1h30m
	if strings.HasSuffix(d, "m0s") {
		d = strings.TrimSuffix(d, "0s")
	}
	if strings.HasSuffix(d, "h0m") {
		d = strings.TrimSuffix(d, "0m")
	}
	return fmt.Sprintf("; the threads it takes part in are cached %s, for %s after their last change (THREAD_CACHE_TTL)", where, d)
}
