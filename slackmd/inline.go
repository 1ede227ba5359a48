package slackmd

import (
	"cmp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// inlineWriter writes the inline content of a block (text, emphasis, code spans, links) to an
// output: escaped for the format, styled with its markers where Slack shows them, and cut only
// where a cut cannot split a span.
type inlineWriter struct {
	f       Format
	src     []byte
	o       *output
	protect int // > 0 inside inline spans: no word or sentence cuts
	bold    int // mrkdwn: inside bold (headings, **): inner bold markers are dropped
	italic  int
	strike  int
	open    []string // mrkdwn: the style markers open on the current line, outermost first
}

// inlines renders the inline children of n.
func (w *inlineWriter) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.inline(c)
	}
}

func (w *inlineWriter) inline(n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		w.text(string(n.Value(w.src)), !n.IsRaw())
		if n.HardLineBreak() || n.SoftLineBreak() {
			w.lineBreak(n.HardLineBreak())
		}
	case *ast.String:
		w.text(string(n.Value), !n.IsRaw())
	case *ast.CodeSpan:
		w.codeSpan(n)
	case *ast.Emphasis:
		w.emphasis(n)
	case *east.Strikethrough:
		w.strikethrough(n)
	case *ast.Link:
		w.link(string(n.Destination), string(n.Title), n, false)
	case *ast.Image:
		w.link(string(n.Destination), string(n.Title), n, true)
	case *ast.AutoLink:
		w.autoLink(n)
	case *channelLink:
		w.channelLink(n)
	case *ast.RawHTML:
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			w.text(string(seg.Value(w.src)), false)
		}
	case *east.TaskCheckBox:
		w.o.write(checkBox(w.f, n.IsChecked))
	default:
		w.inlines(n)
	}
}

// heading writes a heading: in mrkdwn, which has none, a bold line.
func (w *inlineWriter) heading(n *ast.Heading) {
	w.protect++
	defer func() { w.protect-- }()
	if w.f == FormatMarkdown {
		w.o.write(strings.Repeat("#", n.Level) + " ")
		w.inlines(n)
		return
	}
	w.bold++
	w.o.write("*")
	w.open = append(w.open, "*")
	w.inlines(n)
	w.open = w.open[:len(w.open)-1]
	w.o.write("*")
	w.bold--
}

// lineBreak ends a line inside a paragraph (hard: a break the model wrote as one).
func (w *inlineWriter) lineBreak(hard bool) {
	if hard && w.f == FormatMarkdown {
		w.o.write("  ") // stays a hard break in Markdown
	}
	// mrkdwn styles end at a line break: close them before it, reopen them after.
	for i := len(w.open) - 1; i >= 0; i-- {
		w.o.write(w.open[i])
	}
	at := len(w.o.r.out)
	w.o.nl()
	if w.protect == 0 {
		w.o.cut(at, len(w.o.r.out), breakLine)
	}
	for _, m := range w.open {
		w.o.write(m)
	}
}

func (w *inlineWriter) strikethrough(n *east.Strikethrough) {
	w.protect++
	defer func() { w.protect-- }()
	if w.f == FormatMarkdown {
		w.o.write("~~")
		w.inlines(n)
		w.o.write("~~")
		return
	}
	w.wrap(&w.strike, "~", n)
}

// channelLink writes a channel link as the model wrote it: in mrkdwn a link that must not be cut,
// in Markdown text.
func (w *inlineWriter) channelLink(n *channelLink) {
	if w.f != FormatMrkdwn {
		w.text(string(n.raw), false)
		return
	}
	start := len(w.o.r.out)
	w.o.write(string(n.raw))
	w.o.r.atoms = append(w.o.r.atoms, span{start, len(w.o.r.out)})
}

// checkBoxes are the boxes of a task list's items by format.
var checkBoxes = [...]struct{ unchecked, checked string }{
	FormatMrkdwn:   {unchecked: "☐ ", checked: "☑ "},
	FormatMarkdown: {unchecked: "[ ] ", checked: "[x] "},
}

func checkBox(f Format, checked bool) string {
	if checked {
		return checkBoxes[f].checked
	}
	return checkBoxes[f].unchecked
}

func (w *inlineWriter) emphasis(n *ast.Emphasis) {
	w.protect++
	defer func() { w.protect-- }()
	if w.f == FormatMarkdown {
		m := strings.Repeat("*", n.Level)
		w.o.write(m)
		w.inlines(n)
		w.o.write(m)
		return
	}
	switch n.Level {
	case 1:
		w.wrap(&w.italic, "_", n)
	default:
		w.wrap(&w.bold, "*", n)
	}
}

// wrap writes n's inlines between mrkdwn markers, unless already inside that style.
//
// Slack formats a span only at word boundaries: markers between letters or digits are
// shown as they are ("2*3*4" would read "2_3_4"). So a span next to an ASCII letter or
// digit is written as the model wrote it, without formatting (math, "foo*bar*", LaTeX); next
// to another letter (CJK, which has no spaces) the markers get a word joiner on the outside,
// which Slack takes for a boundary, so the span is still formatted.
func (w *inlineWriter) wrap(depth *int, marker string, n ast.Node) {
	if *depth > 0 {
		w.inlines(n)
		return
	}
	left, right := w.o.leftRune(), rightRune(n, w.src)
	if d := sourceDelimiter(n, w.src); (asciiAlnum(left) || asciiAlnum(right)) && !w.closesOpen(d) {
		w.o.write(d)
		w.inlines(n)
		w.o.write(d)
		return
	}
	*depth++
	if isWordRune(left) {
		w.o.write(wordJoiner)
	}
	w.o.write(marker)
	w.open = append(w.open, marker)
	w.inlines(n)
	w.open = w.open[:len(w.open)-1]
	w.o.write(marker)
	if isWordRune(right) {
		w.o.write(wordJoiner)
	}
	*depth--
}

// closesOpen reports whether the source delimiter d holds the character of a span open around it
// ("**Use foo*bar* here**": the "*" after "bar" would close the bold): such a span is formatted
// as before instead (its markers then show between the letters, but the outer span holds).
func (w *inlineWriter) closesOpen(d string) bool {
	for _, m := range w.open {
		if strings.Contains(d, m) {
			return true
		}
	}
	return false
}

// rightRune is the source character after inline n (0 when none is known: n ends its
// paragraph, or what follows is not text, so it starts with markup).
func rightRune(n ast.Node, src []byte) rune {
	for ; n != nil && n.Type() == ast.TypeInline; n = n.Parent() {
		if t, isText := n.(*ast.Text); isText && (t.SoftLineBreak() || t.HardLineBreak()) {
			return 0
		}
		next := n.NextSibling()
		if next == nil {
			continue
		}
		if t, isText := next.(*ast.Text); isText && t.Segment.Start < t.Segment.Stop {
			r, _ := utf8.DecodeRune(src[t.Segment.Start:])
			return r
		}
		return 0
	}
	return 0
}

// sourceDelimiter is the delimiter the model wrote around emphasis or strikethrough n that
// sits between letters: always "*" for emphasis ("_" does not work inside words), the run of
// "~" before n's text for strikethrough.
func sourceDelimiter(n ast.Node, src []byte) string {
	if e, isEmph := n.(*ast.Emphasis); isEmph {
		return strings.Repeat("*", e.Level)
	}
	c := n.FirstChild()
	for c != nil && c.FirstChild() != nil {
		c = c.FirstChild()
	}
	d := "~~"
	if t, isText := c.(*ast.Text); isText {
		i := t.Segment.Start
		for i > 0 && src[i-1] == '~' {
			i--
		}
		if t.Segment.Start-i > 0 {
			d = strings.Repeat("~", t.Segment.Start-i)
		}
	}
	return d
}

// isWordRune reports a letter or digit other than space or punctuation.
func isWordRune(r rune) bool { return r > 0 && (unicode.IsLetter(r) || unicode.IsDigit(r)) }

func (w *inlineWriter) codeSpan(n *ast.CodeSpan) {
	var sb strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		switch c := c.(type) {
		case *ast.Text:
			sb.Write(c.Value(w.src))
		case *ast.String:
			sb.Write(c.Value)
		}
	}
	s := strings.ReplaceAll(sb.String(), "\n", " ") // code spans never span lines
	w.protect++
	defer func() { w.protect-- }()
	if w.f == FormatMrkdwn {
		if strings.Contains(s, "`") {
			// mrkdwn code cannot hold a backtick (it ends the span, and ``` opens a block):
			// show the code as literal text instead.
			w.text(s, false)
			return
		}
		w.o.write("`")
		w.o.codeText(s)
		w.o.write("`")
		return
	}
	ticks := "`"
	for strings.Contains(s, ticks) {
		ticks += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	w.o.write(ticks + pad + s + pad + ticks)
}

// safeURL reports link targets that may become a Slack link: absolute http(s), mailto, ftp.
func safeURL(u string) bool {
	l := strings.ToLower(u)
	for _, p := range []string{"http://", "https://", "mailto:", "ftp://"} {
		if strings.HasPrefix(l, p) && len(l) > len(p) {
			return !strings.ContainsAny(u, " \n")
		}
	}
	return false
}

// slackURL escapes a URL for the inside of <url|text>.
func slackURL(u string) string { return urlEscaper.Replace(u) }

var (
	urlEscaper   = strings.NewReplacer("&", "&amp;", "<", "%3C", ">", "%3E", "|", "%7C")
	mdURLEscaper = strings.NewReplacer(" ", "%20", "<", "%3C", ">", "%3E")
)

// link writes a link or an image (shown as a link to it). n's inlines are its label.
func (w *inlineWriter) link(dest, title string, n ast.Node, image bool) {
	start := len(w.o.r.out)
	label := plainText(n, w.src)
	switch {
	case !safeURL(dest):
		// Not a link Slack can open (relative, javascript:, a Slack token): show it as text.
		w.linkAsText(dest, oneLine(label), n, image)
		return
	case w.f == FormatMarkdown:
		w.markdownLink(dest, title, label, n, image)
	default:
		w.mrkdwnLink(dest, oneLine(label))
	}
	w.o.r.atoms = append(w.o.r.atoms, span{start, len(w.o.r.out)})
}

// oneLine is a link label as one line of text.
func oneLine(label string) string {
	return strings.TrimSpace(strings.ReplaceAll(label, "\n", " "))
}

// linkAsText writes a link Slack cannot open as its label followed by its target in brackets.
// An image's label is written as plain text.
func (w *inlineWriter) linkAsText(dest, label string, n ast.Node, image bool) {
	switch {
	case label == "":
	case image:
		w.text(label, false)
	default:
		w.inlines(n)
	}
	if dest == "" || dest == label {
		return
	}
	if label != "" {
		w.o.write(" ")
	}
	w.text("("+dest+")", false)
}

// markdownLink writes [label](dest "title"); an image without a label is labelled "image".
func (w *inlineWriter) markdownLink(dest, title, label string, n ast.Node, image bool) {
	w.protect++
	defer func() { w.protect-- }()
	if image {
		w.o.write("[" + cmp.Or(label, "image") + "](")
	} else {
		w.o.write("[")
		w.inlines(n)
		w.o.write("](")
	}
	dest = mdURLEscaper.Replace(dest)
	if strings.ContainsAny(dest, "()") {
		dest = "<" + dest + ">"
	}
	w.o.write(dest)
	if title != "" {
		w.o.write(` "` + strings.ReplaceAll(title, `"`, `\"`) + `"`)
	}
	w.o.write(")")
}

// mrkdwnLink writes <dest|label>, or <dest> when the label only repeats it. mrkdwn has no
// formatting in labels, and a "|" would end the label early: it becomes "│".
func (w *inlineWriter) mrkdwnLink(dest, label string) {
	if label == "" || label == dest || "mailto:"+label == dest {
		w.o.write("<" + slackURL(dest) + ">")
		return
	}
	w.o.write("<" + slackURL(dest) + "|" + strings.ReplaceAll(EscapeMrkdwn(label), "|", "│") + ">")
}

func (w *inlineWriter) autoLink(n *ast.AutoLink) {
	url := string(n.URL(w.src))
	label := string(n.Label(w.src))
	start := len(w.o.r.out)
	if n.AutoLinkType == ast.AutoLinkEmail && !strings.HasPrefix(strings.ToLower(url), "mailto:") {
		url = "mailto:" + url
	}
	switch {
	case w.f == FormatMarkdown || !safeURL(url):
		w.text(label, false) // bare: Slack links URLs by itself
	case label == url || "mailto:"+label == url:
		w.o.write("<" + slackURL(url) + ">")
	default:
		w.o.write("<" + slackURL(url) + "|" + EscapeMrkdwn(label) + ">")
	}
	w.o.r.atoms = append(w.o.r.atoms, span{start, len(w.o.r.out)})
}

// text writes inline text: Markdown escapes and entities resolved (md), escaped for mrkdwn,
// with word and sentence cut points outside inline spans.
func (w *inlineWriter) text(s string, md bool) {
	if w.f == FormatMrkdwn {
		if md {
			s = unescapeMarkdown(s)
		}
		s = breakFences(EscapeMrkdwn(s))
	}
	if w.protect > 0 || !strings.ContainsAny(s, " \u3000。！？") {
		w.o.writeLines(s)
		return
	}
	for s != "" {
		i := strings.IndexAny(s, " \u3000。！？\n")
		if i < 0 {
			w.o.write(s)
			return
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\n':
			w.o.write(s[:i])
			w.o.nl()
			s = s[i+1:]
		case ' ', '\u3000':
			w.o.write(s[:i])
			at := len(w.o.r.out)
			j := i
			for j < len(s) {
				if s[j] == ' ' {
					j++
				} else if strings.HasPrefix(s[j:], "\u3000") {
					j += len("\u3000")
				} else {
					break
				}
			}
			w.o.write(s[i:j])
			kind := breakWord
			if i > 0 && strings.IndexByte(".!?:;", s[i-1]) >= 0 {
				kind = breakSentence
			}
			w.o.cut(at, len(w.o.r.out), kind)
			s = s[j:]
		default: // CJK sentence end: cut after it
			w.o.write(s[:i+size])
			w.o.cut(len(w.o.r.out), len(w.o.r.out), breakSentence)
			s = s[i+size:]
		}
	}
}
