package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/zap/zapcore"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/doctor"
	"github.com/llmbot/llmbot/pane"
)

// Config is every setting of the bot, read from the environment by loadConfig: a normalising pass
// (see normaliseValue), then envconfig.Process. The struct tags are the one source of truth for
// names, defaults and descriptions: envconfig, Validate and --help all read them. Each field also names its tier (see tiers), the heading it
// is listed under.
type Config struct {
	SlackBotToken string `envconfig:"SLACK_BOT_TOKEN" tier:"essentials" secret:"true" desc:"Bot token (xoxb-...): Slack app settings > OAuth & Permissions > Bot User OAuth Token (install the app first)."`
	SlackAppToken string `envconfig:"SLACK_APP_TOKEN" tier:"essentials" secret:"true" desc:"App-level token (xapp-...) with connections:write: Slack app settings > Basic Information > App-Level Tokens."`
	SlackAPIURL   string `envconfig:"SLACK_API_URL" tier:"essentials" default:"https://slack.com/api/" desc:"Slack Web API base URL (GovSlack: https://slack-gov.com/api/)."`

	OpenAIAPIKey  string   `envconfig:"OPENAI_API_KEY" tier:"essentials" secret:"true" desc:"API key of the model service (OpenAI: platform.openai.com > API keys). May be empty for local servers (Ollama, vLLM) that need none."`
	OpenAIBaseURL string   `envconfig:"OPENAI_BASE_URL" tier:"essentials" default:"https://api.openai.com/v1" desc:"Base URL of the OpenAI-compatible API, ending in /v1 (Ollama: http://localhost:11434/v1)."`
	LLMHeaders    string   `envconfig:"LLM_HEADERS" tier:"essentials" secret:"true" desc:"Extra HTTP headers for the model service, comma-separated Name=value (Azure: api-key=...). Never logged."`
	ChatModel     string   `envconfig:"CHAT_MODEL" tier:"essentials" default:"gpt-5.4-mini" desc:"Chat model for answers."`
	ImageModel    string   `envconfig:"IMAGE_MODEL" tier:"essentials" default:"gpt-image-2" desc:"Image model for /imagine."`
	Temperature   *float64 `envconfig:"TEMPERATURE" tier:"features" desc:"Sampling temperature, 0 to 2. Unset: not sent (the model's own default; some models accept no other)."`
	SystemPrompt  string   `envconfig:"SYSTEM_PROMPT" tier:"features" text:"true" desc:"System prompt; {bot_name} and {date} are filled in. Unset: a built-in prompt."`
	ImageSize     string   `envconfig:"IMAGE_SIZE" tier:"features" desc:"Image size sent with /imagine (e.g. 1024x1024). Unset: the provider's default."`
	ImageQuality  string   `envconfig:"IMAGE_QUALITY" tier:"features" desc:"Image quality sent with /imagine (e.g. low, medium, high). Unset: the provider's default."`

	ReplyMode            string        `envconfig:"REPLY_MODE" tier:"features" default:"auto" desc:"auto: Slack's native streaming where the asker is the only one reading the answer live (DMs, the agent pane), edit in channel threads (Slack shows a native stream live only to its recipient). edit: post a reply and edit it as the answer streams (works everywhere). stream: native streaming everywhere (chat.startStream). Streaming falls back to edit when Slack refuses it. CHANNEL_CONFIG may set reply_mode per channel."`
	StreamRolloverAfter  time.Duration `envconfig:"STREAM_ROLLOVER_AFTER" tier:"limits" default:"4m" desc:"A natively streamed message this old is stopped and the answer goes on in a new one, before Slack ends the stream by itself (after about five minutes). Under 5m."`
	StreamIdleLimit      time.Duration `envconfig:"STREAM_IDLE_LIMIT" tier:"limits" default:"4m" desc:"A natively streamed message with no new text for this long (the model thinking) is stopped, the answer going on in a new one with its next text: Slack may count its limit from the last text rather than the start. Under 5m."`
	EditBudgetPerMinute  float64       `envconfig:"EDIT_BUDGET_PER_MINUTE" tier:"limits" default:"50" desc:"chat.update calls per minute shared by all answers in flight (Slack allows about 50 per workspace). Replicas sharing REDIS_URL share it (it stays the workspace's figure); lower it when other apps edit in the same workspace, or divide it among replicas that run without Redis."`
	PlaceholderAfter     time.Duration `envconfig:"PLACEHOLDER_AFTER" tier:"features" default:"1s" desc:"In edit mode, how long an answer waits for the model's first text before it shows a Thinking… message; text that comes sooner is posted as the answer straight away (under load it shows at once instead of waiting for an edit). 0: Thinking… at once."`
	ContextTokens        int           `envconfig:"CONTEXT_TOKENS" tier:"limits" default:"12000" desc:"Most estimated tokens of thread context sent to the model, files included; the oldest files' contents are left out first, then the oldest messages, which the model summarises once for the request (they are only left out when that fails)."`
	Vision               string        `envconfig:"VISION" tier:"features" default:"auto" desc:"auto: pictures shared in the thread are sent to the model; a model that refuses them is asked again without them (remembered per model) and the answer says it could not see them. on: always sent (a refusal is an error). off: never sent, only named. CHANNEL_CONFIG may set it per channel."`
	MaxFileBytes         int64         `envconfig:"MAX_FILE_BYTES" tier:"limits" default:"20971520" desc:"Largest picture the bot downloads to read (at most 50 MiB); larger ones are named with a note. Of a text file, only the start that MAX_FILE_TEXT keeps is downloaded."`
	MaxFileText          int           `envconfig:"MAX_FILE_TEXT" tier:"limits" default:"20000" desc:"Characters of one text file (logs, code, CSV, JSON, snippets) given to the model; the rest is cut with a note."`
	ImageInputMaxSide    int           `envconfig:"IMAGE_INPUT_MAX_SIDE" tier:"limits" default:"2048" desc:"Longest side, in pixels, of a picture sent to the model (64 to 4096); larger ones are scaled down."`
	MaxConcurrentReplies int           `envconfig:"MAX_CONCURRENT_REPLIES" tier:"limits" default:"50" desc:"Answers and /imagine jobs asking the model at once (model requests in flight; an answer gives its place up once the model is done, while its last Slack writes go on); more wait in a queue, in arrival order."`
	MaxQueuedReplies     int           `envconfig:"MAX_QUEUED_REPLIES" tier:"limits" default:"500" desc:"Answers that may wait for a free place beyond MAX_CONCURRENT_REPLIES; beyond them people get a short busy reply. 0: none wait."`
	ImaginePerUser       int           `envconfig:"IMAGINE_PER_USER" tier:"limits" default:"2" desc:"/imagine jobs one person may have running at once."`
	FollowUps            bool          `envconfig:"FOLLOW_UPS" tier:"features" default:"true" desc:"Answer thread messages without a mention when the bot is part of the thread (needs the message.channels/message.groups events)."`
	AnswerBots           bool          `envconfig:"ANSWER_BOTS" tier:"features" default:"false" desc:"Answer messages from other bots (never its own). Other apps' messages in a thread are context either way."`
	AgentView            bool          `envconfig:"AGENT_VIEW" tier:"features" default:"true" desc:"The app is declared as an agent (features.agent_view in manifest.yaml): each message in a DM with the bot (its agent pane) is answered in its own thread, titled from the question, with a thinking status and Slack's agent session and Stop; opening the pane shows SUGGESTED_PROMPTS. false: DMs are answered at the top, with the recent messages as context."`
	SuggestedPrompts     string        `envconfig:"SUGGESTED_PROMPTS" tier:"features" desc:"Prompts shown when someone opens the agent pane (AGENT_VIEW): up to 4, separated by ;, each Title=Message (or a message alone). Unset: three general ones; none: set it to a single ;."`
	Feedback             bool          `envconfig:"FEEDBACK" tier:"features" default:"true" desc:"👍/👎 under finished answers (with BUTTONS), counted in llmbot_feedback_total; 👎 asks for an optional comment. false: none."`
	FeedbackChannel      string        `envconfig:"FEEDBACK_CHANNEL" tier:"features" desc:"Channel ID (C..., G...) where each 👎, and its comment, is posted with a link to the answer (invite the bot there). Unset: they are only counted."`
	Buttons              bool          `envconfig:"BUTTONS" tier:"features" default:"true" desc:"Stop (asker only) and Regenerate buttons on answers written in edit mode, Another one on /imagine pictures, and Post to channel on /summarize summaries (needs Interactivity on in the app settings). false: none."`
	NativeTables         bool          `envconfig:"NATIVE_TABLES" tier:"features" default:"true" desc:"A Markdown table in a finished answer written in edit mode is shown as Slack's table block (up to 100 rows and 20 columns, one a message), the text around it as before; a table that does not fit, the streamed preview and native streams keep the aligned code block. When Slack refuses the block, the answer is written again with the code block and tables rest for 10 minutes. false: always the code block."`

	LLMConnectTimeout time.Duration `envconfig:"LLM_CONNECT_TIMEOUT" tier:"limits" default:"10s" desc:"Time to connect to the model service (dial and TLS)."`
	LLMHeaderTimeout  time.Duration `envconfig:"LLM_HEADER_TIMEOUT" tier:"limits" default:"120s" desc:"Time to the first response headers of a chat request."`
	LLMIdleTimeout    time.Duration `envconfig:"LLM_IDLE_TIMEOUT" tier:"limits" default:"90s" desc:"Longest silence inside a streamed answer before it is given up as stalled."`
	LLMStreamCoalesce time.Duration `envconfig:"LLM_STREAM_COALESCE" tier:"operations" default:"200ms" desc:"How long a streamed answer gathers between reads: once it has read all that arrived, the next read comes about this much later (half to one and a half times it, at instants shared by all answers, so the bot wakes once for all of them) and takes all that arrived meanwhile: one wake-up for several tokens. Tokens reach Slack up to 1.5 times the pause later. 0: read tokens as they arrive."`
	ImageTimeout      time.Duration `envconfig:"IMAGE_TIMEOUT" tier:"limits" default:"180s" desc:"Time for one image generation, download included (at most 25m)."`
	LLMMaxRetries     int           `envconfig:"LLM_MAX_RETRIES" tier:"limits" default:"2" desc:"Retries of a model request on 429/5xx/connection errors before the first byte (0: none)."`
	LLMStreamUsage    bool          `envconfig:"LLM_STREAM_USAGE" tier:"operations" default:"true" desc:"Ask for token usage in streamed answers (stream_options.include_usage), for the token metrics. A server that rejects it is asked again without it, once per model; false: never ask."`
	ShutdownGrace     time.Duration `envconfig:"SHUTDOWN_GRACE" tier:"operations" default:"8s" desc:"On SIGTERM, the time to finish answers in progress and close the rest with an interrupted note (its last 2s, at most half of it, are kept for closing); the process exits 0 within it. Keep the pod's terminationGracePeriodSeconds at least 5s longer (15s in deploy/kubernetes)."`

	HealthAddr string `envconfig:"HEALTH_ADDR" tier:"operations" desc:"Address of the health and metrics listener (/healthz, /readyz, /metrics), e.g. :8080. Unset: off."`

	RedisURL       string        `envconfig:"REDIS_URL" tier:"operations" secret:"true" desc:"Redis (7+) or Valkey shared by every replica: redis://[:password@]host:6379/0, rediss:// for TLS. Set it to run several replicas: they then share dedupe, one answer at a time per thread, Stop clicks, Slack's rate limits, the /imagine quota and the journal of answers in progress. Unset: one replica, state in memory and STATE_DIR. Never logged."`
	ThreadCacheTTL time.Duration `envconfig:"THREAD_CACHE_TTL" tier:"operations" default:"6h" desc:"How long the bot keeps its copy of a thread it takes part in after the thread last changed (in Redis with REDIS_URL, shared by the replicas; else in memory), kept current from Slack's events and its own writes: a follow-up within it is answered without reading the thread from Slack again (conversations.replies, the scarcest budget). A short-lived cache, no export. 0: none (every answer reads its thread). At most 24h."`
	StateDir       string        `envconfig:"STATE_DIR" tier:"operations" desc:"Directory of the local journal of answers in progress, so a restarted process closes the answers it was writing when it died (kept in a folder per app and team). Unset: the user's cache directory (~/.cache/llmbot); the Kubernetes kit mounts an emptyDir."`

	AllowChannels     string `envconfig:"ALLOW_CHANNELS" tier:"features" desc:"Channel IDs (C..., G...) where the bot works, comma-separated; add dm for direct messages (one-to-one; a group DM is a channel here, listed by its ID). Unset: everywhere."`
	DenyChannels      string `envconfig:"DENY_CHANNELS" tier:"features" desc:"Channel IDs where the bot never works, comma-separated; dm turns one-to-one direct messages off (a group DM is denied by its ID). Wins over ALLOW_CHANNELS."`
	AllowUsers        string `envconfig:"ALLOW_USERS" tier:"features" desc:"User IDs (U..., W...) who may use the bot, comma-separated. Unset: everyone."`
	DenyUsers         string `envconfig:"DENY_USERS" tier:"features" desc:"User IDs who may not use the bot, comma-separated. Wins over ALLOW_USERS."`
	ExternalUsers     string `envconfig:"EXTERNAL_USERS" tier:"features" default:"refused" desc:"People of other organisations in Slack Connect channels and DMs. refused: told privately that the bot answers only the workspace's people, for messages, slash commands, shortcuts and buttons alike. members: served as members are (the same lists and quota)."`
	GuestUsers        string `envconfig:"GUEST_USERS" tier:"features" default:"members" desc:"The workspace's guests (multi- and single-channel). members: served as members are (the same lists and quota). refused: told privately that the bot is not for guests."`
	AccessDeniedText  string `envconfig:"ACCESS_DENIED_TEXT" tier:"features" text:"true" desc:"What a refused person is told, privately. Unset: a short built-in sentence; say where to ask, e.g. ask in #it-help."`
	ImagineDailyQuota int    `envconfig:"IMAGINE_DAILY_QUOTA" tier:"limits" default:"0" desc:"/imagine pictures per person per day (UTC), counted across replicas when REDIS_URL is set. 0: unlimited."`
	ChannelConfig     string `envconfig:"CHANNEL_CONFIG" tier:"features" desc:"Path of a YAML file with per-channel system_prompt, model, reply_mode and vision overrides, and the MCP tools each channel may use (see deploy/kubernetes/configmap.yaml and Tools in README.md). Unset: none."`

	Redact               string `envconfig:"REDACT" tier:"features" desc:"Replace personal data and secrets with typed placeholders ([EMAIL 1]) in everything sent to the model (thread, files, tool calls and results): all, or some of email, phone, card, iban, secret, comma-separated. Unset: nothing replaced."`
	RedactPatterns       string `envconfig:"REDACT_PATTERNS" tier:"features" text:"true" desc:"The team's own kinds to replace before the model, whatever REDACT says: NAME=regexp, one per line or a space apart, NAME in capital letters (CUSTOMER=CUS-[0-9]{6} gives [CUSTOMER 1])."`
	UsageAdmins          string `envconfig:"USAGE_ADMINS" tier:"features" desc:"User IDs, comma-separated, whose /usage also shows everyone's use this month: the top people, channels and models, and their cost (PRICES)."`
	Prices               string `envconfig:"PRICES" tier:"features" desc:"What the models cost per million input and output tokens, for /usage: model=input/output, comma-separated (gpt-5.4-mini=0.25/2). Unset: no cost shown."`
	BudgetPersonDaily    int64  `envconfig:"BUDGET_PERSON_DAILY" tier:"limits" default:"0" desc:"Tokens (input and output) one person may use a day (UTC), across replicas when REDIS_URL is set; once spent, they are told privately and nothing is sent to the model. 0: no budget."`
	BudgetPersonMonthly  int64  `envconfig:"BUDGET_PERSON_MONTHLY" tier:"limits" default:"0" desc:"Tokens one person may use a calendar month (UTC), as BUDGET_PERSON_DAILY. 0: no budget."`
	BudgetChannelDaily   int64  `envconfig:"BUDGET_CHANNEL_DAILY" tier:"limits" default:"0" desc:"Tokens everyone together may use a day in one channel (a DM is a channel), as BUDGET_PERSON_DAILY. 0: no budget."`
	BudgetChannelMonthly int64  `envconfig:"BUDGET_CHANNEL_MONTHLY" tier:"limits" default:"0" desc:"Tokens everyone together may use a month in one channel, as BUDGET_PERSON_DAILY. 0: no budget."`
	UsageRetentionDays   int    `envconfig:"USAGE_RETENTION_DAYS" tier:"operations" default:"90" desc:"Days the usage counts (numbers per person, channel and model, never text) are kept in the shared state; a month's totals a month longer."`

	MCPConfig           string        `envconfig:"MCP_CONFIG" tier:"features" desc:"Path of a YAML file listing MCP servers whose tools the model may use (see Tools in README.md): stdio programs or streamable-HTTP URLs, their allow and auto-approve lists, their approvers and public_arguments; secrets as ${VAR} from the environment. Channels get tools only through CHANNEL_CONFIG. Unset: no tools."`
	AskUser             string        `envconfig:"ASK_USER" tier:"features" default:"auto" desc:"The ask_user tool, with which the model asks the person a clarifying question (buttons and Other…) instead of guessing. auto: offered where a channel has other tools. on: offered in every answer (then every request carries tools; a model service that refuses them is asked without). off: never."`
	MaxToolRounds       int           `envconfig:"MAX_TOOL_ROUNDS" tier:"limits" default:"5" desc:"Rounds of tool calls in one answer; then the model is asked once more without tools and must answer."`
	ToolApprovalTimeout time.Duration `envconfig:"TOOL_APPROVAL_TIMEOUT" tier:"limits" default:"2m" desc:"How long a round's tool calls that need a click wait for the asker's Allow or Deny; no answer in time denies them."`
	ToolCallTimeout     time.Duration `envconfig:"TOOL_CALL_TIMEOUT" tier:"limits" default:"60s" desc:"Longest time of one tool call; a call that takes longer is reported to the model as failed."`
	SlackSearch         bool          `envconfig:"SLACK_SEARCH" tier:"features" default:"false" desc:"Offer the model slack_search (see Tools in README.md): it searches the workspace's public channels with Slack's Real-time Search API as the person who asked (the action_token of their message: only what they may see), and the answer cites the messages it used as links. Needs the search:read.public scope and Slack's search for apps enabled; a refusal is told once and hides the tool for an hour. Offering a tool adds tools to every answer's model request."`

	ChannelEditors         string        `envconfig:"CHANNEL_EDITORS" tier:"features" desc:"User IDs (U..., W...) who may change a channel's standing instructions (/llmbot instructions set or clear) and delete anyone's scheduled prompt, comma-separated. Unset: anyone who may use the bot in the channel changes its instructions, and only its creator deletes a schedule."`
	ChannelInstructionsMax int           `envconfig:"CHANNEL_INSTRUCTIONS_MAX" tier:"limits" default:"2000" desc:"Most characters of a channel's standing instructions (/llmbot instructions set), 1 to 4000; they go into the system prompt of every answer in that channel."`
	SchedulesPerChannel    int           `envconfig:"SCHEDULES_PER_CHANNEL" tier:"limits" default:"10" desc:"Scheduled prompts (/llmbot schedule add) one channel may have. 0: nobody may add one."`
	SchedulesPerPerson     int           `envconfig:"SCHEDULES_PER_PERSON" tier:"limits" default:"5" desc:"Scheduled prompts one person may have created, in all channels. 0: nobody may add one."`
	ScheduleCatchUp        time.Duration `envconfig:"SCHEDULE_CATCH_UP" tier:"operations" default:"1h" desc:"A scheduled prompt's run missed while no replica ran (a restart, an outage) runs once when one is back within this time, and is skipped with a log line after it. 0: never caught up. At most 24h."`

	LogLevel  zapcore.Level `envconfig:"LOG_LEVEL" tier:"operations" default:"info" desc:"debug, info, warn or error. Message text is logged only at debug."`
	LogFormat string        `envconfig:"LOG_FORMAT" tier:"operations" desc:"json or console. Unset: json when stderr is not a terminal, console otherwise."`
}

// setting is one Config field as described by its tags.
type setting struct {
	Name, Default, Desc string
	Tier                string // the name of its tier: one of tiers
	Secret              bool
	Text                bool // free text, which may open and close with a quotation of its own
	typ                 reflect.Type
}

// tier is a heading the settings are listed under, in --help, the README and doctor: a newcomer
// sets the essentials and reads the features; limits and operations have defaults that fit most.
type tier struct {
	Name  string // the value of the fields' tier tag
	Title string // the heading
	About string // what its settings decide, for the line under the heading
}

// tiers are the headings, in the order they are listed.
var tiers = []tier{
	{"essentials", "Essentials", "how the bot reaches Slack and the model service, and which models it asks"},
	{"features", "Features", "what the bot does, how its answers look, and who may use it where"},
	{"limits", "Limits", "budgets, sizes, concurrency, quotas and time limits"},
	{"operations", "Operations", "logging, health, shared state, shutdown, and how the model's stream is read"},
}

// tiered lists the settings tier by tier, in declaration order within each.
func tiered() [][]setting {
	all := settings()
	out := make([][]setting, len(tiers))
	for i, t := range tiers {
		for _, s := range all {
			if s.Tier == t.Name {
				out[i] = append(out[i], s)
			}
		}
	}
	return out
}

// tieredProblems are the problems of the settings for doctor, grouped by their settings' tiers
// (in the order of tiers; those that name no setting first), in their order within each.
func tieredProblems(problems []string) []doctor.Problem {
	type ranked struct {
		tier int
		text string
	}
	all := make([]ranked, len(problems))
	for i, p := range problems {
		all[i] = ranked{tierOf(p), p}
	}
	slices.SortStableFunc(all, func(a, b ranked) int { return cmp.Compare(a.tier, b.tier) })
	out := make([]doctor.Problem, len(all))
	for i, r := range all {
		out[i] = doctor.Problem{Text: r.text}
		if r.tier >= 0 {
			out[i].Tier = tiers[r.tier].Title
		}
	}
	return out
}

// tierOf is the index in tiers of the setting a problem is about (the name it begins with), or
// -1 when it names none.
func tierOf(problem string) int {
	end := strings.IndexFunc(problem, func(r rune) bool { return (r < 'A' || r > 'Z') && r != '_' })
	if end < 0 {
		end = len(problem)
	}
	for _, s := range settings() {
		if s.Name == problem[:end] {
			return slices.IndexFunc(tiers, func(t tier) bool { return t.Name == s.Tier })
		}
	}
	return -1
}

// settings lists the Config fields in declaration order.
func settings() []setting {
	t := reflect.TypeFor[Config]()
	out := make([]setting, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		out = append(out, setting{
			Name:    f.Tag.Get("envconfig"),
			Default: f.Tag.Get("default"),
			Desc:    f.Tag.Get("desc"),
			Tier:    f.Tag.Get("tier"),
			Secret:  f.Tag.Get("secret") == "true",
			Text:    f.Tag.Get("text") == "true",
			typ:     f.Type,
		})
	}
	return out
}

// loadConfig reads every setting from the process environment with envconfig. Each value is
// first read as a person means it (normaliseValue: quotes kept by docker --env-file and Kubernetes,
// numbers in decimal, a blank value unset) and, where that differs from what is there, put back in
// its place: the process's environment is the bot's own, read once at start. Values that cannot be
// parsed are reported together, one line each (the value is shown only for settings that are not
// secret), in the order of the settings, and their defaults apply.
//
// Tests give run its environment with t.Setenv, which puts the test process's back when they end.
func loadConfig() (Config, []string) {
	all := settings()
	found := make([][]string, len(all)) // problems of each setting, listed in the settings' order
	for i, s := range all {
		raw, ok := os.LookupEnv(s.Name)
		if !ok {
			continue
		}
		value, set, problems := normaliseValue(s, raw)
		found[i] = problems
		switch {
		case !set:
			_ = os.Unsetenv(s.Name)
		case value != raw:
			_ = os.Setenv(s.Name, value) // cannot fail: the name is Config's and the value holds no NUL
		}
	}
	cfg, unparsed := processEnv()
	var problems []string
	for i, s := range all {
		problems = append(problems, found[i]...)
		if value, ok := unparsed[s.Name]; ok {
			problems = append(problems, s.notA(value))
		}
	}
	return cfg, problems
}

// processEnv fills a Config with envconfig.Process and returns the values it could not parse, by
// setting name. envconfig stops at the first value it cannot parse; that variable is then unset
// (its default applies, so Validate does not report it again) and Process runs again, until every
// bad value is known.
func processEnv() (Config, map[string]string) {
	unparsed := map[string]string{}
	for {
		var cfg Config
		err := envconfig.Process("", &cfg)
		var pe *envconfig.ParseError
		if !errors.As(err, &pe) {
			if err != nil {
				panic("config: " + err.Error()) // Config is not a struct envconfig can fill: a programmer error
			}
			return cfg, unparsed
		}
		if _, set := os.LookupEnv(pe.KeyName); !set {
			panic("config: the default of " + pe.KeyName + " does not parse") // a programmer error
		}
		unparsed[pe.KeyName] = pe.Value
		_ = os.Unsetenv(pe.KeyName)
	}
}

// normaliseValue turns a raw value into what envconfig is given, where envconfig alone would read
// it otherwise than a person means it. set is false when the setting is to be left unset, so that
// its default applies.
func normaliseValue(s setting, raw string) (value string, set bool, problems []string) {
	value = strings.TrimSpace(raw)
	if quoted(value, s.Text) {
		// docker run --env-file and Kubernetes keep quotes as part of the value; a shell and
		// docker compose do not. Said once, here: the checks after this see the value without them.
		problems = append(problems, fmt.Sprintf("%s: the value is in quotes: remove them (docker --env-file and Kubernetes keep quotes as part of the value)", s.Name))
		value = strings.TrimSpace(value[1 : len(value)-1])
	}
	if value == "" {
		// envconfig takes a variable set to "" as a value; a blank line in an .env file must not
		// silently disable a default.
		return "", false, problems
	}
	if strings.ContainsRune(value, 0) { // no environment variable can hold it
		return "", false, append(problems, s.notA(value))
	}
	if s.typ.Kind() == reflect.Int {
		// envconfig reads whole numbers in Go's notation (010 is octal 8, 0x10 and 1_000 are
		// numbers, 08 is an error); people write them in decimal.
		n, err := strconv.Atoi(value)
		if err != nil {
			return "", false, append(problems, s.notA(value))
		}
		value = strconv.Itoa(n)
	}
	return value, true, problems
}

// quoted reports a value wrapped in quotes (docker --env-file and Kubernetes keep them). Free text
// (text) may open and close with a quotation of its own: it counts as wrapped only when no quote
// of that kind is inside, or nothing is ("" to unset it).
func quoted(raw string, text bool) bool {
	n := len(raw)
	if n < 2 || (raw[0] != '"' && raw[0] != '\'') || raw[n-1] != raw[0] {
		return false
	}
	return !text || !strings.ContainsRune(raw[1:n-1], rune(raw[0]))
}

// wants says, by the type of a setting, what its value must be: the end of "X is not ...".
var wants = map[reflect.Type]string{
	reflect.TypeFor[time.Duration](): "a duration (like 8s, 2m)",
	reflect.TypeFor[zapcore.Level](): "one of debug, info, warn, error",
	reflect.TypeFor[bool]():          "true or false",
	reflect.TypeFor[int]():           "a whole number",
	reflect.TypeFor[float64]():       "a number",
	reflect.TypeFor[*float64]():      "a number",
}

// notA is the problem of a value that is not of the setting's type. A secret's value is not shown.
func (s setting) notA(value string) string {
	shown := ""
	if !s.Secret {
		shown = fmt.Sprintf(" %q", value)
	}
	return fmt.Sprintf("%s:%s is not %s", s.Name, shown, cmp.Or(wants[s.typ], "a valid value"))
}

// Validate returns one error listing every problem, each with where to get the right value.
// Secret values never appear in it.
func (c Config) Validate() error { return problemsError(c.problems()) }

// problems lists what is wrong with the settings, one sentence each, in the order of the settings.
func (c Config) problems() []string {
	var p problemList
	c.slackProblems(&p)
	c.modelProblems(&p)
	c.replyProblems(&p)
	c.timeProblems(&p)
	c.accessProblems(&p)
	c.controlsProblems(&p)
	return p
}

// slackProblems checks the tokens and the API URL Slack is reached with.
func (c Config) slackProblems(p *problemList) {
	p.token("SLACK_BOT_TOKEN", c.SlackBotToken, "xoxb-",
		"the Bot User OAuth Token (xoxb-...) under OAuth & Permissions in your Slack app's settings (https://api.slack.com/apps); install the app to the workspace first")
	p.token("SLACK_APP_TOKEN", c.SlackAppToken, "xapp-",
		"an app-level token (xapp-...) with the connections:write scope under Basic Information > App-Level Tokens in your Slack app's settings (https://api.slack.com/apps)")
	p.httpURL("SLACK_API_URL", c.SlackAPIURL)
}

// modelProblems checks how the model service is reached and asked.
func (c Config) modelProblems(p *problemList) {
	p.httpURL("OPENAI_BASE_URL", c.OpenAIBaseURL)
	if u, err := url.Parse(c.OpenAIBaseURL); err == nil && u.Hostname() == "api.openai.com" && c.OpenAIAPIKey == "" {
		p.add("OPENAI_API_KEY is missing: create one at https://platform.openai.com/api-keys (or set OPENAI_BASE_URL to another OpenAI-compatible service)")
	}
	if _, err := parseHeaders(c.LLMHeaders); err != nil {
		p.add("LLM_HEADERS: %v", err)
	}
	if c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2) {
		p.add("TEMPERATURE: %v is outside 0 to 2 (leave it unset to use the model's default)", *c.Temperature)
	}
	if c.ChatModel == "" {
		p.add("CHAT_MODEL is missing: the chat model name your service offers (e.g. gpt-5.4-mini)")
	}
}

// replyProblems checks how answers are written, and how many at once.
func (c Config) replyProblems(p *problemList) {
	p.oneOf("REPLY_MODE", c.ReplyMode, access.ReplyModes...)
	if c.LogFormat != "" {
		p.oneOf("LOG_FORMAT", c.LogFormat, "json", "console")
	}
	p.atLeast("MAX_CONCURRENT_REPLIES", c.MaxConcurrentReplies, 1)
	p.atLeast("MAX_QUEUED_REPLIES", c.MaxQueuedReplies, 0)
	p.atLeast("IMAGINE_PER_USER", c.ImaginePerUser, 1)
	p.atLeast("CONTEXT_TOKENS", c.ContextTokens, 500)
	p.oneOf("VISION", c.Vision, "auto", "on", "off")
	p.atLeast("MAX_FILE_TEXT", c.MaxFileText, 100)
	p.atLeast("IMAGE_INPUT_MAX_SIDE", c.ImageInputMaxSide, 64)
	if c.ImageInputMaxSide > maxImageInputSide {
		p.add("IMAGE_INPUT_MAX_SIDE: %d must be at most %d", c.ImageInputMaxSide, maxImageInputSide)
	}
	if c.MaxFileBytes < 1024 || c.MaxFileBytes > maxFileBytes {
		p.add("MAX_FILE_BYTES: %d must be from 1024 to %d", c.MaxFileBytes, maxFileBytes)
	}
	p.atLeast("LLM_MAX_RETRIES", c.LLMMaxRetries, 0)
	if c.EditBudgetPerMinute <= 0 {
		p.add("EDIT_BUDGET_PER_MINUTE: %v must be above 0", c.EditBudgetPerMinute)
	}
}

// slackStreamLimit is about when Slack ends a native stream by itself (reported as roughly five
// minutes, of age or of silence).
const slackStreamLimit = 5 * time.Minute

// timeProblems checks the timeouts and pauses.
func (c Config) timeProblems(p *problemList) {
	p.positive("LLM_CONNECT_TIMEOUT", c.LLMConnectTimeout)
	p.positive("LLM_HEADER_TIMEOUT", c.LLMHeaderTimeout)
	p.positive("LLM_IDLE_TIMEOUT", c.LLMIdleTimeout)
	p.positive("IMAGE_TIMEOUT", c.ImageTimeout)
	if c.ImageTimeout > maxImageTimeout {
		p.add("IMAGE_TIMEOUT: %v is over %v (Slack's response_url, which tells the person when an image fails, lasts 30 minutes)", c.ImageTimeout, maxImageTimeout)
	}
	if c.LLMStreamCoalesce < 0 || c.LLMStreamCoalesce > time.Second {
		p.add("LLM_STREAM_COALESCE: %v must be between 0 and 1s (Slack shows an answer's text about once a second at best)", c.LLMStreamCoalesce)
	}
	if c.PlaceholderAfter < 0 || c.PlaceholderAfter > time.Minute {
		p.add("PLACEHOLDER_AFTER: %v must be between 0 and 1m (an asker would see nothing meanwhile)", c.PlaceholderAfter)
	}
	p.streamLimit("STREAM_ROLLOVER_AFTER", c.StreamRolloverAfter)
	p.streamLimit("STREAM_IDLE_LIMIT", c.StreamIdleLimit)
	p.positive("SHUTDOWN_GRACE", c.ShutdownGrace)
	if c.ThreadCacheTTL < 0 || c.ThreadCacheTTL > maxThreadCacheTTL {
		p.add("THREAD_CACHE_TTL: %v must be between 0 and %v (a short-lived cache, not an archive of the threads)", c.ThreadCacheTTL, maxThreadCacheTTL)
	}
}

// maxThreadCacheTTL is the longest THREAD_CACHE_TTL: the copy of a thread is a cache of what
// answers need soon, never an archive (Slack's API terms).
const maxThreadCacheTTL = 24 * time.Hour

// accessProblems checks the health listener, REDIS_URL's form, the quota and who may use the bot where.
func (c Config) accessProblems(p *problemList) {
	if c.RedisURL != "" {
		// The URL holds the password: only its form is told, never the value.
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			p.add("REDIS_URL: not a Redis URL: use redis://[:password@]host:6379/0, or rediss:// for TLS")
		}
	}
	if c.HealthAddr != "" {
		if _, port, err := net.SplitHostPort(c.HealthAddr); err != nil || port == "" {
			p.add("HEALTH_ADDR: %q is not host:port (like :8080, or 127.0.0.1:8080)", c.HealthAddr)
		}
	}
	p.atLeast("IMAGINE_DAILY_QUOTA", c.ImagineDailyQuota, 0)
	p.oneOf("EXTERNAL_USERS", c.ExternalUsers, access.Refused, access.AsMembers)
	p.oneOf("GUEST_USERS", c.GuestUsers, access.AsMembers, access.Refused)
	if _, err := c.prompts(); err != nil {
		p.add("SUGGESTED_PROMPTS: %v", err)
	}
	if c.FeedbackChannel != "" && (!access.ValidChannelID(c.FeedbackChannel) || access.IsDM(c.FeedbackChannel)) {
		p.add("FEEDBACK_CHANNEL: %q is not a channel ID like C0123ABCD (channel details > About, at the bottom)", c.FeedbackChannel)
	}
	if _, err := c.accessRules(); err != nil {
		p.add("%v", err)
	}
	if _, err := access.LoadOverrides(c.ChannelConfig); err != nil {
		p.add("%v", err)
	}
	p.atLeast("MAX_TOOL_ROUNDS", c.MaxToolRounds, 1)
	p.oneOf("ASK_USER", c.AskUser, "auto", "on", "off")
	c.steeringProblems(p)
}

// maxChannelInstructions bounds CHANNEL_INSTRUCTIONS_MAX: they go into every answer's prompt in the
// channel, and a record of the shared state holds them (state.MaxRecordSize, 4 bytes a character).
const maxChannelInstructions = 4000

// steeringProblems checks the settings of /llmbot: the editors, the instructions' length, the schedules.
func (c Config) steeringProblems(p *problemList) {
	for _, id := range access.ParseIDs(c.ChannelEditors) {
		if !access.ValidUserID(id) {
			p.add("CHANNEL_EDITORS: %q is not a user ID like U0123ABCD (profile > ⋮ > Copy member ID)", id)
		}
	}
	if c.ChannelInstructionsMax < 1 || c.ChannelInstructionsMax > maxChannelInstructions {
		p.add("CHANNEL_INSTRUCTIONS_MAX: %d is not between 1 and %d", c.ChannelInstructionsMax, maxChannelInstructions)
	}
	p.atLeast("SCHEDULES_PER_CHANNEL", c.SchedulesPerChannel, 0)
	p.atLeast("SCHEDULES_PER_PERSON", c.SchedulesPerPerson, 0)
	if c.ScheduleCatchUp < 0 || c.ScheduleCatchUp > 24*time.Hour {
		p.add("SCHEDULE_CATCH_UP: %v is not between 0 and 24h", c.ScheduleCatchUp)
	}
}

// problemList gathers the problems of the settings; its checks each add one when the value fails.
type problemList []string

// maxFileBytes bounds MAX_FILE_BYTES: a picture is held whole while it is read, and an answer
// reads several at once.
const maxFileBytes = 50 << 20

// maxImageInputSide bounds IMAGE_INPUT_MAX_SIDE: a scaled picture is held whole (4 bytes a pixel,
// 64 MB at 4096×4096) while it is encoded.
const maxImageInputSide = 4096

func (p *problemList) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// token checks a Slack token, missing or of the other kind, and says where to get the right one.
func (p *problemList) token(name, value, prefix, where string) {
	switch {
	case value == "":
		p.add("%s is missing: %s", name, where)
	case !strings.HasPrefix(value, prefix):
		p.add("%s does not start with %q (is it the other token?): %s", name, prefix, where)
	}
}

func (p *problemList) httpURL(name, value string) {
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.add("%s: %q is not an http(s) URL", name, value)
	}
}

func (p *problemList) oneOf(name, value string, allowed ...string) {
	if !slices.Contains(allowed, value) {
		p.add("%s: %q is not one of %s", name, value, strings.Join(allowed, ", "))
	}
}

func (p *problemList) atLeast(name string, value, least int) {
	if value < least {
		p.add("%s: %d is below %d", name, value, least)
	}
}

// streamLimit checks a native stream's rollover threshold: before Slack's own limit.
func (p *problemList) streamLimit(name string, d time.Duration) {
	if d < time.Second || d >= slackStreamLimit {
		p.add("%s: %v must be at least 1s and under %v (Slack ends a native stream after about five minutes)", name, d, slackStreamLimit)
	}
}

func (p *problemList) positive(name string, d time.Duration) {
	if d <= 0 {
		p.add("%s: %v must be above 0", name, d)
	}
}

// maxImageTimeout keeps a whole /imagine job (IMAGE_TIMEOUT plus imageUploadTime) within the 30
// minutes of the slash command's response_url.
const maxImageTimeout = 25 * time.Minute

// accessRules returns the access policy of the settings.
// prompts are the agent pane's suggested prompts (SUGGESTED_PROMPTS, or the defaults).
func (c Config) prompts() ([]pane.Prompt, error) {
	return pane.ParsePrompts(cmp.Or(c.SuggestedPrompts, pane.DefaultPrompts))
}

func (c Config) accessRules() (*access.Policy, error) {
	return access.NewPolicy(access.Rules{
		AllowChannels: access.ParseIDs(c.AllowChannels),
		DenyChannels:  access.ParseIDs(c.DenyChannels),
		AllowUsers:    access.ParseIDs(c.AllowUsers),
		DenyUsers:     access.ParseIDs(c.DenyUsers),
		Refusal:       c.AccessDeniedText,
	})
}

// problemsError joins problems into one error, or returns nil when there are none.
func problemsError(p []string) error {
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("configuration has %d problem(s) (run with --help for every setting):\n  - %s",
		len(p), strings.Join(p, "\n  - "))
}

// parseHeaders reads "Name=value,Name2=value2". Errors never quote a value (they may be keys).
func parseHeaders(s string) (http.Header, error) {
	h := http.Header{}
	if strings.TrimSpace(s) == "" {
		return h, nil
	}
	for i, pair := range strings.Split(s, ",") {
		name, value, ok := strings.Cut(pair, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t:") {
			return nil, fmt.Errorf("entry %d is not Name=value", i+1)
		}
		h.Add(textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value))
	}
	return h, nil
}

// printHelp writes the settings, tier by tier: name, default, description.
func printHelp(w io.Writer) error {
	fmt.Fprintln(w, "llmbot: a Slack bot (Socket Mode) that answers threads and DMs with an OpenAI-compatible model,")
	fmt.Fprintln(w, "and makes pictures with /imagine. Configured by environment variables, in four groups.")
	for i, group := range tiered() {
		fmt.Fprintf(w, "\n%s: %s\n", tiers[i].Title, tiers[i].About)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NAME\tDEFAULT\tDESCRIPTION")
		for _, s := range group {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", s.Name, cmp.Or(s.Default, "-"), s.Desc)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Required: SLACK_BOT_TOKEN, SLACK_APP_TOKEN, and OPENAI_API_KEY for api.openai.com.")
	_, err := fmt.Fprintln(w, "--help-markdown prints the same tables in Markdown (for the README).")
	return err
}

// printHelpMarkdown writes the settings as Markdown: a heading and a table for each tier.
func printHelpMarkdown(w io.Writer) error {
	var b strings.Builder
	for i, group := range tiered() {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "### %s\n\n%s.\n\n", tiers[i].Title, upperFirst(tiers[i].About))
		b.WriteString("| Setting | Default | Description |\n|---|---|---|\n")
		for _, s := range group {
			def := ""
			if s.Default != "" {
				def = "`" + s.Default + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, def, strings.ReplaceAll(s.Desc, "|", `\|`))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// upperFirst is s with its first letter in upper case (the tiers' descriptions are ASCII).
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
