package slackmd

import (
	"html"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// A model can write a mention with its characters as character references (decimal with or
// without leading zeros, hex in either case, named, with or without the ";") or Markdown
// backslash escapes: Slack shows markdown_text with them resolved, and mrkdwn resolves a
// reference to "@" into a bare "@". Every format neutralises what Slack would show: the word
// joiner goes after the whole reference. Mrkdwn also escapes every "<". (goldmark resolves a
// decimal reference with leading zeros to another character than "<" or "@": "&#0060;" as "0",
// "&#064;" as "4".)
func TestMentionsWrittenAsReferences(t *testing.T) {
	const wj = wordJoiner
	for _, tc := range []struct {
		name, md, mrkdwn, markdown string
	}{
		{"decimal with leading zeros", "&#0060;!here>", "0" + wj + "!here&gt;", "&#0060;" + wj + "!here>"},
		{"decimal", "&#60;!channel>", "&lt;" + wj + "!channel&gt;", "&#60;" + wj + "!channel>"},
		{"hex", "&#x3c;@U123>", "&lt;" + wj + "@U123&gt;", "&#x3c;" + wj + "@U123>"},
		{"hex in capitals", "&#X3C;!subteam^S1>", "&lt;" + wj + "!subteam^S1&gt;", "&#X3C;" + wj + "!subteam^S1>"},
		{"eight digits", "&#00000060;@W1>", "&amp;#00000060;" + wj + "@W1&gt;", "&#00000060;" + wj + "@W1>"},
		{"named", "&lt;!here>", "&lt;" + wj + "!here&gt;", "&lt;" + wj + "!here>"},
		{"named in capitals", "&LT;!everyone>", "&lt;" + wj + "!everyone&gt;", "&LT;" + wj + "!everyone>"},
		{"named without its semicolon", "&lt!here>", "&amp;lt" + wj + "!here&gt;", "&lt" + wj + "!here>"},
		{"decimal without its semicolon", "&#60!here>", "&amp;#60" + wj + "!here&gt;", "&#60" + wj + "!here>"},
		{"the ! as a reference", "<&#33;here>", "&lt;" + wj + "!here&gt;", "<" + wj + "&#33;here>"},
		{"the ! as a named reference", "<&excl;here>", "&lt;" + wj + "!here&gt;", "<" + wj + "&excl;here>"},
		{"the @ of a user as a reference", "<&#64;U1>", "&lt;" + wj + "@U1&gt;", "<" + wj + "&#64;U1>"},
		{"the @ of a user as a named reference", "<&commat;U1>", "&lt;" + wj + "@U1&gt;", "<" + wj + "&commat;U1>"},
		{"both as references", "&#60;&#64;U1>", "&lt;" + wj + "@U1&gt;", "&#60;" + wj + "&#64;U1>"},
		{"a channel as references", "&#60;#C123>", "&lt;" + wj + "#C123&gt;", "&#60;" + wj + "#C123>"},
		{"a channel link as written", "<#C123|general>", "<#C123|general>", "<#C123|general>"},
		{"bare @channel", "&#64;channel", "@" + wj + "channel", "&#64;" + wj + "channel"},
		{"bare @here, leading zero", "&#064;here", "4" + wj + "here", "&#064;" + wj + "here"},
		{"bare @everyone, hex", "&#x40;everyone", "@" + wj + "everyone", "&#x40;" + wj + "everyone"},
		{"bare @here, named", "&commat;here", "@" + wj + "here", "&commat;" + wj + "here"},
		{"the word as references", "@&#99;hannel", "@" + wj + "channel", "@" + wj + "&#99;hannel"},
		{"all of it as references", "&#64;&#104;&#101;&#114;&#101;", "@" + wj + "here", "&#64;" + wj + "&#104;&#101;&#114;&#101;"},
		{"a longer word stays", "&#64;heretic &#64;channels", "@heretic @channels", "&#64;heretic &#64;channels"},
		{"an escaped reference stays", "&amp;#64;channel &amp;lt;!here>", "&amp;#64;channel &amp;lt;!here&gt;", "&amp;#64;channel &amp;lt;!here>"},
		{"backslash escapes", `\<!here> <\!here> \@channel`, "&lt;" + wj + "!here&gt; &lt;" + wj + "!here&gt; @" + wj + "channel",
			`\<` + wj + `!here> <` + wj + `\!here> \@` + wj + "channel"},
		{"in code", "`&#64;here`", "`&amp;#64;" + wj + "here`", "`&#64;" + wj + "here`"},
		{"in a link's text", "[&#64;here](https://x.example)", "<https://x.example|@" + wj + "here>", "[&#64;" + wj + "here](https://x.example)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs := map[Format]string{FormatMrkdwn: tc.mrkdwn, FormatMarkdown: tc.markdown}
			for f, want := range outs {
				if got := Render(tc.md, f); got != want {
					t.Errorf("Render(%d) = %q, want %q", f, got, want)
				}
				if got := strings.Join(Split(tc.md, f, MrkdwnLimit), "\n"); got != want {
					t.Errorf("Split(%d) = %q, want %q", f, got, want)
				}
				checkNoMentions(t, "want", f, want)
			}
			whole := strings.Join(feedAll(tc.md, func() int { return len(tc.md) }), "")
			bytewise := strings.Join(feedAll(tc.md, func() int { return 1 }), "")
			if whole != tc.markdown || bytewise != tc.markdown {
				t.Errorf("MarkdownStream = %q whole, %q byte by byte; want %q", whole, bytewise, tc.markdown)
			}
		})
	}
}

// Markup that the output drops can join an "@" and a broadcast word: mrkdwn writes a code span
// that holds a backtick as plain text. The rendered text is neutralised too.
func TestMentionsJoinedByRendering(t *testing.T) {
	const wj = wordJoiner
	for _, tc := range []struct{ md, mrkdwn string }{
		{"x @`channel ``` y`", "x @" + wj + "channel ``" + wj + "` y"},
		{"@ch`annel ``` `", "@" + wj + "channel ``" + wj + "` "},
	} {
		got := Render(tc.md, FormatMrkdwn)
		if got != tc.mrkdwn {
			t.Errorf("Render(%q) = %q, want %q", tc.md, got, tc.mrkdwn)
		}
		checkNoMentions(t, "Render", FormatMrkdwn, got)
		for _, part := range Split(tc.md, FormatMrkdwn, 100) {
			checkNoMentions(t, "Split", FormatMrkdwn, part)
		}
	}
}

// FuzzMentions checks, for any answer, that nothing the bot writes can make Slack mention
// anyone, read as Slack shows it (character references resolved, and in Markdown backslash
// escapes): Render and Split in both formats, a Pager streaming it, and a MarkdownStream fed
// in any pieces.
func FuzzMentions(f *testing.F) {
	f.Add(readTestdata(f, "render_safety.md"), []byte{3})
	for _, s := range []string{"&#0060;!here>", "<&#33;here> &#64;channel @&#99;hannel &LT!everyone>", `\<!here> <\!here> \@here`,
		"&#x40;&#x65;veryone", "- &#60;@U1>\n> &commat;here\n\n| a | &#64;here |\n|---|---|\n| 1 | 2 |\n"} {
		f.Add(s, []byte{1, 7})
	}
	f.Fuzz(func(t *testing.T, md string, sizes []byte) {
		if !utf8.ValidString(md) || len(md) > 5000 {
			t.Skip()
		}
		for _, f := range []Format{FormatMrkdwn, FormatMarkdown} {
			checkNoMentions(t, "Render", f, Render(md, f))
			for _, part := range Split(md, f, 200) {
				checkNoMentions(t, "Split", f, part)
			}
			p := NewPager(f, 200)
			for n := 0; n < len(md); {
				n = min(len(md), n+1+len(md)/5)
				for n < len(md) && !utf8.RuneStart(md[n]) {
					n++
				}
				for _, part := range p.Update(md[:n], n == len(md)) {
					checkNoMentions(t, "Pager", f, part)
				}
			}
		}
		i := 0
		for _, piece := range feedAll(md, func() int {
			i++
			if len(sizes) == 0 {
				return 1
			}
			return 1 + int(sizes[i%len(sizes)])%32
		}) {
			checkNoMentions(t, "MarkdownStream", FormatMarkdown, piece)
		}
	})
}

// References and escapes as Slack could resolve them: numeric and named character references
// (html.UnescapeString's reading), and in Markdown the backslash escapes of ASCII punctuation,
// in one pass (an escaped "&" starts no reference).
var (
	shownMarkdown = regexp.MustCompile("\\\\[!-/:-@\\[-`{-~]|&#[xX][0-9a-fA-F]+;?|&#[0-9]+;?|&[a-zA-Z][a-zA-Z0-9]*;?")
	shownMrkdwn   = regexp.MustCompile("&#[xX][0-9a-fA-F]+;?|&#[0-9]+;?|&[a-zA-Z][a-zA-Z0-9]*;?")
	tokenRE       = regexp.MustCompile(`<[!@]`)
	broadcastRE   = regexp.MustCompile(`(?i)@(?:here|channel|everyone)(?:[^\w\-\x{80}-\x{10FFFF}]|$)`)
)

// checkNoMentions fails the test when text, written in format f, reads as Slack shows it with a
// "<!" or "<@" token or a bare @here, @channel or @everyone. In mrkdwn a token needs a "<" as
// such: "&lt;" is the escape that keeps it text.
func checkNoMentions(t *testing.T, what string, f Format, text string) {
	t.Helper()
	re := shownMrkdwn
	if f == FormatMarkdown {
		re = shownMarkdown
	}
	shown := re.ReplaceAllStringFunc(text, func(m string) string {
		if m[0] == '\\' {
			return m[1:]
		}
		return html.UnescapeString(m)
	})
	tokens := shown
	if f == FormatMrkdwn {
		tokens = text
	}
	for _, m := range []string{tokenRE.FindString(tokens), broadcastRE.FindString(shown)} {
		if m != "" {
			t.Fatalf("%s (format %d) writes %q, which Slack shows as %q: a mention (%q)", what, f, text, shown, m)
		}
	}
}
