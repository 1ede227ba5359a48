package followup

import (
	"strings"
	"unicode"
)

// acknowledgement reports a message that only thanks or reacts ("thanks!", "thank you so much 🙏",
// ":+1:"): in a thread the bot takes part in, an answer to it would be noise. A question mark (also
// ？, ❓ or :question:), any other word or a mention makes it a message to answer, and so does no
// text at all (a forwarded message, a file).
func acknowledgement(text string) bool {
	t := strings.ToLower(strings.TrimSpace(text))
	if t == "" || strings.ContainsAny(t, "?<？❓❔") || strings.Contains(t, "question:") {
		return false
	}
	for { // :emoji: codes
		i := strings.IndexByte(t, ':')
		j := strings.IndexByte(t[i+1:], ':')
		if i < 0 || j < 0 || strings.ContainsAny(t[i+1:i+1+j], " \n") {
			break
		}
		t = t[:i] + " " + t[i+2+j:]
	}
	words := strings.FieldsFunc(t, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(words) > 5 {
		return false
	}
	thanked := false
	for i, w := range words {
		prev, next := "", ""
		if i > 0 {
			prev = words[i-1]
		}
		if i+1 < len(words) {
			next = words[i+1]
		}
		switch thanksWords[w] {
		case thanks, praise:
			thanked = true
		case filler:
			// "a" only in "a lot" ("perfect, A" picks an option), "you" only after "thank".
			if w == "a" && next != "lot" || w == "lot" && prev != "a" || w == "you" && prev != "thank" && prev != "thanks" {
				return false
			}
		default:
			return false
		}
	}
	return thanked || len(words) == 0 // fillers alone ("a", "so") are no thanks: "A" may pick an option
}

type thanksWord int

const (
	notThanks thanksWord = iota
	thanks               // thanks by itself
	praise               // thanks by itself too ("great" after an answer)
	filler               // only beside one of the others ("thank you so much")
)

// thanksWords are the words of a message that only thanks.
var thanksWords = map[string]thanksWord{
	"thanks": thanks, "thank": thanks, "thx": thanks, "ty": thanks, "tysm": thanks, "cheers": thanks,
	"merci": thanks, "danke": thanks, "gracias": thanks,
	"great": praise, "awesome": praise, "perfect": praise, "nice": praise, "cool": praise, "brilliant": praise,
	"you": filler, "so": filler, "much": filler, "a": filler, "lot": filler, "many": filler,
}
