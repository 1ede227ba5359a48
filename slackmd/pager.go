package slackmd

import (
	"bytes"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pager splits a growing answer into message parts that each fit a Slack message.
//
// Parts are cut at a paragraph (block) boundary, else a line, else a sentence, else a word
// (preferring the best kind of boundary that still fills at least half a part), and only as
// a last resort at any character (never inside a link, an &amp; escape or an emoji
// sequence). A cut inside a code block closes the fence and reopens it (with its language in
// FormatMarkdown) in the next part; a cut inside a quoted or list line repeats the line's
// prefix. Lengths are counted in UTF-16 code units.
//
// While streaming, only text that can no longer change is sealed: every block of the
// Markdown source except the last one still growing (and the complete lines of a code
// block, or the finished items of a list). Once returned as a part other than the last,
// a part never changes. A Pager is not safe for concurrent use.
type Pager struct {
	f      Format
	limit  int
	sealed []string
	src    int    // offset in the answer where the unsealed source starts (a block's first line)
	pos    int    // offset in the rendering of answer[src:] where the unsealed text starts
	carry  string // what the next part starts with (a reopened code fence, a line prefix)
}

// NewPager returns a Pager for format f and part limit (MrkdwnLimit, MarkdownLimit). A
// limit below 100 is raised to 100.
func NewPager(f Format, limit int) *Pager {
	return &Pager{f: f, limit: max(limit, 100)}
}

// Update takes the whole answer so far (each call's md extends the previous one) and
// returns all parts: the sealed ones, which never change, and the rest rendered as the last
// part. final says md is the whole answer: everything is then cut to fit. While not final,
// the last part may be a preview that is cut short (ending in "…") when it does not fit yet.
// An empty answer has no parts.
func (p *Pager) Update(md string, final bool) []string {
	if p.src > len(md) {
		p.src = len(md)
	}
	stripped, cuts := stripControls(md[p.src:])
	src, joins := neutralise(stripped)
	// view is what the parts show; while streaming its growing last line has its open
	// spans closed (see closeDangling).
	view := src
	if !final {
		view = closeDangling(src)
	}
	v := renderSorted(view, p.f, final)
	r := v
	if !p.fits(v) && !final {
		// Only complete lines are sealed while streaming: a growing last line can look like
		// a block start ("#", "~~~", "---") that closes the block before it, for now.
		r = renderSorted(src[:strings.LastIndexByte(src, '\n')+1], p.f, false)
	}
	sealed := false
	for !p.fits(v) {
		c, ok := p.choose(r, r.stable)
		if !ok {
			break
		}
		p.seal(r, c)
		sealed = true
	}
	tail := ""
	if rest := rest(v, p.pos, len(v.out)); strings.TrimSpace(rest) != "" {
		if p.carry != "" {
			rest = strings.TrimRight(string(v.out[p.pos:]), " \n")
		}
		tail = p.carry + rest
	}
	if len16(tail) > p.limit {
		tail = p.preview(v)
	}
	if sealed {
		p.advance(r, joins, cuts) // r: complete lines, or the final text
	}
	parts := make([]string, 0, len(p.sealed)+1)
	parts = append(parts, p.sealed...)
	if tail != "" {
		parts = append(parts, tail)
	}
	return parts
}

// Break seals the part being written as it is shown now, so the answer goes on in a new part: for
// a writer that cannot edit that part's message again soon (the edit budget is spent) and posts the
// rest of the answer as a new message instead, the part keeping what it shows. md is the answer the
// part was last shown from (it extends the md of earlier calls, and later calls extend it); shown is
// what the part shows. The part is sealed only where md ends at a boundary the Pager may cut at
// (after a block, a line, a sentence or a word, outside a code block, a table and any unclosed bold,
// strike or code span; a writer that can choose shows text up to a SentenceEnd) and only when it
// shows exactly what md renders to: otherwise nothing changes and Break returns false. The next part is md's continuation rendered on its own (after a cut inside a quote
// or a list item, with the line's prefix).
func (p *Pager) Break(md, shown string) bool {
	src, ok := p.cuttable(md)
	if !ok || shown == "" {
		return false
	}
	r := renderSorted(src, p.f, false)
	if tail := p.carry + rest(r, p.pos, len(r.out)); tail != shown || len16(tail) > p.limit {
		return false
	}
	carry := ""
	if !strings.HasSuffix(src, "\n") {
		carry = linePrefix(r, len(r.out))
	}
	p.sealed = append(p.sealed, shown)
	p.src, p.pos, p.carry = len(md), 0, carry
	return true
}

// MayBreak reports whether Break could seal a part that shows md: md ends at a boundary the Pager may
// cut at. A writer that will want to break shows text up to such a boundary.
func (p *Pager) MayBreak(md string) bool {
	_, ok := p.cuttable(md)
	return ok
}

// cuttable returns the source of the part being written when md ends at a boundary the Pager may cut
// at (after a space or a line break, outside a code block, a table and unclosed spans).
func (p *Pager) cuttable(md string) (string, bool) {
	if p.src > len(md) || !strings.HasSuffix(md, " ") && !strings.HasSuffix(md, "\n") {
		return "", false
	}
	stripped, _ := stripControls(md[p.src:])
	src, _ := neutralise(stripped)
	return src, cuttableEnd(src)
}

// SentenceEnd reports whether md ends after a line or a sentence: a line break, or ".", "!", "?" or
// ":" (closing quotes and brackets after them included) and then spaces.
func SentenceEnd(md string) bool {
	if strings.HasSuffix(md, "\n") {
		return true
	}
	t := strings.TrimRight(md, " ")
	if len(t) == len(md) {
		return false // no space yet: the sentence may go on ("3.5"); Break cuts only after one
	}
	t = strings.TrimRight(t, `"')]*_`)
	return strings.HasSuffix(t, ".") || strings.HasSuffix(t, "!") || strings.HasSuffix(t, "?") || strings.HasSuffix(t, ":")
}

// cuttableEnd reports whether a part may end where src ends: not inside a code block or a table,
// not inside a heading's line, not after a line's block marker alone (a list item's -, a task's
// [ ], a quote's >: the part would show the marker, or nothing, and the next would lose the block),
// and with no bold, strike or code span left open in its last paragraph.
func cuttableEnd(src string) bool {
	fences := 0
	last := ""
	for line := range strings.Lines(src) {
		if opensFence(containerless(line)) != "" {
			fences++
		}
		if strings.TrimSpace(line) != "" {
			last = line
		}
	}
	block := src[strings.LastIndex(src, "\n\n")+1:] // spans may run over the lines of a paragraph
	open := strings.Count(block, "`")%2 == 1 || strings.Count(block, "**")%2 == 1 || strings.Count(block, "~~")%2 == 1
	body := strings.TrimSpace(containerless(last))
	hashes := len(body) - len(strings.TrimLeft(body, "#"))
	heading := hashes >= 1 && hashes <= 6 && (len(body) == hashes || body[hashes] == ' ')
	marker := body == "" || body == "[ ]" || body == "[x]" || body == "[X]"
	return fences%2 == 0 && !strings.HasPrefix(body, "|") && !(heading && !strings.HasSuffix(src, "\n")) && !marker && !open
}

// fits reports whether the unsealed rest of r fits in one part.
func (p *Pager) fits(r *rendered) bool {
	rest := restBytes(r, p.pos, len(r.out))
	return len(rest) == 0 || len16(p.carry)+len16(rest) <= p.limit
}

// rest is out[from:to] without the line breaks a part neither starts nor ends with.
func rest(r *rendered, from, to int) string {
	return string(restBytes(r, from, to))
}

func restBytes(r *rendered, from, to int) []byte {
	return bytes.TrimRight(bytes.TrimLeft(r.out[from:to], "\n"), " \n")
}

func renderSorted(src string, f Format, final bool) *rendered {
	r := render([]byte(src), f, final)
	sort.Slice(r.cuts, func(i, j int) bool { return r.cuts[i].at < r.cuts[j].at })
	return r
}

// Split cuts a whole answer into parts: NewPager(f, limit).Update(md, true).
func Split(md string, f Format, limit int) []string {
	return NewPager(f, limit).Update(md, true)
}

type choice struct {
	at, next int
	midLine  bool
}

// choose picks where the next part ends, within out[:stable].
func (p *Pager) choose(r *rendered, stable int) (choice, bool) {
	budget := p.limit - len16(p.carry)
	var best [breakBlock + 1]int // best index per kind (filling at least half a part)
	var any = -1
	for k := range best {
		best[k] = -1
	}
	n := 0
	last := p.pos
	for i, c := range r.cuts {
		if c.at <= p.pos || c.next > stable {
			continue
		}
		n += len16(r.out[last:c.at])
		last = c.at
		size := n
		if cr, ok := p.codeAt(r, c.next); ok {
			size += 1 + len16(cr.close)
		}
		if n > budget {
			break
		}
		if size > budget {
			continue
		}
		any = i
		if size >= budget/2 {
			best[c.kind] = i
		}
	}
	for k := breakBlock; k >= breakWord; k-- {
		if best[k] >= 0 {
			c := r.cuts[best[k]]
			return choice{at: c.at, next: c.next, midLine: c.kind <= breakSentence}, true
		}
	}
	if any >= 0 {
		c := r.cuts[any]
		return choice{at: c.at, next: c.next, midLine: c.kind <= breakSentence}, true
	}
	// No boundary fits: cut the stable text hard, if there is more than a part of it.
	if len16(r.out[p.pos:stable]) <= budget {
		return choice{}, false
	}
	x := p.hardCut(r, stable, budget)
	if x <= p.pos {
		return choice{}, false
	}
	return choice{at: x, next: x, midLine: true}, true
}

// hardCut is the last rune boundary x in out(pos:stable] where out[pos:x] (plus a closing
// fence) fits budget, moved back out of links, escapes and emoji sequences when possible.
func (p *Pager) hardCut(r *rendered, stable, budget int) int {
	pos := p.pos
	x := fitRunes(r.out, pos, stable, budget)
	for _, cr := range r.codes {
		if pos < cr.end && cr.end < x && x <= cr.fenceEnd {
			x = cr.end // not inside a closing fence, unless it is all that is left
		}
	}
	if cr, ok := p.codeAt(r, x); ok {
		x = fitRunes(r.out, pos, stable, budget-1-len16(cr.close))
	}
	return avoidSplits(r, pos, x)
}

// fitRunes is the last rune boundary x in out[pos:stable] with out[pos:x] at most budget
// UTF-16 units long.
func fitRunes(out []byte, pos, stable, budget int) int {
	x, n := pos, 0
	for x < stable {
		ru, size := utf8.DecodeRune(out[x:])
		w := 1
		if ru >= 0x10000 {
			w = 2
		}
		if n+w > budget {
			break
		}
		n += w
		x += size
	}
	return x
}

// avoidSplits moves a hard cut x back out of a link, an &amp; escape, an emoji sequence (ZWJ
// sequences, skin tones, flags) or a word that an "@" starts (cut after "@here", "@heretic"
// would end its part as a bare @here), unless that would leave nothing before it. A link that
// starts at pos is longer than a whole part: it is cut where it must be.
func avoidSplits(r *rendered, pos, x int) int {
	out := r.out
	if x <= pos {
		_, size := utf8.DecodeRune(out[pos:])
		return pos + size
	}
	y := x
	for _, s := range r.atoms {
		if pos < s.start && s.start < y && y < s.end {
			y = s.start
		}
	}
	if i := strings.LastIndexByte(string(out[max(pos, y-8):y]), '&'); i >= 0 {
		amp := max(pos, y-8) + i
		if !strings.Contains(string(out[amp:y]), ";") {
			y = amp
		}
	}
	y = beforeBroadcast(out, pos, y)
	for y > pos {
		ru, _ := utf8.DecodeRune(out[y:])
		prev, _ := utf8.DecodeLastRune(out[:y])
		if !joinsPrevious(ru) && prev != '\u200d' {
			break
		}
		_, size := utf8.DecodeLastRune(out[:y])
		y -= size
	}
	if ru, _ := utf8.DecodeRune(out[y:]); isRegionalIndicator(ru) {
		// A flag is a pair of regional indicators: count the run before y from its start.
		n := 0
		for i := y; i > 0; n++ {
			prev, size := utf8.DecodeLastRune(out[:i])
			if !isRegionalIndicator(prev) {
				break
			}
			i -= size
		}
		if n%2 == 1 {
			_, size := utf8.DecodeLastRune(out[:y])
			y -= size
		}
	}
	if y <= pos {
		return x
	}
	return y
}

// maxBroadcastBytes bounds how far back of a cut beforeBroadcast looks: "@everyone" with every
// character written as a long reference.
const maxBroadcastBytes = 160

// beforeBroadcast moves a cut y back to the "@" of a broadcast word that out[pos:y] ends with,
// as Slack could show it.
func beforeBroadcast(out []byte, pos, y int) int {
	s := string(out[max(pos, y-maxBroadcastBytes):y])
	for i := len(s) - 1; i >= 0; i-- {
		if c, n := charAt(s, i); c == '@' && startsBroadcast(s, i+n) {
			return y - len(s) + i
		}
	}
	return y
}

func isRegionalIndicator(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }

// joinsPrevious reports runes that belong to the character before them.
func joinsPrevious(r rune) bool {
	return r == '\u200d' || (r >= 0xFE00 && r <= 0xFE0F) || (r >= 0x1F3FB && r <= 0x1F3FF) ||
		(r >= 0xE0020 && r <= 0xE007F) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r)
}

// codeAt returns the code block whose content contains offset x, with the fences that close
// it at the end of a part and open it again in the next. They must leave room for the code
// in a part: a reopening fence longer than a quarter of a part leaves out its language, and
// a block whose closing fence (with its line prefix: a deep quote, or a fence lengthened
// past the backtick runs in the code) is longer than that is cut like text instead, neither
// closed nor opened again.
func (p *Pager) codeAt(r *rendered, x int) (codeRange, bool) {
	i := sort.Search(len(r.codes), func(i int) bool { return r.codes[i].end >= x })
	if i == len(r.codes) || x < r.codes[i].start || x > r.codes[i].end {
		return codeRange{}, false
	}
	cr := r.codes[i]
	if len16(cr.close) > p.limit/4 {
		return codeRange{}, false
	}
	if len16(cr.reopen) > p.limit/4 {
		cr.reopen = cr.close
	}
	return cr, true
}

// linePrefix is the continuation prefix of the rendered line containing x.
func linePrefix(r *rendered, x int) string {
	i := sort.Search(len(r.lines), func(i int) bool { return r.lines[i].start > x }) - 1
	if i < 0 {
		return ""
	}
	return r.lines[i].prefix
}

// seal ends a part at c.
func (p *Pager) seal(r *rendered, c choice) {
	body := string(r.out[p.pos:c.at])
	if p.carry == "" {
		body = strings.TrimLeft(body, "\n")
	}
	carry := ""
	if cr, ok := p.codeAt(r, c.next); ok {
		body = strings.TrimRight(body, "\n") + "\n" + cr.close
		carry = cr.reopen + "\n"
	} else {
		body = strings.TrimRight(body, " \n")
	}
	if prefix := linePrefix(r, c.at); c.midLine && len16(prefix) <= p.limit/4 {
		carry += prefix // (absurdly deep nesting loses its prefix rather than the text)
	}
	if strings.TrimSpace(string(r.out[p.pos:c.at])) != "" {
		p.sealed = append(p.sealed, p.carry+body)
		p.carry = carry
	}
	p.pos = c.next
	if c.midLine {
		// Spaces after a word or sentence break are dropped; the next part starts with text.
		for p.pos < len(r.out) && r.out[p.pos] == ' ' {
			p.pos++
		}
	}
}

// preview is the unsealed text cut to the limit, ending in "…" (not sealed: it may change).
func (p *Pager) preview(r *rendered) string {
	save := *p
	p.limit -= 2
	c, ok := p.choose(r, len(r.out))
	cr, inCode := p.codeAt(r, c.next) // as choose saw it
	*p = save
	if !ok {
		return ""
	}
	body := string(r.out[p.pos:c.at])
	if p.carry == "" {
		body = strings.TrimLeft(body, "\n")
	}
	body = p.carry + strings.TrimRight(body, " \n")
	if inCode {
		return body + "\n" + cr.close + "\n…"
	}
	return body + " …"
}

// advance moves the start of the source to the last top-level block that is fully
// unsealed-or-later, so the next Update parses only what is left. The block's offset is in
// the cleaned text: it is mapped back to the answer past the word joiners neutralise put in
// (joins) and the control bytes stripControls took out (cuts).
func (p *Pager) advance(r *rendered, joins, cuts []int) {
	for i := len(r.tops) - 1; i > 0; i-- {
		t := r.tops[i]
		if t.out > p.pos || !t.srcOK || t.out > r.stable {
			continue
		}
		off := t.src
		for _, j := range joins {
			if j < t.src {
				off -= len(wordJoiner)
			}
		}
		at := off
		for _, c := range cuts { // ascending
			if c > at {
				break
			}
			off++
		}
		p.src += off
		p.pos -= t.out
		return
	}
}

// len16 is the length of s in UTF-16 code units, counted from UTF-8 lead bytes: runes
// outside the Basic Multilingual Plane (4-byte sequences, most emoji) count 2. (Stray
// continuation bytes of invalid UTF-8 count 0; the limits leave a margin.)
func len16[T string | []byte](s T) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x80, c >= 0xC0 && c < 0xF0:
			n++
		case c >= 0xF0:
			n += 2
		}
	}
	return n
}

// closeDangling closes, for a preview, the inline spans the growing last line leaves open
// ("**bold so f" shows as bold, not as literal asterisks): it appends the markers for an odd
// number of "**", "~~" or "`" on the last line, unless that line is inside a code block. A
// marker that ends the line, with nothing in its span yet ("Details for **"), is left out
// instead (closing it would show "****", or "~~~~", a code fence), and so is an unfinished
// link ("[the docs](https://go.d"), which would show as literal text. Only the
// still-growing last block changes, which is never sealed.
func closeDangling(src string) string {
	lineAt := strings.LastIndexByte(src, '\n') + 1
	lastLine := src[lineAt:]
	if k := strings.LastIndex(lastLine, "]("); k >= 0 && !strings.Contains(lastLine[k:], ")") {
		if j := strings.LastIndexByte(lastLine[:k], '['); j >= 0 {
			lastLine = lastLine[:j]
			src = src[:lineAt+j]
		}
	}
	if !strings.ContainsAny(lastLine, "*~`") || strings.TrimSpace(lastLine) == "" {
		return src
	}
	fences := 0
	for line := range strings.Lines(src) {
		if opensFence(containerless(line)) != "" {
			fences++
		}
	}
	if fences%2 == 1 {
		return src
	}
	var markers []string
	if strings.Count(lastLine, "`")%2 == 1 {
		markers = append(markers, "`")
	} else {
		if strings.Count(lastLine, "~~")%2 == 1 {
			markers = append(markers, "~~")
		}
		if strings.Count(lastLine, "**")%2 == 1 {
			markers = append(markers, "**")
		}
	}
	suffix := ""
	for _, m := range markers {
		if strings.HasSuffix(lastLine, m) {
			lastLine = lastLine[:len(lastLine)-len(m)]
			src = src[:len(src)-len(m)]
			continue
		}
		suffix += m
	}
	if suffix == "" || strings.HasSuffix(lastLine, " ") {
		return src
	}
	if t := strings.TrimLeft(lastLine+suffix, " >"); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
		return src // the closed line would open a code block
	}
	return src + suffix
}

// SplitLines cuts text into pieces of at most limit bytes, at line ends when it can (else at a
// character boundary). Unlike Split it knows no markup: it is for text already rendered.
func SplitLines(text string, limit int) []string {
	var out []string
	for len(text) > limit {
		cut := strings.LastIndexByte(text[:limit], '\n') + 1
		if cut <= 0 {
			cut = limit
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
		}
		out = append(out, text[:cut])
		text = text[cut:]
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}
