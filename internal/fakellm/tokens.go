package fakellm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxPiece is the longest token Split makes, in bytes (a word longer than this is cut).
const maxPiece = 8

// Split cuts text into token-sized pieces the way model tokenizers roughly do: a word with
// its leading space, a number, a run of punctuation, a run of newlines; long words are cut
// into pieces of at most 8 bytes. Joining the pieces gives text back exactly.
func Split(text string) []string {
	var out []string
	for len(text) > 0 {
		n := pieceLen(text)
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

func pieceLen(s string) int {
	r, size := utf8.DecodeRuneInString(s)
	i := size
	class := classOf(r)
	if r == ' ' && len(s) > size { // a space sticks to the word after it
		r2, size2 := utf8.DecodeRuneInString(s[size:])
		if c := classOf(r2); c != classSpace && c != classNewline {
			class = c
			i += size2
		}
	}
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if classOf(r) != class || i+size > maxPiece {
			break
		}
		i += size
	}
	return i
}

type charClass int

const (
	classLetter charClass = iota
	classDigit
	classSpace
	classNewline
	classPunct
)

func classOf(r rune) charClass {
	switch {
	case r == '\n':
		return classNewline
	case unicode.IsSpace(r):
		return classSpace
	case unicode.IsLetter(r) || r == '\'':
		return classLetter
	case unicode.IsDigit(r):
		return classDigit
	}
	return classPunct
}

var words = strings.Fields(`the a slack bot answers questions in threads and streams its reply while
the model writes it every user sees text appear as soon as possible edits are paced by a shared budget
so no one waits too long rate limits apply per workspace and per channel tokens arrive at a steady pace
this fake server writes them one by one with a small delay between them to look like a real model
markdown lists code blocks and bold words make the answer realistic enough for the renderer`)

// Answer returns a deterministic, realistic answer of about n tokens (as Split counts them)
// with Markdown: paragraphs, a bulleted list, bold words and a code block. seed varies the
// text.
func Answer(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 42))
	var b strings.Builder
	tokens := 0
	sentence := func() {
		k := 6 + rng.IntN(10)
		for i := range k {
			w := words[rng.IntN(len(words))]
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			} else {
				b.WriteByte(' ')
			}
			if rng.IntN(25) == 0 {
				w = "**" + w + "**"
			}
			b.WriteString(w)
			tokens++
		}
		b.WriteString(". ")
		tokens++
	}
	for part := 0; tokens < n; part++ {
		switch part % 4 {
		case 1:
			for i := range 3 {
				fmt.Fprintf(&b, "- item %d: ", i+1)
				sentence()
				b.WriteString("\n")
			}
			b.WriteString("\n")
		case 3:
			b.WriteString("```go\nfor i := range 10 {\n\tfmt.Println(i)\n}\n```\n\n")
			tokens += 20
		default:
			for range 3 {
				sentence()
			}
			b.WriteString("\n\n")
		}
	}
	return strings.TrimSpace(b.String())
}
