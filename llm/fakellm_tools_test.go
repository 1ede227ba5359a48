package llm

import (
	"reflect"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
)

// TestToolCallsAgainstFakeLLM: the client and the fake model the end-to-end tests use agree on
// every wire variant of tool calls, on the round trip of results, and on a refusal of tools.
func TestToolCallsAgainstFakeLLM(t *testing.T) {
	calls := []fakellm.ToolCall{{ID: "c1", Name: "weather", Arguments: `{"city":"Zürich"}`},
		{ID: "c2", Name: "time", Arguments: `{"tz":"Europe/Oslo"}`}}
	want := []ToolCall{{ID: "c1", Name: "weather", Arguments: `{"city":"Zürich"}`},
		{ID: "c2", Name: "time", Arguments: `{"tz":"Europe/Oslo"}`}}
	for _, tc := range []struct {
		name   string
		wire   fakellm.ToolWire
		finish string
	}{
		{"openai", fakellm.WireOpenAI, "tool_calls"},
		{"interleaved", fakellm.WireInterleaved, "tool_calls"},
		{"whole", fakellm.WireWhole, "stop"},
		{"no index", fakellm.WireNoIndex, "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakellm.New()
			defer srv.Close()
			srv.SetAPIKey(testKey)
			srv.SetChat(func(req fakellm.ChatRequest) fakellm.Reply {
				if len(req.Tools) != 1 || req.Tools[0].Name != "weather" {
					t.Errorf("tools %+v", req.Tools)
				}
				r := fakellm.Calls(tc.wire, calls...)
				r.Tokens = []string{"Checking."}
				return r
			})
			c, _ := New(Config{BaseURL: srv.URL(), APIKey: testKey, ChatModel: "m"})
			r := collect(t, c.Stream(t.Context(), weather))
			if r.Err != nil || r.Content != "Checking." || r.Finish != tc.finish || !reflect.DeepEqual(r.Calls, want) {
				t.Errorf("got %s", show(r))
			}
			comp, err := c.Complete(t.Context(), weather)
			if err != nil || !reflect.DeepEqual(comp.ToolCalls, want) {
				t.Errorf("Complete = %+v, %v", comp, err)
			}
		})
	}

	t.Run("results round trip", func(t *testing.T) {
		srv := fakellm.New()
		defer srv.Close()
		srv.SetAPIKey(testKey)
		srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("ok") })
		c, _ := New(Config{BaseURL: srv.URL(), APIKey: testKey, ChatModel: "m"})
		req := weather
		req.Messages = append(req.Messages, Message{Role: RoleAssistant, ToolCalls: want},
			Message{Role: RoleTool, ToolCallID: "c1", Content: "sunny"})
		collect(t, c.Stream(t.Context(), req))
		got := srv.ChatRequests()[0].Messages
		if len(got) != 3 || len(got[1].ToolCalls) != 2 || got[1].ToolCalls[1].Name != "time" || got[2].ToolCallID != "c1" || got[2].Content != "sunny" {
			t.Errorf("messages %+v", got)
		}
	})

	t.Run("refused", func(t *testing.T) {
		srv := fakellm.New()
		defer srv.Close()
		srv.SetAPIKey(testKey)
		srv.SetChat(func(req fakellm.ChatRequest) fakellm.Reply {
			if req.Has("tools") {
				return fakellm.RefuseTools()
			}
			return fakellm.Text("plain")
		})
		c, _ := New(Config{BaseURL: srv.URL(), APIKey: testKey, ChatModel: "m"})
		if r := collect(t, c.Stream(t.Context(), weather)); r.Content != "plain" {
			t.Errorf("got %s", show(r))
		}
	})
}
