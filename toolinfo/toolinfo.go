// Package toolinfo is the vocabulary between the answers that offer tools to a model (handlers)
// and the plumbing that reaches them (tools, over MCP): what one tool a channel may use is. It sits
// below both, so that the plumbing depends on no use case and the use cases on no protocol.
package toolinfo

import "github.com/llmbot/llmbot/llm"

// Info is one tool a channel may use.
type Info struct {
	llm.Tool           // Name is unique among the channel's tools (what the model calls)
	Server      string // the MCP server it is on (shown to people, metrics)
	AutoApprove bool   // called without asking (the server's auto-approve list)
}
