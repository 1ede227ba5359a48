package llmbot_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/llmbot/llmbot/"

// importRule is a direction the dependencies of packages may not take.
type importRule struct {
	rule     string
	packages []string // import paths within the module
	never    []string // import path prefixes (within the module when they have no dot)
}

// useCases are the bot's use cases, each a package of its own and a peer of the others: none imports
// another, so each is read, changed and tested alone. What two of them share goes down to the lowest
// package that owns its concept, or comes in as a small interface the consumer declares.
var useCases = []string{"handlers", "summarize", "pane", "orphans", "imagine", "feedback", "approvals", "usage",
	"instructions", "schedule", "ask", "search"}

// above are what the use cases, the plumbing and the vocabularies may not depend on: the use cases,
// the loop, the wiring and the tools beside them.
var above = append(slices.Clone(useCases), "bot", "access", "ops", "doctor", "cmd/")

// importRules are the directions the packages' dependencies may take (docs/design.md, "Import
// rules"): the plumbing and the vocabularies below the use cases depend on none of them, no use case
// on another, and only the MCP plumbing speaks MCP. A rule covers every package a package depends on,
// directly or not, so a lower package cannot reach a use case through another one either.
var importRules = []importRule{
	{
		rule: "plumbing imports no use case",
		packages: []string{"gateway", "gateway/gatewaytest", "tools", "state", "threads", "pace", "slackmd", "llm", "llm/llmtest", "media", "attach",
			"slacksocket", "internal/watch", "internal/redisping", "internal/nodump", "internal/ttlcache", "redact", "ledger", "followup",
			"tables"},
		never: above,
	},
	{
		rule:     "the redactor is text in, text out: it knows no model, no Slack and no state",
		packages: []string{"redact"},
		never:    []string{"llm", "gateway", "state", "route", "convo", "slackmd", "github.com/"},
	},
	{
		rule:     "the ledger is a seam under the use cases: it counts and refuses for all of them, and says nothing itself",
		packages: []string{"ledger"},
		never:    []string{"gateway", "notes"},
	},
	{
		rule:     "the vocabularies between the loop, the use cases and the plumbing import no use case",
		packages: []string{"route", "toolinfo", "convo", "notes", "command"},
		never:    above,
	},
	{
		rule:     "no use case imports another (what two share lies below them), nor the loop or the wiring",
		packages: useCases,
		never:    above,
	},
	{
		rule:     "the fakes speak the wire protocols and import nothing but a helper of ours",
		packages: []string{"internal/fakeslack", "internal/fakellm"},
		never: append(slices.Clone(above), "tools", "state", "pace", "slackmd", "llm", "media", "slacksocket", "route",
			"toolinfo", "convo"),
	},
	{
		rule: "only tools speaks MCP: the use cases see tools through toolinfo",
		packages: append(slices.Clone(useCases), "bot", "access", "ops", "doctor", "route", "toolinfo", "convo",
			"llm", "state", "threads", "pace", "slackmd", "media", "slacksocket", "followup"),
		never: []string{"github.com/modelcontextprotocol/"},
	},
}

// TestImportsPointInward checks importRules against what the Go tool says each package depends
// on (its production files: a test may use anything).
func TestImportsPointInward(t *testing.T) {
	deps := packageDeps(t)
	for _, r := range importRules {
		for _, p := range r.packages {
			d, ok := deps[module+p]
			if !ok {
				t.Errorf("%s: no package %s in the module", r.rule, p)
				continue
			}
			for _, dep := range d {
				if forbidden(dep, r.never) {
					t.Errorf("%s: %s depends on %s", r.rule, p, dep)
				}
			}
		}
	}
}

// forbidden reports whether the import path dep falls under one of the prefixes never.
func forbidden(dep string, never []string) bool {
	for _, n := range never {
		p := n
		if !strings.Contains(n, ".") {
			p = module + n
		}
		p = strings.TrimSuffix(p, "/")
		if dep == p || strings.HasPrefix(dep, p+"/") {
			return true
		}
	}
	return false
}

// packageDeps returns every package of the module with the import paths it depends on, directly or
// not (go list's Deps: production files only).
func packageDeps(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := make(map[string][]string)
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			deps[f[0]] = f[1:]
		}
	}
	return deps
}
