package access_test

import (
	"strings"
	"testing"

	"github.com/llmbot/llmbot/access"
)

func TestToolAllowed(t *testing.T) {
	o, err := access.ParseOverrides([]byte(`
channels:
  C0123ABCD:
    tools: [wiki, tickets/search]
  C0456EFGH:
    model: gpt-5.4
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		channel, server, tool string
		want                  bool
	}{
		{"C0123ABCD", "wiki", "search", true},
		{"C0123ABCD", "wiki", "get_page", true},
		{"C0123ABCD", "tickets", "search", true},
		{"C0123ABCD", "tickets", "close", false},
		{"C0456EFGH", "wiki", "search", false}, // an entry without tools: none
		{"C0789IJKL", "wiki", "search", false}, // no entry: none
		{"D0123ABCD", "wiki", "search", false},
	} {
		if got := o.ToolAllowed(tc.channel, tc.server, tc.tool); got != tc.want {
			t.Errorf("ToolAllowed(%s, %s, %s) = %v, want %v", tc.channel, tc.server, tc.tool, got, tc.want)
		}
	}
	if (*access.Overrides)(nil).ToolAllowed("C0123ABCD", "wiki", "x") {
		t.Error("no CHANNEL_CONFIG allows tools")
	}
	if _, err := access.ParseOverrides([]byte("channels:\n  C0123ABCD:\n    tools: [\"wiki/a b\"]\n"), "t.yaml"); err == nil || !strings.Contains(err.Error(), "channels.C0123ABCD.tools") {
		t.Errorf("a bad tool entry: %v", err)
	}
}
