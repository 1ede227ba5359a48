package handlers

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/toolinfo"
)

// Text the bot writes outside the renderers can come from the model too: a tool call's
// arguments in its approval prompt, an image model's revised prompt under the picture. It
// mentions no one, however it writes the mention.
func TestApprovalPromptMentionsNoOne(t *testing.T) {
	const wj = "\u2060"
	args := []byte(`{"text":"@channel <!here> &#64;everyone &#0060;!here>"}`)
	got := approvalText("U1", []*toolCall{{info: toolinfo.Info{Tool: llm.Tool{Name: "post"}, Server: "chat"}, args: args}}, "")
	for _, want := range []string{"@" + wj + "channel", "&lt;" + wj + "!here&gt;", "&amp;#64;" + wj + "everyone", "&amp;#0060;" + wj + "!here&gt;"} {
		if !strings.Contains(got, want) {
			t.Errorf("approval prompt %q lacks %q", got, want)
		}
	}
}

func TestRevisedPromptMentionsNoOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		img := &fakeImager{wait: time.Second, img: &llm.Image{Data: pngBytes, Format: "png", MIMEType: "image/png",
			RevisedPrompt: "A lighthouse, @here and &#64;channel"}}
		im, fs := newImagineTest(t, img)
		mustNoErr(t, im.Run(t.Context(), imagineReq("a lighthouse")))
		ups := fs.CallsOf("upload")
		if len(ups) != 1 {
			t.Fatalf("uploads = %d, want 1", len(ups))
		}
		if c := ups[0].Upload.Comment; !strings.Contains(c, "@\u2060here and &amp;#64;\u2060channel") {
			t.Errorf("comment %q: want the revised prompt's mentions neutralised", c)
		}
	})
}
