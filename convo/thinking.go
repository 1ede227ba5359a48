package convo

import "strings"

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
	spaces     = " \t\r\n"
)

// ThinkFilter finds the answer in a model's content as it streams, without the reasoning some
// servers leave in the content as a leading <think>…</think> block (reasoning models on Ollama
// without its think option, llama.cpp with --reasoning-format none, LM Studio without its
// reasoning setting, vLLM without a reasoning parser) instead of sending it apart
// (reasoning_content). While that block is open, or its opening tag may still be arriving, the
// answer is "": the reply keeps showing its placeholder. Whitespace between the block and the
// answer is dropped.
//
// The answer only grows as the content does (each result is a prefix of the next, Final's too):
// stream mode appends it, and nothing appended can be taken back. So a server whose template writes
// the opening tag into the prompt, and sends only "…</think>", has that reasoning shown: it cannot
// be told from an answer until the closing tag comes (its reasoning parser, when turned on, sends
// it apart instead).
//
// Each call costs the bytes added since the last one, not the whole content: reasoning runs to
// tens of thousands of tokens. The zero ThinkFilter is ready; it is for one stream.
type ThinkFilter struct {
	state   thinkState
	scanned int // thinkInBlock: where the search for the closing tag goes on (in the content)
	start   int // thinkAnswer: where the answer begins, once past the whitespace after the block
}

type thinkState int

const (
	thinkUndecided thinkState = iota // nothing yet but whitespace and maybe part of "<think>"
	thinkPlain                       // no block: the content is the answer
	thinkInBlock                     // inside the block
	thinkAnswer                      // past the block
)

// Answer returns the answer in md, the whole content so far; md only ever grows by appending.
func (f *ThinkFilter) Answer(md string) string {
	if f.state == thinkUndecided {
		body := strings.TrimLeft(md, spaces)
		switch {
		case strings.HasPrefix(body, thinkOpen):
			f.state, f.scanned = thinkInBlock, len(md)-len(body)+len(thinkOpen)
		case body == "" || strings.HasPrefix(thinkOpen, body):
			return "" // nothing yet, or the opening tag still arriving
		default:
			f.state = thinkPlain
		}
	}
	switch f.state {
	case thinkPlain:
		return md
	case thinkInBlock:
		from := max(f.scanned-len(thinkClose)+1, 0) // the tag may straddle what was searched
		i := strings.Index(md[from:], thinkClose)
		if i < 0 {
			f.scanned = len(md)
			return ""
		}
		f.state, f.start = thinkAnswer, from+i+len(thinkClose)
	}
	for f.start < len(md) && strings.IndexByte(spaces, md[f.start]) >= 0 {
		f.start++ // stops for good at the answer's first character
	}
	return md[f.start:]
}

// Final returns the answer in md once the content is complete: what was held back as the possible
// start of an opening tag ("<", as a model may answer which sign goes between 3 and 5) is the answer
// after all. A block never closed leaves no answer, nor does whitespace alone.
func (f *ThinkFilter) Final(md string) string {
	if a := f.Answer(md); a != "" || f.state != thinkUndecided || strings.TrimLeft(md, spaces) == "" {
		return a
	}
	return md
}
