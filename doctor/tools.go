package doctor

import (
	"context"
	"strings"
)

// MCPServer is how one MCP server of MCP_CONFIG answered doctor: started (or dialled) and asked
// for its tools.
type MCPServer struct {
	Name, Transport string // "stdio" or "http"
	Err             string // why it did not come up ("" when it did); names no secret
	Tools           []string
	AutoApprove     []string
	Approvers       map[string][]string // by tool: who alone may approve its calls
}

// checkTools lists each MCP server and its tools (Input.MCPServers), one line each.
func checkTools(ctx context.Context, in Input) []result {
	if in.MCPServers == nil {
		return nil
	}
	var out []result
	for _, s := range in.MCPServers(ctx) {
		name := "MCP server " + s.Name
		if s.Err != "" {
			out = append(out, fail(name, s.Transport+": did not come up: "+s.Err,
				"check its command or url in MCP_CONFIG, and the environment variables it names"))
			continue
		}
		r := ok(name, "%s: %s", s.Transport, plural(len(s.Tools), "tool", "tools"))
		for _, t := range s.Tools {
			note := t
			for _, a := range s.AutoApprove {
				if a == t {
					note += " (auto-approved)"
				}
			}
			if a := s.Approvers[t]; len(a) > 0 {
				note += " (approved by " + strings.Join(a, ", ") + ")"
			}
			r.notes = append(r.notes, note)
		}
		if len(s.Tools) == 0 {
			r.status, r.fix = statusWarn, "its allow list (tools:) names none of the tools it has"
		}
		out = append(out, r)
	}
	return out
}
