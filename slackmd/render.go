package slackmd

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Format is the Slack text dialect an answer is rendered to.
//
// Destination choice, and why:
//   - Post-and-edit replies (chat.postMessage, then chat.update) use `text` in mrkdwn
//     (FormatMrkdwn): `text` is mrkdwn by default and works in every workspace, without
//     the AI-app setting native streaming needs; chat.update takes 4,000 characters, so
//     parts of MrkdwnLimit.
//   - Native streaming replies (chat.startStream/appendStream/stopStream) take
//     `markdown_text`, standard Markdown (FormatMarkdown, via MarkdownStream): 12,000
//     characters per call, so parts of MarkdownLimit; it has no tables, so tables become
//     aligned code blocks.
//   - Fallback: when Slack refuses or fails native streaming, the reply falls back to
//     post-and-edit, and an answer whose stream cannot be finished is re-posted whole in
//     mrkdwn (Split). That is why both formats exist.
type Format int

const (
	// FormatMrkdwn is Slack mrkdwn, for the `text` of chat.postMessage / chat.update:
	// *bold*, _italic_, ~strike~, <url|text>, `code`, ``` blocks, > quotes. Headings become
	// bold lines, lists use "•"/"◦"/"▪" bullets (numbers kept) indented by 4 spaces per
	// level, tables become aligned code blocks, images become links, HTML is shown as text.
	FormatMrkdwn Format = iota
	// FormatMarkdown is Slack's standard-Markdown dialect, for `markdown_text` (native
	// streaming) and the `markdown` block. The model's Markdown is kept (re-emitted from the
	// parsed tree, text verbatim) except that tables become aligned code blocks.
	FormatMarkdown
)

// Per-message part limits, with margin below Slack's hard limits (chat.update text 4,000;
// markdown_text 12,000) that leaves room for a status note (convo.NoteSuffix) on the last
// part. Lengths are counted in UTF-16 code units (an emoji counts 2), which is never less
// than Slack's character count.
const (
	MrkdwnLimit   = 3500
	MarkdownLimit = 11000
)

// mdParser is immutable after construction and safe for concurrent use.
var mdParser = goldmark.New(
	goldmark.WithExtensions(extension.Strikethrough, extension.Table, extension.Linkify, extension.TaskList),
	goldmark.WithParserOptions(parser.WithInlineParsers(util.Prioritized(channelLinkParser{}, 250))),
).Parser()

// Render converts the model's Markdown answer to format f.
//
// Control characters (C0 except tab and newline, DEL, C1; see stripControls) are removed
// before anything else, also where a character reference such as &#2; resolves to one.
//
// Mention safety: model text can never ping anyone. Before parsing, a word joiner (U+2060,
// invisible) is put after every "<" that starts "<!" or "<@" and after the "@" of a bare
// @here, @channel or @everyone, reading the text as Slack could show it: any of those
// characters may be written as a character reference (&lt; &#60; &#0060; &#x3C; &#64;
// &commat; &excl;, with or without the ";") or a backslash escape, and the joiner then goes
// after the reference. So <!channel>, <!here>, <!everyone>, <!subteam^…> and <@U…> read
// exactly as written but are no longer Slack tokens, and no bare word can be turned into a
// mention (even with link_names). The rendered text is neutralised again where dropped markup
// joined the pieces of one (a bare broadcast word in mrkdwn; any mention in Markdown), and a
// part is never cut right after a broadcast word (see Pager). In mrkdwn, &, < and > are also escaped as
// &amp; &lt; &gt; everywhere except inside the <url|text> links Render writes itself (whose
// URLs must be absolute http(s), mailto or ftp; other link targets are shown as text) and
// the channel links the model wrote (<#C…|name>, which ping no one).
// FormatMarkdown keeps & < > as the model wrote them (standard Markdown; not verified
// against every Slack client) and turns links to other targets into text too.
func Render(md string, f Format) string {
	return string(render([]byte(clean(md)), f, true).out)
}

// breakKind orders the places an answer may be cut, best last.
type breakKind int8

const (
	breakWord breakKind = iota + 1
	breakSentence
	breakLine
	breakBlock
)

// cutPoint is a place where a part may end (at) and the next begin (next).
type cutPoint struct {
	at, next int
	kind     breakKind
}

// maxLanguage is the longest code block language kept, in bytes.
const maxLanguage = 30

// codeRange is the content of a code block in the rendered text: a part that ends inside
// it is closed with close, and the next part starts with reopen.
type codeRange struct {
	start, end    int
	fenceEnd      int // end of the closing fence line
	close, reopen string
}

// lineInfo is where a rendered line starts and the prefix a continuation of it needs
// (quote markers, list indentation) when a part is cut in its middle.
type lineInfo struct {
	start  int
	prefix string
}

// span is a range of rendered text that a hard cut must not split (a link).
type span struct{ start, end int }

// topBlock is a top-level block: where its source line starts and where its rendering starts.
type topBlock struct {
	src, out int
	srcOK    bool
}

// rendered is the output of one rendering, with what a Pager needs to cut it.
type rendered struct {
	out    []byte
	cuts   []cutPoint
	codes  []codeRange
	lines  []lineInfo
	atoms  []span
	tops   []topBlock
	stable int // out[:stable] can no longer change as more source is appended
}

// writer writes a document's blocks (paragraphs, headings, code, quotes, lists, tables) to an
// output, their inline content through an inlineWriter, and notes where the still-growing last
// block begins (stableEnd).
type writer struct {
	f       Format
	src     []byte
	o       *output
	in      *inlineWriter
	chain   map[ast.Node]bool // the last child at each depth: the part still growing
	starts  map[ast.Node]int
	ends    map[ast.Node]int
	codeEnd int // end of the complete lines of the last fenced code block in the chain
	depth   int // block nesting, 0 at the document's children
}

// render renders src (already cleaned: see clean). final says src is the whole answer.
func render(src []byte, f Format, final bool) *rendered {
	doc := mdParser.Parse(text.NewReader(src))
	o := &output{f: f, lineBeg: true}
	w := &writer{f: f, src: src, o: o, in: &inlineWriter{f: f, src: src, o: o},
		chain: map[ast.Node]bool{}, starts: map[ast.Node]int{}, ends: map[ast.Node]int{}, codeEnd: -1}
	w.o.r.out = make([]byte, 0, len(src)+len(src)/8)
	w.o.r.cuts = make([]cutPoint, 0, len(src)/5)
	w.o.r.lines = make([]lineInfo, 0, len(src)/40)
	for n := doc.LastChild(); n != nil; n = n.LastChild() {
		if n.Type() != ast.TypeBlock {
			break
		}
		w.chain[n] = true
	}
	w.blocks(doc, true)
	w.o.r.stable = len(w.o.r.out)
	if !final {
		w.o.r.stable = w.stableEnd(doc, endsWithBlankLine(src))
	}
	w.o.r.neutraliseOut(f)
	return &w.o.r
}

// neutraliseOut neutralises the mentions the rendering joined: the source was neutralised, but
// markup the output drops can bring their pieces together (in mrkdwn a code span holding a
// backtick is written as plain text: "@`channel ``` `"; a link to a target Slack cannot link
// is written as its text: "<[!here>](x)"). In mrkdwn only bare broadcast words: it escapes
// every "<" of the text, and "&lt;" makes no token. It rarely inserts anything; the offsets
// into out move past what it inserts.
func (r *rendered) neutraliseOut(f Format) {
	out, at := insertJoiners(string(r.out), f == FormatMarkdown)
	if at == nil {
		return
	}
	old := make([]int, len(at)) // where each joiner went in the old out
	for k, a := range at {
		old[k] = a - k*len(wordJoiner)
	}
	shift := func(x *int) {
		n, _ := slices.BinarySearch(old, *x) // the joiners before x
		*x += n * len(wordJoiner)
	}
	for i := range r.cuts {
		shift(&r.cuts[i].at)
		shift(&r.cuts[i].next)
	}
	for i := range r.codes {
		shift(&r.codes[i].start)
		shift(&r.codes[i].end)
		shift(&r.codes[i].fenceEnd)
	}
	for i := range r.lines {
		shift(&r.lines[i].start)
	}
	for i := range r.atoms {
		shift(&r.atoms[i].start)
		shift(&r.atoms[i].end)
	}
	for i := range r.tops {
		shift(&r.tops[i].out)
	}
	shift(&r.stable)
	r.out = append(r.out[:0], out...)
}

// endsWithBlankLine reports whether the last complete line of src is blank.
func endsWithBlankLine(src []byte) bool {
	t := bytes.TrimRight(src, " \t")
	if !bytes.HasSuffix(t, []byte("\n")) {
		return false
	}
	t = bytes.TrimRight(t[:len(t)-1], " \t")
	return len(t) == 0 || t[len(t)-1] == '\n'
}

// stableEnd is where the rendering of the still-growing last block begins: everything
// before it is closed Markdown and renders the same whatever is appended.
//
// src holds complete lines only. The last block is closed, and stable to its end, when it
// is a heading or a thematic break (one line), or a paragraph or table followed by a blank
// line; the end of a closed last block is then also a place to cut.
func (w *writer) stableEnd(doc ast.Node, blankEnd bool) int {
	stable := len(w.o.r.out)
	for n := doc.LastChild(); n != nil; n = n.LastChild() {
		start, ok := w.starts[n]
		if !ok {
			break
		}
		stable = start
		closed := false
		switch n.Kind() {
		case ast.KindBlockquote, ast.KindList, ast.KindListItem:
			continue
		case ast.KindFencedCodeBlock:
			if w.codeEnd > start {
				stable = w.codeEnd
			}
		case ast.KindHeading, ast.KindThematicBreak:
			closed = true
		case ast.KindParagraph, ast.KindTextBlock, east.KindTable:
			closed = blankEnd
		}
		if end, ok := w.ends[n]; closed && ok {
			stable = end
			w.o.cut(end, end, breakBlock)
		}
		break
	}
	return stable
}

// rendersNothing reports blocks that produce no output.
func rendersNothing(n ast.Node) bool {
	return n.Kind() == ast.KindLinkReferenceDefinition
}

// blocks renders the block children of parent, separated by a blank line (blank) or a
// line break.
func (w *writer) blocks(parent ast.Node, blank bool) {
	first := true
	var prev ast.Node
	for c := parent.FirstChild(); c != nil; c = c.NextSibling() {
		if rendersNothing(c) {
			continue
		}
		if !first {
			at := len(w.o.r.out)
			w.o.nl()
			sep := blank || (w.f == FormatMarkdown && isPara(prev) && isPara(c))
			kind := breakLine
			if sep {
				w.o.emptyLine()
				kind = breakBlock
			}
			w.o.cut(at, len(w.o.r.out), kind)
		}
		first = false
		start := len(w.o.r.out)
		if w.depth == 0 {
			pos, ok := firstPos(c, w.src)
			w.o.r.tops = append(w.o.r.tops, topBlock{src: pos, out: start, srcOK: ok})
		}
		if w.chain[c] {
			w.starts[c] = start
		}
		w.depth++
		w.block(c)
		w.depth--
		if w.chain[c] {
			w.ends[c] = len(w.o.r.out)
		}
		prev = c
	}
}

func isPara(n ast.Node) bool {
	return n != nil && (n.Kind() == ast.KindParagraph || n.Kind() == ast.KindTextBlock)
}

func (w *writer) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		w.in.inlines(n)
	case *ast.Heading:
		w.in.heading(n)
	case *ast.ThematicBreak:
		w.o.write(thematicBreaks[w.f])
	case *ast.FencedCodeBlock:
		w.code(n, n.Lines(), w.codeLanguage(n), w.chain[n])
	case *ast.CodeBlock:
		w.code(n, n.Lines(), "", false)
	case *ast.Blockquote:
		w.o.push(level{first: "> ", cont: "> "})
		w.blocks(n, w.f == FormatMarkdown)
		w.o.pop()
	case *ast.List:
		w.list(n)
	case *ast.HTMLBlock:
		w.htmlBlock(n)
	case *east.Table:
		w.table(n)
	default:
		if n.HasChildren() && n.FirstChild().Type() == ast.TypeBlock {
			w.blocks(n, true)
		} else {
			w.in.inlines(n)
		}
	}
}

// thematicBreaks are the lines a thematic break becomes, by format.
var thematicBreaks = [...]string{
	FormatMrkdwn:   "──────────",
	FormatMarkdown: "---",
}

// codeLanguage is the language a fenced code block keeps: none in mrkdwn, which cannot show it.
func (w *writer) codeLanguage(n *ast.FencedCodeBlock) string {
	if w.f != FormatMarkdown {
		return ""
	}
	lang := string(n.Language(w.src))
	// A language is a short name. A longer info string could fill a part by itself, and a
	// backtick in it (a "~~~" fence's) would keep the "```" fence from opening.
	if len(lang) > maxLanguage || strings.Contains(lang, "`") {
		return ""
	}
	return lang
}

// htmlBlock writes an HTML block as text, line by line, with its closing line.
func (w *writer) htmlBlock(n *ast.HTMLBlock) {
	lines := n.Lines()
	for i := range lines.Len() {
		if i > 0 {
			at := len(w.o.r.out)
			w.o.nl()
			w.o.cut(at, len(w.o.r.out), breakLine)
		}
		seg := lines.At(i)
		w.in.text(strings.TrimRight(string(seg.Value(w.src)), "\r\n"), false)
	}
	if n.HasClosure() {
		if lines.Len() > 0 {
			w.o.nl()
		}
		w.in.text(strings.TrimRight(string(n.ClosureLine.Value(w.src)), "\r\n"), false)
	}
}

func (w *writer) list(n *ast.List) {
	nested := 0
	for _, l := range w.o.levels {
		if l.cont != "> " {
			nested++
		}
	}
	i := 0
	for item := n.FirstChild(); item != nil; item = item.NextSibling() {
		var marker, cont string
		switch {
		case n.IsOrdered() && w.f == FormatMrkdwn:
			marker = strconv.Itoa(n.Start+i) + ". "
		case n.IsOrdered():
			marker = strconv.Itoa(n.Start+i) + string(n.Marker) + " "
		case w.f == FormatMrkdwn:
			marker = []string{"• ", "◦ ", "▪ "}[min(nested, 2)]
		default:
			marker = string(n.Marker) + " "
		}
		if w.f == FormatMrkdwn {
			cont = "    "
		} else {
			cont = strings.Repeat(" ", utf8.RuneCountInString(marker))
		}
		if i > 0 {
			at := len(w.o.r.out)
			w.o.nl()
			w.o.cut(at, len(w.o.r.out), breakLine)
		}
		if w.chain[item] {
			w.starts[item] = len(w.o.r.out)
		}
		w.o.push(level{first: marker, cont: cont, pending: true})
		if item.HasChildren() {
			w.blocks(item, false)
		} else {
			w.o.write("")
		}
		w.o.pop()
		i++
	}
}

// code writes a code block: fence, content lines (cuttable between lines), fence.
func (w *writer) code(n ast.Node, lines *text.Segments, lang string, inChain bool) {
	fence := "```"
	var content []string
	for i := range lines.Len() {
		seg := lines.At(i)
		content = append(content, strings.TrimRight(string(seg.Value(w.src)), "\n"))
	}
	if w.f == FormatMarkdown {
		for _, l := range content {
			for strings.Contains(strings.TrimSpace(l), fence) {
				fence += "`"
			}
		}
	}
	w.o.write(fence + lang)
	prefix := w.o.curPrefix()
	start := len(w.o.r.out) + 1
	for i, l := range content {
		at := len(w.o.r.out)
		w.o.nl()
		if i > 0 {
			w.o.cut(at, len(w.o.r.out), breakLine)
		}
		w.o.codeText(strings.TrimRight(l, "\r"))
		if inChain && i < lines.Len() {
			seg := lines.At(i)
			if seg.Stop > 0 && seg.Stop <= len(w.src) && w.src[seg.Stop-1] == '\n' {
				w.codeEnd = len(w.o.r.out)
			}
		}
	}
	end := len(w.o.r.out)
	w.o.nl()
	w.o.write(fence)
	w.o.r.codes = append(w.o.r.codes, codeRange{start: start, end: end, fenceEnd: len(w.o.r.out), close: prefix + fence, reopen: prefix + fence + lang})
}

// breakFences puts a word joiner into every run of three or more backticks (after each
// second one), so that only the fences Render writes are ``` runs: mrkdwn has no longer
// fences, and a ``` in the text or in a code block's content would pair with them.
func breakFences(s string) string {
	if !strings.Contains(s, "```") {
		return s
	}
	var sb strings.Builder
	run := 0
	for i := range len(s) {
		if s[i] != '`' {
			run = 0
		} else if run++; run == 3 {
			sb.WriteString(wordJoiner)
			run = 1
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

// unescapeMarkdown resolves Markdown escapes and character references. The source was
// cleaned of controls, but a reference such as &#2; or &#x85; resolves to one: it is removed.
func unescapeMarkdown(s string) string {
	if !strings.ContainsAny(s, "\\&") {
		return s
	}
	b := []byte(s)
	b = util.ResolveNumericReferences(b)
	b = util.ResolveEntityNames(b)
	b = util.UnescapePunctuations(b)
	t, _ := stripControls(string(b))
	return t
}

// asciiAlnum reports whether r is an ASCII letter or digit.
func asciiAlnum(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
}

var mrkdwnEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// EscapeMrkdwn escapes &, < and > as &amp; &lt; &gt;, the three escapes of Slack mrkdwn: text
// written with it shows as written and makes no link, mention or token.
func EscapeMrkdwn(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	return mrkdwnEscaper.Replace(s)
}

// plainText is the text of n's inlines without formatting (for link labels, table cells).
func plainText(n ast.Node, src []byte) string {
	var sb strings.Builder
	writePlainChildren(&sb, n, src)
	return sb.String()
}

func writePlainChildren(sb *strings.Builder, n ast.Node, src []byte) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		writePlain(sb, c, src)
	}
}

// writePlain writes inline n without formatting: text as it reads, a link's target in brackets
// after its label unless the label is the target, a task box as "[x] " or "[ ] ".
func writePlain(sb *strings.Builder, n ast.Node, src []byte) {
	switch n := n.(type) {
	case *ast.Text:
		if n.IsRaw() {
			sb.Write(n.Value(src))
		} else {
			sb.WriteString(unescapeMarkdown(string(n.Value(src))))
		}
		if n.SoftLineBreak() || n.HardLineBreak() {
			sb.WriteByte(' ')
		}
	case *ast.String:
		sb.Write(n.Value)
	case *ast.AutoLink:
		sb.Write(n.Label(src))
	case *channelLink:
		sb.Write(n.raw)
	case *ast.RawHTML:
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			sb.Write(seg.Value(src))
		}
	case *east.TaskCheckBox:
		sb.WriteString(checkBox(FormatMarkdown, n.IsChecked))
	case *ast.Link:
		label := plainText(n, src)
		sb.WriteString(label)
		if d := string(n.Destination); d != "" && d != label {
			sb.WriteString(" (" + d + ")")
		}
	default:
		writePlainChildren(sb, n, src)
	}
}

// firstPos is the start of the source line where block n begins.
func firstPos(n ast.Node, src []byte) (int, bool) {
	var pos int
	var ok bool
	if k := n.Kind(); k == ast.KindList || k == ast.KindBlockquote {
		// A list or quote may have no text on its first line ("-" alone, "> -"), and the
		// line of its first text may start with a character that could be a marker
		// ("  **bold**", "  - nested"). Only the parser's position of the block is certainly
		// on the marker's line.
		pos = n.Pos()
		ok = pos >= 0 && pos <= len(src)
	} else {
		pos, ok = firstSourcePos(n, src)
	}
	if !ok {
		return 0, false
	}
	return lineStart(src, pos), true
}

// firstSourcePos is the source position of the first line or text in n, depth first.
func firstSourcePos(n ast.Node, src []byte) (int, bool) {
	switch n := n.(type) {
	case *ast.FencedCodeBlock:
		return fencePos(n, src)
	case *ast.Text:
		return n.Segment.Start, true
	}
	if n.Type() == ast.TypeBlock && n.Lines().Len() > 0 {
		return n.Lines().At(0).Start, true
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if pos, ok := firstSourcePos(c, src); ok {
			return pos, true
		}
	}
	return 0, false
}

// fencePos is the source position of a fenced code block's opening fence line: where its info
// string is, else the line before its first content line. A block with neither has none.
func fencePos(n *ast.FencedCodeBlock, src []byte) (int, bool) {
	if n.Info != nil {
		return n.Info.Segment.Start, true
	}
	if n.Lines().Len() == 0 {
		return 0, false
	}
	ls := lineStart(src, n.Lines().At(0).Start)
	if ls == 0 {
		return 0, true
	}
	return lineStart(src, ls-1), true
}

func lineStart(src []byte, pos int) int {
	return bytes.LastIndexByte(src[:pos], '\n') + 1
}
