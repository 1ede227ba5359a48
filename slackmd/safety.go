package slackmd

import (
	"strings"
)

// wordJoiner (U+2060) is invisible and keeps the text reading exactly as written, but a
// Slack token or mention keyword with it inside is no longer one.
const wordJoiner = "\u2060"

var broadcastWords = []string{"here", "channel", "everyone"}

// ltEntities are the HTML character references of "<" (lower case), which Markdown
// resolves: "&lt;!here>" reads as "<!here>".
var ltEntities = []string{"&lt;", "&#60;", "&#060;", "&#x3c;"}

// neutralise puts a word joiner after each "<" that starts "<!" or "<@" (also when the "<"
// is written as a character reference such as &lt;) and after the "@" of a bare @here,
// @channel or @everyone (any case). It returns the new text and the offsets (in the new
// text) of the inserted joiners.
func neutralise(s string) (string, []int) {
	if !strings.ContainsAny(s, "<@&") {
		return s, nil
	}
	var sb strings.Builder
	var at []int
	last := 0
	for i := 0; i < len(s); i++ {
		j := joinerAt(s, i)
		if j < 0 {
			continue
		}
		sb.WriteString(s[last:j])
		at = append(at, sb.Len())
		sb.WriteString(wordJoiner)
		last = j
		i = j - 1
	}
	if last == 0 {
		return s, nil
	}
	sb.WriteString(s[last:])
	return sb.String(), at
}

// joinerAt is where a word joiner goes when s[i] starts what Slack could read as a mention: after
// a "<" (or a reference to it) that opens "<!" or "<@", after the "@" of a broadcast word; else -1.
func joinerAt(s string, i int) int {
	switch s[i] {
	case '&':
		for _, ent := range ltEntities {
			if end := i + len(ent); opensToken(s, end) && strings.EqualFold(s[i:end], ent) {
				return end
			}
		}
	case '<':
		if opensToken(s, i+1) {
			return i + 1
		}
	case '@':
		if startsBroadcast(s[i+1:]) {
			return i + 1
		}
	}
	return -1
}

// opensToken reports whether s[i] is the "!" or "@" that follows the "<" of a Slack token.
func opensToken(s string, i int) bool {
	return i < len(s) && (s[i] == '!' || s[i] == '@')
}

// startsBroadcast reports whether rest, what follows an "@", starts with a whole broadcast word.
func startsBroadcast(rest string) bool {
	for _, w := range broadcastWords {
		if len(rest) >= len(w) && strings.EqualFold(rest[:len(w)], w) && (len(rest) == len(w) || !isWordByte(rest[len(w)])) {
			return true
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
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

// clean is model text as the renderers take it: controls stripped, then mentions
// neutralised. The stripping comes first, so that a control inside "<\x02@U1>" cannot hide
// a mention from neutralise.
func clean(s string) string {
	t, _ := stripControls(s)
	t, _ = neutralise(t)
	return t
}
