// Package redact replaces personal data and secrets in text bound for the model with typed
// placeholders ("[EMAIL 1]"): e-mail addresses, phone numbers, payment card numbers (Luhn-checked),
// IBANs (mod-97-checked), API keys and tokens of common shapes, private key blocks, and patterns the
// team adds. A Session numbers the placeholders of one request: the same value gets the same
// placeholder wherever it appears in that request, so the model can still tell two addresses apart
// and refer to each.
//
// The built-in kinds are found by one hand-written scan of the text (no regular expressions): a
// thread of 50 KB is redacted in well under a millisecond, and every candidate is checked by its
// shape and checksum so that the look-alikes a team writes all day (versions, dates, times, IP
// addresses, order ids, hashes) stay as they are. The team's patterns are regular expressions,
// run after the scan.
package redact

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Kind is what a placeholder stands for: its word in the placeholder.
type Kind string

// The built-in kinds.
const (
	Email  Kind = "EMAIL"
	Phone  Kind = "PHONE"
	Card   Kind = "CARD"
	IBAN   Kind = "IBAN"
	Secret Kind = "SECRET" // API keys, tokens, private keys
)

// Kinds are the built-in kinds, in the order settings name them.
var Kinds = []Kind{Email, Phone, Card, IBAN, Secret}

// Pattern is a team's own kind: what Re matches is replaced by "[Name n]".
type Pattern struct {
	Name Kind
	Re   *regexp.Regexp
}

// Redactor finds what to replace. Safe for concurrent use; each request takes a Session.
type Redactor struct {
	on       kindSet
	patterns []Pattern
}

// kindSet is the built-in kinds a Redactor replaces (a scan asks it at every word: no map).
type kindSet struct{ email, phone, card, iban, secret bool }

func (s *kindSet) set(k Kind) {
	switch k {
	case Email:
		s.email = true
	case Phone:
		s.phone = true
	case Card:
		s.card = true
	case IBAN:
		s.iban = true
	case Secret:
		s.secret = true
	}
}

func (s kindSet) has(k Kind) bool {
	return k == Email && s.email || k == Phone && s.phone || k == Card && s.card || k == IBAN && s.iban ||
		k == Secret && s.secret
}

// New returns a Redactor of the built-in kinds named (any of Kinds) and the team's patterns.
func New(kinds []Kind, patterns []Pattern) (*Redactor, error) {
	r := &Redactor{patterns: patterns}
	for _, k := range kinds {
		if !slices.Contains(Kinds, k) {
			return nil, fmt.Errorf("redact: unknown kind %q", k)
		}
		r.on.set(k)
	}
	for _, p := range patterns {
		if !validName(string(p.Name)) || p.Re == nil {
			return nil, fmt.Errorf("redact: pattern %q: a name of capital letters, digits and _, and a regexp", p.Name)
		}
	}
	return r, nil
}

// Kinds are the kinds r replaces, built-in first.
func (r *Redactor) Kinds() []Kind {
	var ks []Kind
	for _, k := range Kinds {
		if r.on.has(k) {
			ks = append(ks, k)
		}
	}
	for _, p := range r.patterns {
		ks = append(ks, p.Name)
	}
	return ks
}

// ParseKinds reads a comma-separated list of kinds, case-insensitive ("email, phone"); "all" is
// every built-in kind; "" is none.
func ParseKinds(s string) ([]Kind, error) {
	var ks []Kind
	for f := range strings.SplitSeq(s, ",") {
		f = strings.ToUpper(strings.TrimSpace(f))
		switch {
		case f == "":
		case f == "ALL":
			ks = append(ks, Kinds...)
		case slices.Contains(Kinds, Kind(f)):
			ks = append(ks, Kind(f))
		default:
			return nil, fmt.Errorf("unknown kind %q (want %s or all)", f, kindList())
		}
	}
	slices.Sort(ks)
	return slices.Compact(ks), nil
}

func kindList() string {
	var b strings.Builder
	for i, k := range Kinds {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strings.ToLower(string(k)))
	}
	return b.String()
}

// ParsePatterns reads the team's patterns: entries NAME=regexp, one per line or separated by
// whitespace (a regexp that needs a space writes \s or \x20). NAME is capital letters, digits
// and _, and is the placeholder's word.
func ParsePatterns(s string) ([]Pattern, error) {
	var ps []Pattern
	for _, f := range strings.Fields(s) {
		name, expr, ok := strings.Cut(f, "=")
		if !ok || !validName(name) || expr == "" {
			return nil, fmt.Errorf("pattern %q: want NAME=regexp, NAME in capital letters", clip(f))
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("pattern %s: %w", name, err)
		}
		ps = append(ps, Pattern{Name: Kind(name), Re: re})
	}
	return ps, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func validName(s string) bool {
	if s == "" || len(s) > 32 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Session redacts the texts of one request: placeholders are numbered per kind in the order their
// values first appear, and the same value always gets the same one. Not safe for concurrent use.
type Session struct {
	r      *Redactor
	seen   map[string]string // kind + "\x00" + value -> placeholder
	next   map[Kind]int
	counts map[Kind]int
	spans  []span // reused between texts
}

// Session starts the redaction of one request.
func (r *Redactor) Session() *Session {
	return &Session{r: r}
}

// span is a match: text[start:end] is replaced by a placeholder of kind.
type span struct {
	start, end int
	kind       Kind
}

// Text returns t with every match replaced by its placeholder (t itself when nothing matched).
func (s *Session) Text(t string) string {
	s.spans = s.r.find(t, s.spans[:0])
	if len(s.spans) == 0 {
		return t
	}
	var b strings.Builder
	b.Grow(len(t))
	last := 0
	for _, sp := range s.spans {
		b.WriteString(t[last:sp.start])
		b.WriteString(s.placeholder(sp.kind, t[sp.start:sp.end]))
		last = sp.end
	}
	b.WriteString(t[last:])
	return b.String()
}

// placeholder is value's placeholder in this session, made at its first sight.
func (s *Session) placeholder(k Kind, value string) string {
	if s.seen == nil {
		s.seen, s.next, s.counts = map[string]string{}, map[Kind]int{}, map[Kind]int{}
	}
	s.counts[k]++
	key := string(k) + "\x00" + value
	if p, ok := s.seen[key]; ok {
		return p
	}
	s.next[k]++
	p := "[" + string(k) + " " + strconv.Itoa(s.next[k]) + "]"
	s.seen[key] = p
	return p
}

// Counts are how many values of each kind this session replaced (each occurrence counts).
func (s *Session) Counts() map[Kind]int { return s.counts }

// find appends t's matches to spans, in order and without overlaps: where two overlap, the one
// of the stronger kind wins (the team's patterns, then e-mails, secrets, IBANs, cards, phones: an
// address's digits are not a phone number), then the one that starts first, then the longer.
func (r *Redactor) find(t string, spans []span) []span {
	if r.on.email {
		spans = emails(t, spans)
	}
	addresses := len(spans)
	if r.on.secret {
		spans = keyBlocks(t, spans)
	}
	// Addresses do not overlap one another, nor the scan's finds each other or what it goes
	// around: only a key block (around an address) or the team's patterns can overlap.
	overlaps := len(spans) > addresses || len(r.patterns) > 0
	if r.on.phone || r.on.card || r.on.iban || r.on.secret {
		found := len(spans)
		if found > addresses && addresses > 0 {
			slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
		}
		spans = r.scan(t, spans[:found:found], spans)
	}
	for _, p := range r.patterns {
		for _, m := range p.Re.FindAllStringIndex(t, -1) {
			if m[1] > m[0] {
				spans = append(spans, span{m[0], m[1], p.Name})
			}
		}
	}
	return resolve(spans, overlaps)
}

// resolve orders spans by where they start, and when some may overlap (overlaps), keeps of each
// overlapping set the one of the stronger kind, then the first, then the longer.
func resolve(spans []span, overlaps bool) []span {
	if len(spans) < 2 {
		return spans
	}
	if !overlaps {
		slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int {
		if ra, rb := rank(a.kind), rank(b.kind); ra != rb {
			return ra - rb
		}
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	out := spans[:0:0]
	for _, sp := range spans {
		i, _ := slices.BinarySearchFunc(out, sp.start, func(o span, start int) int { return o.start - start })
		if (i > 0 && out[i-1].end > sp.start) || (i < len(out) && out[i].start < sp.end) {
			continue
		}
		out = slices.Insert(out, i, sp)
	}
	return append(spans[:0], out...)
}

// rank orders the kinds for overlaps: lower wins.
func rank(k Kind) int {
	switch k {
	case Email:
		return 1
	case Secret:
		return 2
	case IBAN:
		return 3
	case Card:
		return 4
	case Phone:
		return 5
	}
	return 0 // the team's patterns
}
