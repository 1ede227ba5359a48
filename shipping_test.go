// Package llmbot_test checks what ships beside the code: the Slack app manifest and the Dockerfile.
// No container engine runs where these tests run, so the Dockerfile is parsed with buildkit's own parser
// and its build step is run with the local Go toolchain.
package llmbot_test

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/slack-go/slack"
	"sigs.k8s.io/yaml"

	"github.com/llmbot/llmbot/command"
	"github.com/llmbot/llmbot/pane"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/summarize"
)

// manifestSchema is Slack's app manifest JSON Schema, in shared/ beside the checkout (as CI lays it out).
const manifestSchema = "../shared/schemas/slack-app-manifest.schema.1.0.0.json"

// requireSchemas, set by CI (.ci/run), makes a missing schema a failure; elsewhere (a clone without
// shared/ beside it) the schema check is skipped with a note saying where to get the file, so the
// README's test command passes on a fresh machine.
const requireSchemas = "LLMBOT_REQUIRE_SCHEMAS"

// ecmaRegexp compiles the schema's ECMAScript patterns (they use look-ahead, which Go's regexp lacks).
type ecmaRegexp struct{ re *regexp2.Regexp }

func (r ecmaRegexp) MatchString(s string) bool {
	ok, err := r.re.MatchString(s)
	return err == nil && ok
}

func (r ecmaRegexp) String() string { return r.re.String() }

func compileECMA(s string) (jsonschema.Regexp, error) {
	re, err := regexp2.Compile(s, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	return ecmaRegexp{re}, nil
}

func loadManifest(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatalf("manifest.yaml is not valid YAML: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		t.Fatalf("manifest.yaml: want a mapping at the top, got %T", doc)
	}
	return m
}

func TestManifestMatchesSlackSchema(t *testing.T) {
	f, err := os.Open(manifestSchema)
	if errors.Is(err, fs.ErrNotExist) && os.Getenv(requireSchemas) == "" {
		t.Skipf("Slack's manifest schema is not at %s (CI has it there, and %s=1 makes this a failure): "+
			"put schemas/manifest.schema.1.0.0.json from https://github.com/slackapi/manifest-schema there to run this check",
			manifestSchema, requireSchemas)
	}
	if err != nil {
		t.Fatalf("Slack's manifest schema is expected in shared/ beside the checkout: %v", err)
	}
	defer f.Close()
	schemaDoc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.UseRegexpEngine(compileECMA)
	if err := c.AddResource("manifest.schema.json", schemaDoc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("manifest.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(loadManifest(t)); err != nil {
		t.Errorf("manifest.yaml does not match Slack's manifest schema:\n%v", err)
	}
}

// scopesOfMethod is the bot scope each slack-go Web API method the bot calls needs ("" = none). A method the
// code calls that is missing here fails TestManifestScopesAndEvents: add it with its scope.
var scopesOfMethod = map[string][]string{
	"AuthTestContext":               nil,
	"StartSocketModeContext":        nil, // apps.connections.open: the app-level token's connections:write
	"GetConversationRepliesContext": {"channels:history", "groups:history", "im:history", "mpim:history"},
	"GetConversationHistoryContext": {"channels:history", "groups:history", "im:history", "mpim:history"},
	"PostMessageContext":            {"chat:write"},
	"UpdateMessageContext":          {"chat:write"},
	"DeleteMessageContext":          {"chat:write"},
	"PostEphemeralContext":          {"chat:write"},
	"StartStreamContext":            {"chat:write"},
	"AppendStreamContext":           {"chat:write"},
	"StopStreamContext":             {"chat:write"},
	"SetAgentSessionStatusContext":  {"chat:write"}, // and an app declared as an agent (features.agent_view)
	"OpenViewContext":               nil,            // views.open needs only a trigger_id
	"GetPermalinkContext":           nil,
	// The agent pane: assistant:write comes with features.agent_view.
	"SetAssistantThreadsSuggestedPromptsContext": {"assistant:write"},
	"SetAssistantThreadsTitleContext":            {"assistant:write"},
	"SetAssistantThreadsStatusContext":           {"assistant:write"},
	"UploadFileContext":                          {"files:write"},
	"GetFileInfoContext":                         {"files:read"},
	"GetUserInfoContext":                         {"users:read"},
	"GetBotInfoContext":                          {"users:read"},
	"GetUserGroupMembersContext":                 {"usergroups:read"},    // a tool's approvers' user groups
	"SearchAssistantContextContext":              {"search:read.public"}, // slack_search (SLACK_SEARCH)
}

// slackMethodsCalled returns the *slack.Client methods called in the module's non-test code (the fakes and
// the benchmark excluded), found by parsing the source.
func slackMethodsCalled(t *testing.T) map[string]string {
	t.Helper()
	methods := map[string]bool{}
	ct := reflect.TypeOf(&slack.Client{})
	for i := range ct.NumMethod() {
		methods[ct.Method(i).Name] = true
	}
	called := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "internal" || path == "cmd/llmbot-bench" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := goparser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && methods[sel.Sel.Name] && strings.HasSuffix(sel.Sel.Name, "Context") {
					called[sel.Sel.Name] = fset.Position(call.Pos()).String()
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return called
}

// TestManifestScopesAndEvents pins the scopes to exactly what the bot uses: the scopes of the Slack methods
// the code calls, of the events it subscribes to, and `commands` for /imagine, /summarize, /llmbot and the Summarize
// thread shortcut. Each scope carries a comment saying what needs it, and every subscribed event has the scope
// Slack requires for it. The commands and the shortcut the bot serves are in it.
func TestManifestScopesAndEvents(t *testing.T) {
	m := loadManifest(t)
	scopes := strings.Fields(jsonPath(t, m, "oauth_config", "scopes", "bot"))
	events := strings.Fields(jsonPath(t, m, "settings", "event_subscriptions", "bot_events"))

	want := map[string]string{"commands": "the /imagine, /summarize and /llmbot slash commands and the Summarize thread shortcut"}
	for name, where := range slackMethodsCalled(t) {
		need, ok := scopesOfMethod[name]
		if !ok {
			t.Errorf("%s calls slack-go's %s: add it with its scope to scopesOfMethod (and the scope to manifest.yaml)", where, name)
		}
		for _, s := range need {
			want[s] = name + " (" + where + ")"
		}
	}
	for _, s := range scopes {
		if _, ok := want[s]; !ok && !slices.Contains([]string{"app_mentions:read"}, s) {
			t.Errorf("manifest asks for scope %q, which the bot does not use", s)
		}
	}
	for s, why := range want {
		if !slices.Contains(scopes, s) {
			t.Errorf("manifest lacks scope %q (needed for %s)", s, why)
		}
	}
	raw, err := os.ReadFile("manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		item := strings.TrimSpace(line)
		for _, s := range append(slices.Clone(scopes), events...) {
			if strings.HasPrefix(item, "- "+s) && !strings.Contains(item, " # ") {
				t.Errorf("manifest.yaml: %q has no comment saying what needs it", item)
			}
		}
	}
	needs := map[string]string{
		"app_mention":      "app_mentions:read",
		"message.im":       "im:history",
		"message.channels": "channels:history",
		"message.groups":   "groups:history",
		"message.mpim":     "mpim:history",
		// No scope of its own is documented: Slack sends it to apps that keep agent sessions.
		route.EventSessionStopped: "",
		pane.EventAppHomeOpened:   "", // no scope: the messages tab is features.app_home
	}
	for _, e := range events {
		scope, ok := needs[e]
		if !ok {
			t.Errorf("manifest subscribes to %q, which the bot does not handle", e)
			continue
		}
		if scope != "" && !slices.Contains(scopes, scope) {
			t.Errorf("event %q needs scope %q", e, scope)
		}
	}
	if got := jsonPath(t, m, "settings", "socket_mode_enabled"); got != "true" {
		t.Errorf("socket_mode_enabled = %s, want true", got)
	}
	// Stop/Regenerate buttons are on by default (BUTTONS): their clicks arrive only with interactivity on.
	if got := jsonPath(t, m, "settings", "interactivity", "is_enabled"); got != "true" {
		t.Errorf("interactivity.is_enabled = %s, want true (the reply buttons need it)", got)
	}
	for _, cmd := range []string{"/imagine", summarize.Command, command.Name} {
		if got := jsonPath(t, m, "features", "slash_commands"); !strings.Contains(got, `"`+cmd+`"`) {
			t.Errorf("slash_commands = %s, want %s", got, cmd)
		}
	}
	type shortcut struct {
		Type       string `json:"type"`
		CallbackID string `json:"callback_id"`
	}
	var shortcuts []shortcut
	if err := json.Unmarshal([]byte(jsonPath(t, m, "features", "shortcuts")), &shortcuts); err != nil {
		t.Fatalf("shortcuts: %v", err)
	}
	if !slices.Contains(shortcuts, shortcut{"message", summarize.ShortcutThread}) {
		t.Errorf("shortcuts = %+v, want the message shortcut %s", shortcuts, summarize.ShortcutThread)
	}
	if strings.Contains(jsonPath(t, m, "features", "slash_commands"), `"url"`) {
		t.Error("slash command has a url: in Socket Mode commands arrive over the WebSocket")
	}
}

// jsonPath returns the value at path as JSON; a list of strings comes back space-separated.
func jsonPath(t *testing.T, v any, path ...string) string {
	t.Helper()
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("manifest: %s is not a mapping", p)
		}
		if v, ok = m[p]; !ok {
			t.Fatalf("manifest: missing %s", strings.Join(path, "."))
		}
	}
	if list, ok := v.([]any); ok && len(list) > 0 {
		if _, ok := list[0].(string); ok {
			var parts []string
			for _, s := range list {
				parts = append(parts, s.(string))
			}
			return strings.Join(parts, " ")
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

type dockerStage struct {
	from  string
	name  string
	steps []*parser.Node
}

func parseDockerfile(t *testing.T) []dockerStage {
	t.Helper()
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("Dockerfile does not parse: %v", err)
	}
	var stages []dockerStage
	for _, n := range res.AST.Children {
		if strings.EqualFold(n.Value, "from") {
			st := dockerStage{from: n.Next.Value}
			if a := n.Next.Next; a != nil && strings.EqualFold(a.Value, "as") && a.Next != nil {
				st.name = a.Next.Value
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile line %d: %s before the first FROM", n.StartLine, n.Value)
		}
		stages[len(stages)-1].steps = append(stages[len(stages)-1].steps, n)
	}
	return stages
}

func args(n *parser.Node) []string {
	var out []string
	for a := n.Next; a != nil; a = a.Next {
		out = append(out, a.Value)
	}
	return out
}

// TestDockerfile checks the image the way a reviewer would: a build stage and a small final stage, a static
// CGO_ENABLED=0 build of the real cmd/llmbot package, a non-root USER and no secrets baked in.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage Dockerfile, got %d stage(s)", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	var buildCmd string
	for _, n := range build.steps {
		if strings.EqualFold(n.Value, "run") && strings.Contains(strings.Join(args(n), " "), "go build") {
			buildCmd = strings.Join(args(n), " ")
		}
	}
	if buildCmd == "" {
		t.Fatal("build stage has no RUN ... go build")
	}
	for _, want := range []string{"CGO_ENABLED=0", "./cmd/llmbot"} {
		if !strings.Contains(buildCmd, want) {
			t.Errorf("build step %q lacks %q", buildCmd, want)
		}
	}

	if strings.Contains(final.from, "golang") {
		t.Errorf("final stage is built FROM %s: ship the binary on a small base, not the toolchain", final.from)
	}
	var user string
	copiesBinary := false
	for _, n := range final.steps {
		switch strings.ToLower(n.Value) {
		case "user":
			user = strings.Join(args(n), "")
		case "copy":
			for _, fl := range n.Flags {
				if fl == "--from="+build.name {
					copiesBinary = true
				}
			}
		}
	}
	if !copiesBinary {
		t.Errorf("final stage does not COPY --from=%s", build.name)
	}
	if uid, _, _ := strings.Cut(user, ":"); user == "" || uid == "root" || uid == "0" {
		t.Errorf("final stage USER = %q, want a non-root user", user)
	}

	secret := regexp.MustCompile(`(?i)(token|api_key|apikey|secret|password|xox[bap]-|xapp-|sk-)`)
	for _, st := range stages {
		for _, n := range st.steps {
			switch strings.ToLower(n.Value) {
			case "env", "arg":
				if line := strings.Join(args(n), " "); secret.MatchString(line) {
					t.Errorf("Dockerfile line %d bakes a secret-looking %s into the image: %s", n.StartLine, n.Value, line)
				}
			case "copy", "add":
				if line := strings.Join(args(n), " "); strings.Contains(line, ".env") {
					t.Errorf("Dockerfile line %d copies an env file into the image", n.StartLine)
				}
			}
		}
	}
	ignore, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatalf("want a .dockerignore (keeps .git and .env files out of the build context): %v", err)
	}
	for _, want := range []string{".git", ".env"} {
		if !slices.Contains(strings.Fields(string(ignore)), want) {
			t.Errorf(".dockerignore lacks %q", want)
		}
	}
}

// TestDockerBuildIsStatic runs the Dockerfile's build command with the local toolchain and checks that the
// result is a static executable (no ELF interpreter), as the distroless final stage needs.
func TestDockerBuildIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	out := filepath.Join(t.TempDir(), "llmbot")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/llmbot")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, msg)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("binary has an ELF interpreter: it is dynamically linked")
		}
	}
}

// TestReadmeSettingsTable keeps the README's settings table equal to what `llmbot --help-markdown` prints
// (cmd/llmbot keeps that output in testdata/settings.md with a golden test).
func TestReadmeSettingsTable(t *testing.T) {
	table, err := os.ReadFile("cmd/llmbot/testdata/settings.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, bytes.TrimSpace(table)) {
		t.Error("README.md's settings table differs from `go run ./cmd/llmbot --help-markdown`: paste its output into the Settings section")
	}
}

// TestReadmeCommands checks that the README gives the two commands: one that runs the bot and one that
// runs the tests, the same test command CI runs.
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(".ci/run")
	if err != nil {
		t.Fatal(err)
	}
	const testCmd = "go test -race ./..."
	for _, want := range []string{"go run ./cmd/llmbot", testCmd} {
		if !bytes.Contains(readme, []byte(want)) {
			t.Errorf("README.md lacks %q", want)
		}
	}
	if !bytes.Contains(ci, []byte("\n"+testCmd+"\n")) {
		t.Errorf(".ci/run does not run the README's test command %q", testCmd)
	}
}
