package slackmd

import (
	"math/rand/v2"
	"testing"
)

// answer50KB is a realistic long answer of at least 50 KB: paragraphs, lists, code, tables,
// quotes, links, emoji and CJK text.
func answer50KB() string {
	rng := rand.New(rand.NewPCG(50, 50))
	md := ""
	for len(md) < 50_000 {
		md += genMarkdown(rng, 10) + "\n\n"
	}
	return md
}

func BenchmarkRender50KB(b *testing.B) {
	md := answer50KB()
	for _, f := range []struct {
		name string
		f    Format
	}{{"mrkdwn", FormatMrkdwn}, {"markdown", FormatMarkdown}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(md)))
			b.ReportAllocs()
			for b.Loop() {
				Render(md, f.f)
			}
		})
	}
}

func BenchmarkSplit50KB(b *testing.B) {
	md := answer50KB()
	for _, f := range []struct {
		name  string
		f     Format
		limit int
	}{{"mrkdwn", FormatMrkdwn, MrkdwnLimit}, {"markdown", FormatMarkdown, MarkdownLimit}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(md)))
			b.ReportAllocs()
			for b.Loop() {
				Split(md, f.f, f.limit)
			}
		})
	}
}

// BenchmarkPagerStream50KB streams a 50 KB answer into a Pager 100 bytes at a time (about
// 500 Updates, far more often than a reply edits), then the final Update.
func BenchmarkPagerStream50KB(b *testing.B) {
	md := answer50KB()
	b.SetBytes(int64(len(md)))
	b.ReportAllocs()
	for b.Loop() {
		p := NewPager(FormatMrkdwn, MrkdwnLimit)
		for n := 100; n < len(md); n += 100 {
			p.Update(md[:n], false)
		}
		p.Update(md, true)
	}
}

func BenchmarkMarkdownStream50KB(b *testing.B) {
	md := answer50KB()
	b.SetBytes(int64(len(md)))
	b.ReportAllocs()
	for b.Loop() {
		s := NewMarkdownStream()
		for i := 0; i < len(md); i += 20 {
			s.Feed(md[i:min(i+20, len(md))])
		}
		s.Flush()
	}
}

// BenchmarkStripControls50KB is the cost of looking for control characters in a 50 KB answer
// that has none (every Render and Pager update pays it): no allocation.
func BenchmarkStripControls50KB(b *testing.B) {
	md := answer50KB()
	b.SetBytes(int64(len(md)))
	b.ReportAllocs()
	for b.Loop() {
		stripControls(md)
	}
}
