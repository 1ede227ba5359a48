package slackmd

import (
	"strings"
	"unicode"
)

// wordJoiner (U+2060) is invisible and keeps the text reading exactly as written, but a
// Slack token or mention keyword with it inside is no longer one.
const wordJoiner = "\u2060"

var broadcastWords = []string{"here", "channel", "everyone"}

// neutralise puts a word joiner wherever Slack could show a mention: after each "<" that opens
// "<!" or "<@" (or "<#" when either character is written as a reference), and after the "@" of a
// bare @here, @channel or @everyone (any case, followed by no letter, digit, "_" or "-"). It looks
// at the text as Slack could show it: each character may be written as a character reference
// (&lt; &LT; &#60; &#0060; &#x3C; &#X3c, with or without the ";"; &#64; &commat; &excl; &num;)
// or a Markdown backslash escape ("\!"), which markdown_text and Markdown resolve; the joiner
// goes after the whole reference. Mrkdwn escapes every "<" besides, but a reference to "@"
// resolves to a bare "@" there. It returns the new text and the offsets (in the new text) of the
// inserted joiners.
func neutralise(s string) (string, []int) {
	return insertJoiners(s, true)
}

// insertJoiners is neutralise, or with tokens false only its bare broadcast words (for rendered
// mrkdwn, whose "&lt;" is an escape that makes no token).
func insertJoiners(s string, tokens bool) (string, []int) {
	if !strings.ContainsAny(s, "<@&\\") {
		return s, nil
	}
	var sb strings.Builder
	var at []int
	last := 0
	for i := 0; i < len(s); {
		c, n := charAt(s, i)
		j := joinerAt(s, i, c, n)
		if j < 0 || !tokens && c != '@' {
			i += n
			continue
		}
		sb.WriteString(s[last:j])
		at = append(at, sb.Len())
		sb.WriteString(wordJoiner)
		last, i = j, j
	}
	if last == 0 {
		return s, nil
	}
	sb.WriteString(s[last:])
	return sb.String(), at
}

// joinerAt is where a word joiner goes when the character c, written as s[i:i+n], starts what
// Slack could read as a mention: after it when it is a "<" that opens a token, or the "@" of a
// broadcast word; else -1.
func joinerAt(s string, i int, c byte, n int) int {
	switch c {
	case '<':
		if i+n < len(s) {
			d, m := charAt(s, i+n)
			if d == '!' || d == '@' || d == '#' && (n > 1 || m > 1) {
				return i + n
			}
		}
	case '@':
		if startsBroadcast(s, i+n) {
			return i + n
		}
	}
	return -1
}

// startsBroadcast reports whether s[j:], what follows an "@", starts with a whole broadcast word
// as Slack could show it.
func startsBroadcast(s string, j int) bool {
	for _, w := range broadcastWords {
		k, x := j, 0
		for ; x < len(w) && k < len(s); x++ {
			c, n := charAt(s, k)
			if c|0x20 != w[x] { // ASCII letters in either case
				break
			}
			k += n
		}
		if x < len(w) {
			continue
		}
		// What follows must end the word. A reference or an escape may be shown as written,
		// its "&" or "\\" ending the word, or resolved: both are read.
		if k == len(s) || s[k] == '&' || s[k] == '\\' {
			return true
		}
		if c, _ := charAt(s, k); !isWordByte(c) {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// charAt returns the character s[i:] starts with as Slack could show it, and how many bytes
// write it: a character reference or a Markdown backslash escape stands for the character it
// resolves to (any character beyond ASCII as 0x80, a word byte), any other byte for itself.
func charAt(s string, i int) (byte, int) {
	switch s[i] {
	case '&':
		if c, n := reference(s[i:]); n > 0 {
			return c, n
		}
	case '\\':
		// A backslash before a reference escapes its "&" in CommonMark, but goldmark resolves the
		// reference first: it is read as the character, whichever way Slack reads it.
		if i+1 < len(s) && s[i+1] == '&' {
			if c, n := reference(s[i+1:]); n > 0 {
				return c, 1 + n
			}
		}
		if i+1 < len(s) && isASCIIPunct(s[i+1]) {
			return s[i+1], 2
		}
	}
	return s[i], 1
}

// namedRefs are the named character references of the characters a mention is made of, as
// HTML resolves them (case matters; "&lt" and "&LT" also without their ";").
var namedRefs = []struct {
	name string
	c    byte
}{{"lt;", '<'}, {"LT;", '<'}, {"lt", '<'}, {"LT", '<'}, {"excl;", '!'}, {"commat;", '@'}, {"num;", '#'}}

// reference reads the character reference s starts with (s[0] is "&"): the character it stands
// for (beyond ASCII: 0x80) and its length, or a length of 0. Numeric references may have any
// number of leading zeros and no ";".
func reference(s string) (byte, int) {
	if len(s) < 3 {
		return 0, 0
	}
	if s[1] != '#' {
		for _, r := range namedRefs {
			if strings.HasPrefix(s[1:], r.name) {
				return r.c, 1 + len(r.name)
			}
		}
		return 0, 0
	}
	j, base := 2, 10
	if s[j] == 'x' || s[j] == 'X' {
		j, base = 3, 16
	}
	v, digits := 0, 0
	for ; j < len(s); j++ {
		d := digitValue(s[j])
		if d < 0 || d >= base {
			break
		}
		if v <= unicode.MaxRune {
			v = v*base + d
		}
		digits++
	}
	if digits == 0 {
		return 0, 0
	}
	if j < len(s) && s[j] == ';' {
		j++
	}
	if v >= 0x80 {
		return 0x80, j
	}
	return byte(v), j
}

// digitValue is the value of the hexadecimal digit c, or -1.
func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// isASCIIPunct reports the characters a Markdown backslash escapes.
func isASCIIPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

// stripControls removes the control characters a model can emit (a random-weights model
// streams bytes such as \x02, \x19 or \x7f): C0 controls except tab and newline, DEL, and
// C1 controls (U+0080–U+009F). Slack would store and show them as they are. A carriage
// return is a C0 control too, so "\r\n" becomes "\n". U+FFFD and invalid bytes are kept.
// It returns s itself, without allocating, when there is nothing to remove; otherwise the
// new text and, for each removed byte, the offset in the new text where it stood (so a
// caller can map offsets in the new text back to s).
func stripControls(s string) (string, []int) {
	i := 0
	for i < len(s) && (!controlStart[s[i]] || controlLen(s, i) == 0) {
		i++
	}
	if i == len(s) {
		return s, nil
	}
	var sb strings.Builder
	sb.Grow(len(s))
	var at []int
	last := 0
	for i < len(s) {
		n := controlLen(s, i)
		if n == 0 {
			i++
			continue
		}
		sb.WriteString(s[last:i])
		for range n {
			at = append(at, sb.Len())
		}
		i += n
		last = i
	}
	sb.WriteString(s[last:])
	return sb.String(), at
}

// controlStart marks the bytes a control character can start with: C0 but tab and newline,
// DEL, and 0xC2, the first byte of U+0080–U+00BF in UTF-8. One lookup per byte keeps the scan
// of text without controls fast.
var controlStart = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = c != '\t' && c != '\n'
	}
	t[0x7f], t[0xc2] = true, true
	return t
}()

// controlLen is the length in bytes of the control character starting at s[i], or 0.
func controlLen(s string, i int) int {
	switch c := s[i]; {
	case !controlStart[c]:
		return 0
	case c != 0xc2:
		return 1
	case i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f: // U+0080–U+009F
		return 2
	}
	return 0
}

// StripControls is s without the control characters stripControls removes: for text from the
// model service that the bot writes to Slack outside the renderers (an error message in a note,
// an image model's revised prompt).
func StripControls(s string) string {
	out, _ := stripControls(s)
	return out
}

// Neutralise is s as the renderers write model text, without rendering it: its control
// characters removed and its mentions neutralised (see Render). For model or provider text
// written to Slack outside the renderers, in either format (a note under an answer).
func Neutralise(s string) string {
	return clean(s)
}

// clean is model text as the renderers take it: controls stripped, then mentions
// neutralised. The stripping comes first, so that a control inside "<\x02@U1>" cannot hide
// a mention from neutralise.
func clean(s string) string {
	t, _ := stripControls(s)
	t, _ = neutralise(t)
	return t
}
