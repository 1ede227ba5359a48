package approvals

import (
	"strings"
	"testing"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/toolinfo"
)

// Text the bot writes outside the renderers can come from the model too: a tool call's
// arguments in its approval prompt. It mentions no one, however it writes the mention.
func TestApprovalPromptMentionsNoOne(t *testing.T) {
	const wj = "\u2060"
	args := []byte(`{"text":"@channel <!here> &#64;everyone &#0060;!here>"}`)
	got := approvalText("U1", nil, []toolinfo.Call{{Info: toolinfo.Info{Tool: llm.Tool{Name: "post"}, Server: "chat"}, Args: args}}, "")
	for _, want := range []string{"@" + wj + "channel", "&lt;" + wj + "!here&gt;", "&amp;#64;" + wj + "everyone", "&amp;#0060;" + wj + "!here&gt;"} {
		if !strings.Contains(got, want) {
			t.Errorf("approval prompt %q lacks %q", got, want)
		}
	}
}
