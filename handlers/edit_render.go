package handlers

import (
	"cmp"
	"strings"

	"github.com/llmbot/llmbot/slackmd"
)

// editRendering is an edited answer's text as its messages take it: the Pager's parts, rendered
// once per new text.
type editRendering struct {
	pager      *slackmd.Pager
	parts      []string // the last rendering, of renderedMD
	renderedMD string
}

// visible is the part of the answer md the next interim write shows: all of it, or under load up to
// the last place where a part may be cut (the Pager's MayBreak), preferring the end of a block, then
// of a sentence, then of a word, among the last wholeBlocksSlack bytes (an answer that shows text
// keeps showing progress). The first text under load too: it may be all its message shows when the
// answer ends. With no such place, all of md; never less than was rendered before (the Pager takes
// growing text).
func (e *editRendering) visible(md string, underLoad bool) string {
	if !underLoad {
		return md
	}
	lo := max(len(e.renderedMD), len(md)-wholeBlocksSlack)
	var sentence, word int
	for i := len(md); i > lo; i-- {
		if c := md[i-1]; c != ' ' && c != '\n' || !e.pager.MayBreak(md[:i]) {
			continue
		}
		switch {
		case strings.HasSuffix(md[:i], "\n\n"):
			return md[:i]
		case sentence == 0 && slackmd.SentenceEnd(md[:i]):
			sentence = i
		case word == 0:
			word = i
		}
	}
	if i := cmp.Or(sentence, word); i > 0 {
		return md[:i]
	}
	return md
}

// render returns the parts of md, rendering only when md is new: rendering is the writer's main cost, so
// it happens about once per write (never before waiting for a slot, only after).
func (e *editRendering) render(md string) []string {
	if e.parts == nil || md != e.renderedMD {
		e.parts, e.renderedMD = e.pager.Update(md, false), md
	}
	return e.parts
}
