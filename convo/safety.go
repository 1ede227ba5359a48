package convo

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
		switch s[i] {
		case '&':
			for _, ent := range ltEntities {
				end := i + len(ent)
				if end < len(s) && (s[end] == '!' || s[end] == '@') && strings.EqualFold(s[i:end], ent) {
					sb.WriteString(s[last:end])
					at = append(at, sb.Len())
					sb.WriteString(wordJoiner)
					last = end
					i = end - 1
					break
				}
			}
		case '<':
			if i+1 < len(s) && (s[i+1] == '!' || s[i+1] == '@') {
				sb.WriteString(s[last : i+1])
				at = append(at, sb.Len())
				sb.WriteString(wordJoiner)
				last = i + 1
			}
		case '@':
			for _, w := range broadcastWords {
				if len(s)-i-1 >= len(w) && strings.EqualFold(s[i+1:i+1+len(w)], w) &&
					(i+1+len(w) == len(s) || !isWordByte(s[i+1+len(w)])) {
					sb.WriteString(s[last : i+1])
					at = append(at, sb.Len())
					sb.WriteString(wordJoiner)
					last = i + 1
					break
				}
			}
		}
	}
	if last == 0 {
		return s, nil
	}
	sb.WriteString(s[last:])
	return sb.String(), at
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
