package tools

import (
	"os"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/access"
)

// TestReadmeExample: the README's example MCP_CONFIG and its CHANNEL_CONFIG for tools are valid.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "### Tools (MCP)")
	if !ok {
		t.Fatal("README.md has no Tools section")
	}
	var blocks []string
	for _, part := range strings.Split(section, "```yaml\n")[1:] {
		blocks = append(blocks, part[:strings.Index(part, "```")])
		if len(blocks) == 2 {
			break
		}
	}
	if len(blocks) != 2 {
		t.Fatalf("want the MCP_CONFIG and CHANNEL_CONFIG examples, found %d", len(blocks))
	}
	cfg, err := ParseConfig([]byte(blocks[0]), "README", func(string) string { return "a-token" })
	if err != nil || len(cfg.Servers) != 2 {
		t.Errorf("MCP_CONFIG example: %+v, %v", cfg, err)
	}
	o, err := access.ParseOverrides([]byte(blocks[1]), "README")
	if err != nil || !o.ToolAllowed("C0123456789", "tickets", "search") {
		t.Errorf("CHANNEL_CONFIG example: %v", err)
	}
}
