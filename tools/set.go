package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmbot/llmbot/toolinfo"
)

// Set is the tools of answers: the bot's own (toolinfo.Builtin: ask_user, slack_search) and the MCP
// servers' (a Manager), behind the one List and Call the answers use. A built-in tool's name has no
// "<server>__" part, so it never clashes with a server's.
type Set struct {
	mcp      Lister // nil: no MCP servers
	builtins []toolinfo.Builtin
	byName   map[string]toolinfo.Builtin
}

// Lister lists and calls the MCP servers' tools (*Manager).
type Lister interface {
	List(channel string) []toolinfo.Info
	Call(ctx context.Context, name string, args json.RawMessage) (string, error)
}

// NewSet returns the Set of mcp's tools (nil: none) and builtins. A built-in whose name is empty or
// has the servers' separator is a programming error: NewSet panics.
func NewSet(mcp Lister, builtins ...toolinfo.Builtin) *Set {
	s := &Set{mcp: mcp, builtins: builtins, byName: make(map[string]toolinfo.Builtin, len(builtins))}
	for _, b := range builtins {
		name := b.Info().Name
		if name == "" || strings.Contains(name, sep) || s.byName[name] != nil {
			panic(fmt.Sprintf("tools: built-in tool name %q is empty, has %q or is taken", name, sep))
		}
		s.byName[name] = b
	}
	return s
}

// List returns the tools channel may use now, for the answer whose toolinfo.Asked ctx carries: the
// built-ins (those that are toolinfo.Offerer, when they offer themselves), then the MCP servers' its
// access rule gives it; none when all of them are built-ins offered only beside others
// (toolinfo.Info.Beside).
func (s *Set) List(ctx context.Context, channel string) []toolinfo.Info {
	out := make([]toolinfo.Info, 0, len(s.builtins))
	alone := false
	for _, b := range s.builtins {
		if o, ok := b.(toolinfo.Offerer); ok && !o.Offered(ctx) {
			continue
		}
		in := b.Info()
		in.Server = toolinfo.BuiltinServer
		out, alone = append(out, in), alone || !in.Beside
	}
	if s.mcp != nil {
		mcp := s.mcp.List(channel)
		out, alone = append(out, mcp...), alone || len(mcp) > 0
	}
	if !alone {
		return nil
	}
	return out
}

// Call calls the tool name with args: a built-in's Call, or the MCP server's.
func (s *Set) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	if b := s.byName[name]; b != nil {
		return b.Call(ctx, args)
	}
	if s.mcp == nil {
		return "", fmt.Errorf("no tool %s", name)
	}
	return s.mcp.Call(ctx, name, args)
}
