package handlers

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/llm/llmtest"
)

// TestReplyWritesNoControls streams an answer full of control characters, as a model with
// random weights does, in both reply modes: no Slack call carries one, and the answer shows
// without them.
func TestReplyWritesNoControls(t *testing.T) {
	ws := []string{"\x02Hello", "\x19 world\x7f", ".\r\n", "caf\u0085e ", "\u009f**bold**", "\r\n\x1b[31mred\n"}
	tests := []struct {
		name string
		opt  ReplyOptions
		want []string
	}{
		{"post and edit", testOptions(), []string{"Hello world.\ncafe *bold*\n[31mred"}},
		{"native streaming", streamOptions(), []string{"Hello world.\ncafe **bold**\n[31mred\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, llmtest.Deltas(ws, 300*time.Millisecond), tt.opt)
				mustNoErr(t, rt.r.Reply(t.Context(), rt.req))
				for _, method := range []string{"post", "update", "startStream", "appendStream", "stopStream"} {
					for _, c := range rt.slack.CallsOf(method) {
						if r := firstControl(c.Text); r >= 0 {
							t.Errorf("%s wrote control %U: %q", method, r, c.Text)
						}
					}
				}
				if got := rt.texts(); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
					t.Errorf("messages = %q, want %q", got, tt.want)
				}
			})
		})
	}
}

// firstControl is the first C0 control other than tab and newline, DEL or C1 control in s, or -1.
func firstControl(s string) rune {
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' || r >= 0x7f && r <= 0x9f {
			return r
		}
	}
	return -1
}
