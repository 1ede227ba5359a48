package slackmd

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MarkdownStream turns a streamed Markdown answer into text for chat.appendStream, which
// appends: nothing sent can be changed later. Feed returns what is safe to append now:
// complete lines, and the words of a line as it grows when the line cannot start a code
// fence or a table. Table rows are held back until the table ends and then sent as an
// aligned code block (markdown_text has no tables). A line is taken for a row only when
// its text, after any quote or list marker, has no space before its first "|" ("| a | b |",
// "a| b"): the first words of other lines may have been sent before their "|" arrived.
// Control characters are removed and everything is mention-neutralised as in Render. The
// output is standard Markdown (FormatMarkdown); the caller keeps each call within
// markdown_text's 12,000 characters. A MarkdownStream is not safe for concurrent use.
type MarkdownStream struct {
	pending string   // text not yet processed (the current, incomplete line)
	partial bool     // part of the current line was already sent
	held    []string // a possible table header, or a table's lines, held back
	table   bool     // held is a table (its delimiter row was seen)
	fence   string   // the open code fence ("```", "~~~~", ...); "" outside code
	midLine bool     // the text sent so far does not end with a newline
}

// NewMarkdownStream returns an empty stream.
func NewMarkdownStream() *MarkdownStream { return &MarkdownStream{} }

// Feed takes the next delta of the answer and returns what can be appended now (possibly "").
func (s *MarkdownStream) Feed(delta string) string {
	// Controls are removed as the text comes in, before any line is classified, so that
	// "\x02```" is a fence here as it is for Slack. The last byte already pending is looked at
	// again: a C1 control may arrive split between two deltas.
	from := max(len(s.pending)-1, 0)
	s.pending += delta
	if t, cut := stripControls(s.pending[from:]); cut != nil {
		s.pending = s.pending[:from] + t
	}
	// A last byte 0xC2 may start a C1 control whose second byte is still to come: the line is
	// looked at without it ("1. \xc2" could still become "1. ```").
	if strings.HasSuffix(s.pending, "\xc2") {
		s.pending = s.pending[:len(s.pending)-1]
		out := s.feed()
		s.pending += "\xc2"
		return out
	}
	return s.feed()
}

// feed returns what can be appended now of the pending text.
func (s *MarkdownStream) feed() string {
	var out strings.Builder
	for {
		i := strings.IndexByte(s.pending, '\n')
		if i < 0 {
			break
		}
		line := s.pending[:i+1]
		s.pending = s.pending[i+1:]
		if s.partial {
			s.partial = false
			out.WriteString(safe(line))
			continue
		}
		s.line(&out, line)
	}
	// The growing line: send its complete words when it cannot become a fence (opening or
	// closing) or a table row.
	if len(s.held) == 0 && !s.partial && (mayBeSpecial(s.pending) || s.fence != "" && mayCloseFence(s.pending, s.fence)) {
		return s.emit(out.String())
	}
	if len(s.held) == 0 {
		// Cutting at a space keeps every "<!", "<@" and "@here" with what follows it, so
		// each piece is neutralised exactly as the whole line would be. At the start of a
		// line only a space in its text counts, not one in its container prefix ("- ", "> "):
		// whether the line is a table row is known from its text up to the first "|"
		// (sentInPieces). The rest of a line already cut is text.
		sp := strings.LastIndexByte(s.pending, ' ')
		if sp >= 0 && (s.partial || sp >= len(s.pending)-len(containerless(s.pending))) {
			out.WriteString(safe(s.pending[:sp+1]))
			s.pending = s.pending[sp+1:]
			s.partial = true
		}
	}
	return s.emit(out.String())
}

// Flush returns the rest at the end of the answer: the last line, held table rows, and a
// closing fence when the answer stopped inside a code block.
func (s *MarkdownStream) Flush() string {
	var out strings.Builder
	if s.pending != "" {
		line := s.pending
		s.pending = ""
		if s.partial {
			out.WriteString(safe(line))
		} else {
			s.line(&out, line)
		}
	}
	s.partial = false
	s.flushHeld(&out)
	if s.fence != "" {
		if !s.lineStart(out.String()) {
			out.WriteString("\n")
		}
		out.WriteString(s.fence + "\n")
		s.fence = ""
	}
	return s.emit(out.String())
}

// emit records whether the text sent so far ends a line, and returns out.
func (s *MarkdownStream) emit(out string) string {
	if out != "" {
		s.midLine = !strings.HasSuffix(out, "\n")
	}
	return out
}

// lineStart reports whether the text sent so far, followed by out, ends a line.
func (s *MarkdownStream) lineStart(out string) bool {
	if out != "" {
		return strings.HasSuffix(out, "\n")
	}
	return !s.midLine
}

// line handles one complete line (with its "\n", except at Flush).
func (s *MarkdownStream) line(out *strings.Builder, line string) {
	body := strings.TrimRight(line, "\r\n")
	if s.fence != "" {
		out.WriteString(safe(line))
		if closesFence(strings.TrimLeft(body, " >"), s.fence) {
			s.fence = ""
		}
		return
	}
	switch {
	case s.table:
		if isTableRow(body) {
			s.held = append(s.held, line)
			return
		}
		s.flushHeld(out)
	case len(s.held) == 1:
		if isDelimiterRow(body) {
			s.held = append(s.held, line)
			s.table = true
			return
		}
		s.flushHeld(out)
	}
	if f := opensFence(containerless(body)); f != "" { // also in quotes and list items
		s.fence = f
		out.WriteString(safe(line))
		return
	}
	if isTableRow(body) && !sentInPieces(body) {
		s.held = append(s.held, line)
		return
	}
	out.WriteString(safe(line))
}

// sentInPieces reports whether Feed may have sent the first words of line l while it grew,
// before its first "|" arrived: its text (after the container prefix) has a space before
// that "|", and cannot become a fence. Such a line is text however it arrives, so that the
// output does not depend on the chunking.
func sentInPieces(l string) bool {
	if i := strings.IndexByte(l, '|'); i >= 0 {
		l = l[:i]
	}
	t := containerless(l)
	return strings.Contains(t, " ") && !strings.HasPrefix(t, "`") && !strings.HasPrefix(t, "~")
}

func (s *MarkdownStream) flushHeld(out *strings.Builder) {
	if len(s.held) == 0 {
		return
	}
	text := strings.Join(s.held, "")
	if s.table {
		src, _ := neutralise(text)
		out.WriteString(string(render([]byte(src), FormatMarkdown, true).out) + "\n")
		if !strings.HasSuffix(text, "\n") {
			// Flush of a table without a final newline: keep the output ending like the input.
			str := strings.TrimSuffix(out.String(), "\n")
			out.Reset()
			out.WriteString(str)
		}
	} else {
		out.WriteString(safe(text))
	}
	s.held, s.table = nil, false
}

func safe(s string) string {
	t, _ := neutralise(s)
	return t
}

// mayBeSpecial reports an incomplete line that could still become a fence or a table row.
// A line that ends in a list marker without its space yet ("  -", " 1.") is still all
// container prefix: sending it in pieces would decide too early that it opens no fence.
func mayBeSpecial(l string) bool {
	t := containerless(l)
	return strings.Contains(l, "|") || t == "" || strings.HasPrefix(t, "`") || strings.HasPrefix(t, "~") ||
		unfinishedMarker(t)
}

// unfinishedMarker reports a list marker that still lacks the space after it: "-", "*", "+",
// or up to 9 digits, with or without the "." or ")" that ends them.
func unfinishedMarker(t string) bool {
	if len(t) == 1 && strings.IndexByte("-*+", t[0]) >= 0 {
		return true
	}
	d := t
	if strings.HasSuffix(d, ".") || strings.HasSuffix(d, ")") {
		d = d[:len(d)-1]
	}
	return len(d) > 0 && len(d) <= 9 && strings.Trim(d, "0123456789") == ""
}

// mayCloseFence reports an incomplete line in a code block that could still become its
// closing fence (closesFence): white space, fence characters, white space. Any white space
// counts, as for closesFence, also a character not complete yet, which may be one.
func mayCloseFence(l, fence string) bool {
	t := strings.TrimLeftFunc(strings.TrimLeft(l, " >"), unicode.IsSpace)
	t = strings.TrimLeftFunc(strings.TrimLeft(t, fence[:1]), unicode.IsSpace)
	return t == "" || !utf8.FullRuneInString(t)
}

func isTableRow(l string) bool {
	return strings.Contains(l, "|") && strings.TrimSpace(l) != ""
}

// isDelimiterRow reports a GFM table delimiter row: | --- | :---: | ---: |
func isDelimiterRow(l string) bool {
	t := strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "> "))
	if !strings.Contains(t, "-") || (!strings.Contains(t, "|") && !strings.HasPrefix(t, ":")) {
		return strings.Contains(t, "|") && strings.Trim(t, "|:- ") == ""
	}
	return strings.Trim(t, "|:- ") == "" && strings.Contains(t, "|")
}

// containerless is line l without its container prefix: the indentation and markers of
// quotes ("> ") and list items ("- ", "* ", "+ ", "1. ", "1) "), so that "1. ```bash"
// opens a fence.
func containerless(l string) string {
	for {
		i := 0
		for i < len(l) && (l[i] == ' ' || l[i] == '>') {
			i++
		}
		t := l[i:]
		n := 0
		for n < len(t) && n < 9 && t[n] >= '0' && t[n] <= '9' {
			n++
		}
		switch {
		case n > 0 && n+1 < len(t) && (t[n] == '.' || t[n] == ')') && t[n+1] == ' ':
			l = t[n+2:]
		case n == 0 && len(t) > 1 && strings.IndexByte("-*+", t[0]) >= 0 && t[1] == ' ':
			l = t[2:]
		default:
			return t
		}
	}
}

// opensFence returns the fence a line (without its container prefix) opens: ``` or ~~~,
// 3 or more; or "".
func opensFence(l string) string {
	t := l
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(t) && t[n] == c {
			n++
		}
		if n >= 3 {
			if c == '`' && strings.Contains(t[n:], "`") {
				return ""
			}
			return t[:n]
		}
	}
	return ""
}

func closesFence(l, fence string) bool {
	t := strings.TrimSpace(l)
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == "" && t[0] == fence[0]
}
