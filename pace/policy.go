package pace

import "fmt"

// Policy is how replies pace their edits. PolicyFair is the bot's policy; the two baselines imitate the
// cadences of well-known Slack LLM bots and exist only so the load benchmark can compare them on the same
// budget (the bot's --bench-edit-policy flag, which cmd/llmbot-bench sets and --help does not show).
type Policy string

// The edit policies.
const (
	// PolicyFair shares one budget among all replies: final edits first, then first text, then the reply
	// whose pending text has waited longest. 429s pause every reply and lower the rate.
	PolicyFair Policy = "fair"
	// PolicyEvery1s edits each reply at most once a second on its own clock, ignoring the shared budget
	// (a 429's Retry-After pauses only the reply that got it).
	PolicyEvery1s Policy = "every-1s"
	// PolicyEvery20Chunks edits a reply after every 20 chunks received, ignoring the shared budget.
	PolicyEvery20Chunks Policy = "every-20-chunks"
)

// ParsePolicy parses a policy's name; "" is PolicyFair.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case "":
		return PolicyFair, nil
	case PolicyFair, PolicyEvery1s, PolicyEvery20Chunks:
		return p, nil
	}
	return "", fmt.Errorf("edit policy %q: want %q, %q or %q", s, PolicyFair, PolicyEvery1s, PolicyEvery20Chunks)
}

// Publish reports whether the reply loop should hand its latest text to the writer after chunks chunks
// received since it last did: always, except under PolicyEvery20Chunks (every 20th chunk). The end of the
// answer is always published.
func (p Policy) Publish(chunks int) bool {
	if p == PolicyEvery20Chunks {
		return chunks >= 20
	}
	return true
}
