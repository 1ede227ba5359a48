package tools

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/llmbot/llmbot/toolinfo"

	yaml "go.yaml.in/yaml/v2"
)

// Config is the MCP_CONFIG file: the MCP servers the bot may use.
//
//	servers:
//	  - name: wiki
//	    command: /usr/local/bin/wiki-mcp      # stdio: a program the bot starts
//	    args: ["--read-only"]
//	    env: {WIKI_TOKEN: "${WIKI_TOKEN}"}    # values from the bot's environment
//	    tools: [search, get_page]             # allow list; empty: all the server's tools
//	    auto_approve: [search]                # called without asking the asker
//	    approvers: [U0123ABCD, S0456EFGH]     # who alone may approve its calls: people, user groups
//	    tool_approvers: {delete_page: [U0789]} # per tool, instead of the server's approvers
//	    public_arguments: [search]            # prompts posted in the thread with their arguments ("*": all)
//	  - name: tickets
//	    url: https://mcp.example.com/mcp      # streamable HTTP
//	    headers: {Authorization: "Bearer ${TICKETS_TOKEN}"}
//
// Secrets are never written in the file: "${NAME}" in env and header values is replaced by the
// variable NAME of the bot's environment when the file is loaded (a missing variable is an error),
// and those values never reach logs, Slack or the model.
type Config struct {
	Servers []ServerConfig `yaml:"servers"`
}

// ServerConfig is one MCP server: a program over stdio (Command) or a streamable-HTTP endpoint (URL).
type ServerConfig struct {
	Name        string            `yaml:"name"`
	Command     string            `yaml:"command"`
	Args        []string          `yaml:"args"`
	Env         map[string]string `yaml:"env"`
	URL         string            `yaml:"url"`
	Headers     map[string]string `yaml:"headers"`
	Tools       []string          `yaml:"tools"`
	AutoApprove []string          `yaml:"auto_approve"`
	// Approvers alone may approve the server's calls (Slack user ids U…/W…, user groups S…);
	// ToolApprovers, per tool, instead of them. None: the person who asked.
	Approvers     []string            `yaml:"approvers"`
	ToolApprovers map[string][]string `yaml:"tool_approvers"`
	// PublicArguments are the tools ("*": all) whose approval prompt, arguments included, is
	// posted in the thread for all to see; the others' is shown to whom it concerns alone.
	PublicArguments []string `yaml:"public_arguments"`
}

// publicArguments reports whether tool's prompt shows its arguments to everyone in the thread.
func (s ServerConfig) publicArguments(tool string) bool {
	return slices.Contains(s.PublicArguments, "*") || slices.Contains(s.PublicArguments, tool)
}

// ApproversOf are who alone may approve calls of tool (none: the asker).
func (s ServerConfig) ApproversOf(tool string) []string {
	if a, ok := s.ToolApprovers[tool]; ok {
		return a
	}
	return s.Approvers
}

// approverID is what an approver may be: a Slack user id (U…, W…) or user group id (S…).
var approverID = regexp.MustCompile(`^[UWS][A-Z0-9]{2,20}$`)

// checkApprovers checks the approvers' ids and that tool_approvers names tools the server allows.
func (s ServerConfig) checkApprovers() error {
	check := func(ids []string, where string) error {
		for _, id := range ids {
			if !approverID.MatchString(id) {
				return fmt.Errorf("%s: %q is not a Slack user (U…, W…) or user group (S…) id", where, id)
			}
		}
		return nil
	}
	if err := check(s.Approvers, "approvers"); err != nil {
		return err
	}
	for _, t := range slices.Sorted(maps.Keys(s.ToolApprovers)) {
		if !s.allows(t) {
			return fmt.Errorf("tool_approvers names %q, which tools does not allow", t)
		}
		if len(s.ToolApprovers[t]) == 0 {
			return fmt.Errorf("tool_approvers: %q lists nobody (leave it out for the server's approvers)", t)
		}
		if err := check(s.ToolApprovers[t], "tool_approvers "+t); err != nil {
			return err
		}
	}
	return nil
}

// Transport is "stdio" or "http".
func (s ServerConfig) Transport() string {
	if s.URL != "" {
		return "http"
	}
	return "stdio"
}

// allows reports whether the server's allow list lets the tool through.
func (s ServerConfig) allows(tool string) bool {
	return len(s.Tools) == 0 || slices.Contains(s.Tools, tool)
}

// secrets are the values taken from the environment (redacted from every error and log).
func (s ServerConfig) secrets() []string {
	var out []string
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			for _, f := range strings.Fields(v) { // "Bearer abc": the token alone too
				if len(f) >= 4 {
					out = append(out, f)
				}
			}
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// maxConfigFile bounds the MCP_CONFIG file.
const maxConfigFile = 1 << 20

// serverName is what a server may be called: it becomes part of the tools' names the model sees
// (^[a-zA-Z0-9_-]{1,64}$ for OpenAI's function names).
var serverName = regexp.MustCompile(`^[a-zA-Z0-9-]{1,24}$`)

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// LoadConfig reads the file at path (MCP_CONFIG), taking "${NAME}" values from getenv. An empty
// path is no servers.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	if path == "" {
		return Config{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("MCP_CONFIG: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return Config{}, fmt.Errorf("MCP_CONFIG %s: %w", path, err)
	}
	if len(data) > maxConfigFile {
		return Config{}, fmt.Errorf("MCP_CONFIG %s: larger than %d bytes", path, maxConfigFile)
	}
	return ParseConfig(data, path, getenv)
}

// ParseConfig decodes an MCP_CONFIG file strictly (unknown keys are errors) and checks it.
func ParseConfig(data []byte, name string, getenv func(string) string) (Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return Config{}, fmt.Errorf("MCP_CONFIG %s: %w", name, err)
	}
	var errs []error
	seen := map[string]bool{}
	for i := range c.Servers {
		s := &c.Servers[i]
		if err := s.check(seen, getenv); err != nil {
			errs = append(errs, fmt.Errorf("server %d (%q): %w", i+1, s.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("MCP_CONFIG %s: %w", name, err)
	}
	return c, nil
}

func (s *ServerConfig) check(seen map[string]bool, getenv func(string) string) error {
	switch {
	case !serverName.MatchString(s.Name):
		return errors.New("name must be 1-24 letters, digits or dashes")
	case seen[s.Name]:
		return errors.New("a second server of that name")
	case strings.EqualFold(s.Name, toolinfo.BuiltinServer):
		return fmt.Errorf("%q is the name of the bot's built-in tools", toolinfo.BuiltinServer)
	case (s.Command == "") == (s.URL == ""):
		return errors.New("give either command (stdio) or url (streamable HTTP)")
	case s.URL != "" && !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://"):
		return errors.New("url must be http(s)")
	case s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0):
		return errors.New("args and env are for a command, not a url")
	case s.Command != "" && len(s.Headers) > 0:
		return errors.New("headers are for a url, not a command")
	}
	seen[s.Name] = true
	for _, t := range s.AutoApprove {
		if !s.allows(t) {
			return fmt.Errorf("auto_approve names %q, which tools does not allow", t)
		}
	}
	if err := s.checkApprovers(); err != nil {
		return err
	}
	for _, t := range s.PublicArguments {
		if t != "*" && !s.allows(t) {
			return fmt.Errorf("public_arguments names %q, which tools does not allow", t)
		}
	}
	var missing []string
	expand := func(m map[string]string) {
		for k, v := range m {
			m[k] = envRef.ReplaceAllStringFunc(v, func(ref string) string {
				name := envRef.FindStringSubmatch(ref)[1]
				val := getenv(name)
				if val == "" {
					missing = append(missing, name)
				}
				return val
			})
		}
	}
	expand(s.Env)
	expand(s.Headers)
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("environment variables not set: %s", strings.Join(slices.Compact(missing), ", "))
	}
	return nil
}
