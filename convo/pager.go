package convo

import "strings"

// Pager splits a growing answer into message parts of at most limit characters.
type Pager struct {
	f     Format
	limit int
	parts []string
}

// NewPager returns a Pager for format f and part limit (MrkdwnLimit, MarkdownLimit).
func NewPager(f Format, limit int) *Pager { return &Pager{f: f, limit: limit} }

// Update takes the whole answer so far and returns all parts.
func (p *Pager) Update(md string, final bool) []string {
	out := Render(md, p.f)
	var parts []string
	for len(out) > p.limit {
		cut := strings.LastIndex(out[:p.limit], "\n")
		if cut <= 0 {
			cut = p.limit
		}
		parts = append(parts, out[:cut])
		out = strings.TrimLeft(out[cut:], "\n")
	}
	return append(parts, out)
}

// Split cuts a whole answer into parts: NewPager(f, limit).Update(md, true).
func Split(md string, f Format, limit int) []string { return NewPager(f, limit).Update(md, true) }

// MarkdownStream turns a streamed Markdown answer into text for chat.appendStream.
type MarkdownStream struct{ buf strings.Builder }

// NewMarkdownStream returns an empty stream.
func NewMarkdownStream() *MarkdownStream { return &MarkdownStream{} }

// Feed takes the next delta and returns what can be appended now.
func (s *MarkdownStream) Feed(delta string) string {
	s.buf.WriteString(delta)
	t := s.buf.String()
	i := strings.LastIndexByte(t, '\n')
	if i < 0 {
		return ""
	}
	s.buf.Reset()
	s.buf.WriteString(t[i+1:])
	return neutralise(t[:i+1])
}

// Flush returns the rest at the end.
func (s *MarkdownStream) Flush() string {
	t := s.buf.String()
	s.buf.Reset()
	return neutralise(t)
}
