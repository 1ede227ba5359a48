package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/ask"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/doctor"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/ops"
	"github.com/llmbot/llmbot/search"
	"github.com/llmbot/llmbot/toolinfo"
	"github.com/llmbot/llmbot/tools"
)

// startTools starts the MCP servers of MCP_CONFIG in bg (they outlive the bot's drain, so the last
// answers can still call them) and returns the answers' tool options: the servers' tools and the
// bot's own (builtins), one Set. No servers and no built-ins: no tools.
func startTools(bg *background, cfg Config, mcp tools.Config, overrides *access.Overrides,
	tm *ops.ToolMetrics, log *zap.Logger, builtins ...toolinfo.Builtin) handlers.ToolOptions {
	var servers tools.Lister
	if len(mcp.Servers) > 0 {
		m := tools.New(mcp, log, tools.Options{Allowed: overrides.ToolAllowed, Version: versionString(), Changed: tm.ServerTools})
		bg.run(func(ctx context.Context) { _ = m.Run(ctx) })
		servers = m
	}
	if servers == nil && len(builtins) == 0 {
		return handlers.ToolOptions{}
	}
	return handlers.ToolOptions{Tools: tools.NewSet(servers, builtins...), MaxRounds: cfg.MaxToolRounds,
		ApprovalTimeout: cfg.ToolApprovalTimeout, CallTimeout: cfg.ToolCallTimeout, Observe: tm.Observe}
}

// builtins are the bot's own tools, offered beside the MCP servers' (startTools): the one list of
// them. ask_user unless ASK_USER=off; slack_search when SLACK_SEARCH is on (search: nil or it).
func builtins(cfg Config, questions *ask.Ask, search []toolinfo.Builtin) []toolinfo.Builtin {
	var out []toolinfo.Builtin
	if cfg.AskUser != "off" {
		out = append(out, questions)
	}
	return append(out, search...)
}

// questions is the ask_user use case: the tool, and the handlers of its questions' buttons and
// modal (which serve a late click even with ASK_USER=off). Its writes take their turns in the
// answers' budgets. ASK_USER=auto offers it only where a channel has other tools: offering tools
// changes every answer, and some model services refuse them.
func (p *parts) questions(tm *ops.ToolMetrics) *ask.Ask {
	w := &gateway.Writer{Budgets: p.budgets, Msgs: gateway.WriteThrough(p.api, p.threads)}
	return ask.New(w, p.api, p.log.Named("ask"), ask.Options{Beside: p.cfg.AskUser != "on", Counted: tm.Question,
		Settled: p.shared.marks})
}

// slackSearch is the slack_search built-in when SLACK_SEARCH is on (none: off), searching through
// the adapter's assistant calls, a workspace's refusal shared with the other replicas through marks,
// counted in metrics.
func slackSearch(cfg Config, api *bot.SlackAPI, marks search.Marks, metrics *ops.Metrics, log *zap.Logger) []toolinfo.Builtin {
	if !cfg.SlackSearch {
		return nil
	}
	sm := ops.NewSearchMetrics(metrics, search.Outcomes)
	return []toolinfo.Builtin{search.New(api.Assistant, search.Options{Observe: sm.Observe, Marks: marks},
		log.Named("search"))}
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
