package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/doctor"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/tools"
)

// startTools starts the MCP servers of MCP_CONFIG in bg (they outlive the bot's drain, so the last
// answers can still call them) and returns the answers' tool options. No servers: no tools.
func startTools(bg *background, cfg Config, mcp tools.Config, overrides *access.Overrides,
	metrics *ops.Metrics, log *zap.Logger) handlers.ToolOptions {
	if len(mcp.Servers) == 0 {
		return handlers.ToolOptions{}
	}
	tm := metrics.ToolMetrics()
	m := tools.New(mcp, log, tools.Options{Allowed: overrides.ToolAllowed, Version: versionString(), Changed: tm.ServerTools})
	bg.run(func(ctx context.Context) { _ = m.Run(ctx) })
	return handlers.ToolOptions{Tools: m, MaxRounds: cfg.MaxToolRounds, ApprovalTimeout: cfg.ToolApprovalTimeout,
		CallTimeout: cfg.ToolCallTimeout, Observe: tm.Observe}
}

// mcpUpTime bounds how long doctor waits for the MCP servers to come up and list their tools.
const mcpUpTime = 20 * time.Second

// mcpServers is doctor's look at the MCP servers: started as the bot starts them, each reported once it
// listed its tools or failed (or mcpUpTime passed). nil without servers.
func mcpServers(mcp tools.Config) func(ctx context.Context) []doctor.MCPServer {
	if len(mcp.Servers) == 0 {
		return nil
	}
	return func(ctx context.Context) []doctor.MCPServer {
		ctx, cancel := context.WithTimeout(ctx, mcpUpTime)
		m := tools.New(mcp, zap.NewNop(), tools.Options{MaxBackoff: time.Hour, MinBackoff: time.Hour})
		done := make(chan struct{})
		go func() { _ = m.Run(ctx); close(done) }()
		t := time.NewTicker(50 * time.Millisecond)
		for settled := false; !settled && ctx.Err() == nil; {
			<-t.C
			settled = true
			for _, s := range m.Status() {
				settled = settled && (s.Up && s.Tools != nil || s.Err != "")
			}
		}
		t.Stop()
		st := m.Status()
		cancel()
		<-done
		var out []doctor.MCPServer
		for _, s := range st {
			d := doctor.MCPServer{Name: s.Name, Transport: s.Transport, Err: s.Err, Tools: s.Tools, AutoApprove: s.AutoApprove,
				Approvers: s.Approvers}
			if !s.Up && d.Err == "" {
				d.Err = "no answer within " + mcpUpTime.String()
			}
			out = append(out, d)
		}
		return out
	}
}
