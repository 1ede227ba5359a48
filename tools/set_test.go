package tools

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/toolinfo"
)

// echoTool is a built-in that answers with who asked.
type echoTool struct{ name string }

func (e echoTool) Info() toolinfo.Info { return toolinfo.Info{Tool: llm.Tool{Name: e.name}} }

func (e echoTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	a, _ := toolinfo.AskedOf(ctx)
	return e.name + " for " + a.Asker + ": " + string(args), nil
}

// fakeServers is the MCP side: one tool per channel.
type fakeServers struct{}

func (fakeServers) List(channel string) []toolinfo.Info {
	return []toolinfo.Info{{Tool: llm.Tool{Name: "wiki__" + channel}, Server: "wiki"}}
}

func (fakeServers) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	return "mcp " + name, nil
}

// The built-ins are listed for every channel under the built-in server's name, before the servers'
// tools, and a call reaches the tool of its name with the asker in its context.
func TestSetListsAndCallsBuiltinsBesideServers(t *testing.T) {
	s := NewSet(fakeServers{}, echoTool{"ask_user"})
	var got []string
	for _, in := range s.List("C1") {
		got = append(got, in.Server+":"+in.Name)
	}
	if want := []string{"llmbot:ask_user", "wiki:wiki__C1"}; !slices.Equal(got, want) {
		t.Fatalf("List = %v, want %v", got, want)
	}
	ctx := toolinfo.WithAsked(context.Background(), toolinfo.Asked{Asker: "U1"})
	for _, tc := range []struct{ name, want string }{
		{"ask_user", `ask_user for U1: {"q":1}`},
		{"wiki__C1", "mcp wiki__C1"},
	} {
		out, err := s.Call(ctx, tc.name, json.RawMessage(`{"q":1}`))
		if err != nil || out != tc.want {
			t.Errorf("Call(%s) = %q, %v; want %q", tc.name, out, err, tc.want)
		}
	}
	if _, err := NewSet(nil).Call(ctx, "wiki__C1", nil); err == nil {
		t.Error("a Set without servers called a server's tool")
	}
}

// A built-in named like a server's tool, or twice, is refused when the Set is built.
func TestSetRefusesClashingBuiltinNames(t *testing.T) {
	for _, names := range [][]string{{"wiki__x"}, {""}, {"a", "a"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewSet(%q) did not panic", names)
				}
			}()
			var bs []toolinfo.Builtin
			for _, n := range names {
				bs = append(bs, echoTool{n})
			}
			NewSet(nil, bs...)
		}()
	}
}
