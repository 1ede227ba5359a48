package handlers

import (
	"context"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
)

// TestReplyChannelInstructions: a channel's standing instructions go into its answers' system
// prompt after the operator's and the channel's CHANNEL_CONFIG prompt, as the channel's block; a
// channel without them gets no block.
func TestReplyChannelInstructions(t *testing.T) {
	for _, c := range []struct {
		name, channelText string
		wantBlock         bool
	}{
		{"with instructions", "Answer in German.", true},
		{"without", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt := testOptions()
			opt.SystemPrompt = "You are the operator's bot."
			opt.ChannelSettings = func(string) (string, string) { return "You serve the support channel.", "" }
			var asked []string
			opt.ChannelInstructions = func(_ context.Context, channel string) string {
				asked = append(asked, channel)
				return c.channelText
			}
			rt := newReplyTest(t, []llmtest.Step{{Chunk: llm.Chunk{Content: "Hallo.", FinishReason: "stop"}}}, opt)
			mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
			calls := rt.chat.Calls()
			if len(calls) != 1 || len(asked) != 1 || asked[0] != testCh {
				t.Fatalf("%d model calls, instructions asked for %v; want one call and %s's instructions", len(calls), asked, testCh)
			}
			system := calls[0].Messages[0].Content
			block := strings.Index(system, "channel instructions>>>\n"+c.channelText)
			if !strings.HasPrefix(system, "You serve the support channel.") || (block > 0) != c.wantBlock {
				t.Errorf("system prompt %q: want the channel's CHANNEL_CONFIG prompt first, and its block: %v", system, c.wantBlock)
			}
		})
	}
}
