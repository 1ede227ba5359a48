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
	for _, in := range s.List(context.Background(), "C1") {
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

// besideTool is a built-in offered only beside other tools (ask_user by default).
type besideTool struct{ echoTool }

func (b besideTool) Info() toolinfo.Info {
	in := b.echoTool.Info()
	in.Beside = true
	return in
}

// noServers is the MCP side of a channel its access rule gives no tools.
type noServers struct{ fakeServers }

func (noServers) List(string) []toolinfo.Info { return nil }

// A built-in offered only beside others is listed with a server's tools or another built-in, and
// not alone: a channel without tools keeps its answers without the tools parameter.
func TestSetBesideBuiltinNeverAlone(t *testing.T) {
	ask := besideTool{echoTool{"ask_user"}}
	for _, tc := range []struct {
		name string
		set  *Set
		want int
	}{
		{"alone, no servers", NewSet(nil, ask), 0},
		{"alone, no tools in the channel", NewSet(noServers{}, ask), 0},
		{"beside a server's tool", NewSet(fakeServers{}, ask), 2},
		{"beside another built-in", NewSet(nil, ask, echoTool{"slack_search"}), 2},
	} {
		if got := len(tc.set.List(context.Background(), "C1")); got != tc.want {
			t.Errorf("%s: %d tools listed, want %d", tc.name, got, tc.want)
		}
	}
}

// offeredTool offers itself only to answers whose asker is U1 (a toolinfo.Offerer).
type offeredTool struct{ echoTool }

func (offeredTool) Offered(ctx context.Context) bool {
	a, ok := toolinfo.AskedOf(ctx)
	return ok && a.Asker == "U1"
}

// A built-in that is an Offerer is listed only for the answers it offers itself to (the Asked in
// List's context); the others are listed always.
func TestSetListsOfferersWhereTheyOfferThemselves(t *testing.T) {
	s := NewSet(nil, offeredTool{echoTool{"slack_search"}}, echoTool{"ask_user"})
	names := func(ctx context.Context) []string {
		var out []string
		for _, in := range s.List(ctx, "C1") {
			out = append(out, in.Name)
		}
		return out
	}
	for _, tc := range []struct {
		ctx  context.Context
		want []string
	}{
		{toolinfo.WithAsked(context.Background(), toolinfo.Asked{Asker: "U1"}), []string{"slack_search", "ask_user"}},
		{toolinfo.WithAsked(context.Background(), toolinfo.Asked{Asker: "U2"}), []string{"ask_user"}},
		{context.Background(), []string{"ask_user"}},
	} {
		if got := names(tc.ctx); !slices.Equal(got, tc.want) {
			t.Errorf("List = %v, want %v", got, tc.want)
		}
	}
}
