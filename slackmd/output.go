package slackmd

import (
	"strings"
	"unicode/utf8"
)

// output is the text a rendering writes, line by line: each line starts with the prefixes of the
// containers it is in (quotes, list items), and the places where a part may be cut are noted
// with it (rendered).
type output struct {
	f       Format
	r       rendered
	levels  []level
	prefix  string // the continuation prefixes of levels, joined
	lineBeg bool   // the next write starts a line (and writes the prefix)
}

type level struct {
	first, cont string // prefix of an item's first line, and of its other lines
	pending     bool   // the next line is the first
}

// curPrefix is the continuation prefix of the current line.
func (o *output) curPrefix() string { return o.prefix }

// push enters a container (quote, list item) whose lines carry a prefix.
func (o *output) push(l level) {
	o.levels = append(o.levels, l)
	o.prefix += l.cont
}

func (o *output) pop() {
	l := o.levels[len(o.levels)-1]
	o.levels = o.levels[:len(o.levels)-1]
	o.prefix = o.prefix[:len(o.prefix)-len(l.cont)]
}

// write writes s (no newlines), starting a line with its prefix when needed.
func (o *output) write(s string) {
	if o.lineBeg {
		o.lineBeg = false
		start := len(o.r.out)
		for i := range o.levels {
			l := &o.levels[i]
			if l.pending {
				o.r.out = append(o.r.out, l.first...)
				l.pending = false
			} else {
				o.r.out = append(o.r.out, l.cont...)
			}
		}
		o.r.lines = append(o.r.lines, lineInfo{start: start, prefix: o.curPrefix()})
	}
	o.r.out = append(o.r.out, s...)
}

func (o *output) nl() {
	if o.lineBeg {
		o.write("") // an empty line still carries its prefix (e.g. a list marker)
	}
	o.r.out = append(o.r.out, '\n')
	o.lineBeg = true
}

// emptyLine writes a blank line between blocks ("" or the quote marker alone).
func (o *output) emptyLine() {
	p := strings.TrimRight(o.prefix, " ")
	if !strings.Contains(p, ">") {
		p = ""
	}
	o.r.out = append(o.r.out, p...)
	o.r.out = append(o.r.out, '\n')
}

func (o *output) cut(at, next int, kind breakKind) {
	o.r.cuts = append(o.r.cuts, cutPoint{at: at, next: next, kind: kind})
}

// leftRune is the last character written on the current line (0 at its start).
func (o *output) leftRune() rune {
	if o.lineBeg || len(o.r.out) == 0 {
		return 0
	}
	r, _ := utf8.DecodeLastRune(o.r.out)
	if r == '\n' {
		return 0
	}
	return r
}

func (o *output) writeLines(s string) {
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			o.write(s)
			return
		}
		o.write(s[:i])
		o.nl()
		s = s[i+1:]
	}
}

// codeText writes code content (no Markdown processing). In mrkdwn, where a ``` anywhere
// ends a code block, backtick runs are broken up (breakFences).
func (o *output) codeText(s string) {
	if o.f == FormatMrkdwn {
		s = breakFences(EscapeMrkdwn(s))
	}
	o.writeLines(s)
}
