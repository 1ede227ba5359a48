package convo

import "strings"

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// StripThinking returns the answer in md, a model's content so far, without the reasoning some
// servers leave in the content as a leading <think>…</think> block (reasoning models on Ollama
// without its think option, llama.cpp with --reasoning-format none, LM Studio without its
// reasoning setting, vLLM without a reasoning parser) instead of in reasoning_content. While that
// block is open, or its opening tag is still arriving, the answer is "": the reply keeps showing
// its placeholder. Whitespace between the block and the answer is dropped.
//
// As md grows, the result only grows too (it is always a prefix of its next value): stream mode
// appends it, and nothing appended can be taken back. A server whose template writes the opening
// tag into the prompt sends only "…</think>": that reasoning is shown, since it cannot be told
// from the answer until the closing tag comes (its reasoning parser, when turned on, sends it
// apart instead).
func StripThinking(md string) string {
	body := strings.TrimLeft(md, " \t\r\n")
	if body == "" || strings.HasPrefix(thinkOpen, body) {
		return "" // nothing yet, or the opening tag still arriving
	}
	if !strings.HasPrefix(body, thinkOpen) {
		return md
	}
	end := strings.Index(body, thinkClose)
	if end < 0 {
		return ""
	}
	return strings.TrimLeft(body[end+len(thinkClose):], " \t\r\n")
}
