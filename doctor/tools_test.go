package doctor

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestCheckTools(t *testing.T) {
	in := Input{MCPServers: func(context.Context) []MCPServer {
		return []MCPServer{
			{Name: "files", Transport: "stdio", Tools: []string{"read_text_file", "search_files"}, AutoApprove: []string{"search_files"},
				Approvers: map[string][]string{"read_text_file": {"U0123", "S0456"}}},
			{Name: "tickets", Transport: "http", Err: "connect: 401 Unauthorized"},
			{Name: "empty", Transport: "stdio", Tools: []string{}},
		}
	}}
	var b bytes.Buffer
	c := &checklist{w: &b}
	for _, r := range checkTools(t.Context(), in) {
		c.print(r)
	}
	out := b.String()
	for _, want := range []string{"MCP server files", "stdio: 2 tools", "read_text_file", "search_files (auto-approved)", "read_text_file (approved by U0123, S0456)",
		"MCP server tickets", "did not come up: connect: 401 Unauthorized", "MCP server empty", "names none"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if c.failed != 1 || c.warned != 1 {
		t.Errorf("failed %d, warned %d; want 1, 1", c.failed, c.warned)
	}
	if checkTools(t.Context(), Input{}) != nil {
		t.Error("no MCP_CONFIG: no lines")
	}
}
