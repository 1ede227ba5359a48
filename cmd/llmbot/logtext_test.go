package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// TestNoMessageTextAtInfo: the README and LOG_LEVEL's description promise "message text
// is logged only at debug". At LOG_LEVEL=info, neither the question, the answer, nor the
// /imagine prompt may reach the logs, also when a model server echoes the request in its error
// (vLLM and LiteLLM answer a 400 with pydantic's validation errors, which carry the 'input').
func TestNoMessageTextAtInfo(t *testing.T) {
	t.Parallel()
	const (
		question = "QUESTION-payroll-of-alice"
		reply    = "ANSWER-alice-earns-a-lot"
		prompt   = "PROMPT-private-sketch"
	)
	for _, tc := range []struct {
		name  string
		reply fakellm.Reply
	}{
		{"answer", fakellm.Text(reply)},
		{"provider error echoing the input", fakellm.HTTPError(http.StatusBadRequest, fakellm.APIError{
			Message: "[{'type': 'string_too_long', 'loc': ('body', 'messages', 1, 'content'), 'msg': 'String should have at most 10 characters', 'input': '" + question + "'}]",
			Type:    "BadRequestError"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startE2E(t, fakeslack.Config{}, map[string]string{"LOG_LEVEL": "info"})
			e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return tc.reply })
			e.llm.SetImage(func(fakellm.ImageRequest) fakellm.ImageReply {
				return fakellm.ImageReply{Image: fakellm.PNG(8, 8)}
			})
			ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> "+question)
			e.final(t, "C1", ts, 1, 1)
			e.slack.SlashCommand("C1", "U1", "/imagine", prompt)
			e.waitFor(t, "shared image", func() bool {
				f := e.slack.Files()
				return len(f) == 1 && f[0].Shared
			})
			e.waitFor(t, "image logged", func() bool { return strings.Contains(e.logs.String(), "image done") })
			logs := e.logs.String()
			for _, text := range []string{question, reply, prompt} {
				for _, line := range strings.Split(logs, "\n") {
					if strings.Contains(line, text) {
						t.Errorf("message text %q logged at LOG_LEVEL=info:\n%s", text, line)
					}
				}
			}
		})
	}
}
