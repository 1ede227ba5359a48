package redact

import "strings"

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isDigit(c) || isUpper(c) || c >= 'a' && c <= 'z' }

// joined reports whether c continues a word, a number, an identifier or an address: a match may
// neither start right after it nor end right before it ("ORD-4111111111111111", "v1.2.3", "x_sk-…",
// the digits of "0171234567@example.com" stay, or are the address).
func joined(c byte) bool {
	return isAlnum(c) || c == '_' || c == '-' || c == '.' || c == '@' || c >= 0x80
}

// startsAt reports whether a match may start at i. Not right after a "]" either: a value glued to
// one it follows ("a@b.io+49 30 1234567") is not read as two, so a placeholder put in place of the
// first ("[EMAIL 1]+49 …") must not make the second one a match when the text is redacted again.
func startsAt(t string, i int) bool { return i == 0 || !joined(t[i-1]) && t[i-1] != ']' }

// endsAt reports whether a match may end at i (exclusive). A sentence's full stop or a hyphen
// followed by a space may follow it; a letter, digit or another piece of the same token may not.
func endsAt(t string, i int) bool {
	if i >= len(t) {
		return true
	}
	c := t[i]
	if c == '.' || c == '-' {
		return i+1 >= len(t) || !joined(t[i+1])
	}
	return !joined(c)
}

// emails appends t's e-mail addresses: a local part, "@", and a domain of two labels or more
// whose last is letters only.
func emails(t string, spans []span) []span {
	last := 0 // the end of the last address: the next one's local part starts after it
	for off := 0; ; {
		at := strings.IndexByte(t[off:], '@')
		if at < 0 {
			return spans
		}
		at += off
		off = at + 1
		start := at
		for start > last && localChar(t[start-1]) {
			start--
		}
		for start < at && t[start] == '.' {
			start++
		}
		end, ok := domainEnd(t, at+1)
		if start == at || !ok || (start > 0 && t[start-1] >= 0x80) {
			continue
		}
		spans = append(spans, span{start, end, Email})
		off, last = end, end
	}
}

func localChar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("._%+-'", c) >= 0
}

// domainEnd reads a domain from i: labels of letters, digits and "-", a dot apart, the last of
// two letters or more. A trailing dot (a sentence's end) is not part of it.
func domainEnd(t string, i int) (int, bool) {
	labels, end, lastAlpha := 0, i, true
	for j := i; ; {
		k := j
		alpha := true
		for k < len(t) && (isAlnum(t[k]) || t[k] == '-') {
			if isDigit(t[k]) || t[k] == '-' {
				alpha = false
			}
			k++
		}
		if k == j {
			break
		}
		labels, end, lastAlpha = labels+1, k, alpha && k-j >= 2
		if k+1 < len(t) && t[k] == '.' && isAlnum(t[k+1]) {
			j = k + 1
			continue
		}
		break
	}
	if labels < 2 || !lastAlpha || (end < len(t) && (t[end] == '_' || t[end] >= 0x80)) {
		return 0, false
	}
	return end, true
}

// keyBlocks appends PEM private key blocks, from their BEGIN line to their END line.
func keyBlocks(t string, spans []span) []span {
	for off := 0; ; {
		b := strings.Index(t[off:], "-----BEGIN ")
		if b < 0 {
			return spans
		}
		b += off
		line := strings.IndexByte(t[b:], '\n')
		if line < 0 || !strings.Contains(t[b:b+line], "PRIVATE KEY-----") {
			off = b + 11
			continue
		}
		e := strings.Index(t[b:], "-----END ")
		if e < 0 {
			spans = append(spans, span{b, len(t), Secret})
			return spans
		}
		e += b
		close := strings.Index(t[e+9:], "-----")
		end := len(t)
		if close >= 0 {
			end = e + 9 + close + 5
		}
		spans = append(spans, span{b, end, Secret})
		off = end
	}
}

// scan walks t once and appends the numbers (phones, cards), IBANs and secrets it finds: each
// candidate starts where a word may start and is checked by the kinds that take its first byte.
// found are the addresses and key blocks found before, in order: the scan goes around them, and
// a candidate that would run into one is taken only as far as it stays before it.
func (r *Redactor) scan(t string, found []span, spans []span) []span {
	next := 0 // the first of found not yet passed
	for i := 0; i < len(t); {
		for next < len(found) && found[next].end <= i {
			next++
		}
		limit := len(t)
		if next < len(found) {
			if found[next].start <= i {
				i = found[next].end
				continue
			}
			limit = found[next].start
		}
		c := t[i]
		if !startsAt(t, i) || !(isAlnum(c) || c == '+' || c == '(') {
			i++
			continue
		}
		var sp span
		var ok bool
		skip := skipWord(t, i)
		switch {
		case isDigit(c) || c == '+' || c == '(':
			sp, ok = r.number(t, i, limit)
		default:
			sp, ok, skip = r.word(t, i, skip)
			ok = ok && sp.end <= limit
		}
		if ok {
			spans = append(spans, sp)
			i = sp.end
			continue
		}
		i = skip
	}
	return spans
}

// skipWord returns the end of the word or number at i (at least i+1): no match starts inside it.
func skipWord(t string, i int) int {
	j := i + 1
	for j < len(t) && joined(t[j]) {
		j++
	}
	return j
}

// word checks the letters at i for an IBAN or a secret; skip is where the scan goes on when
// neither is there (past the word, or past an IBAN-shaped run).
func (r *Redactor) word(t string, i, skip int) (span, bool, int) {
	if r.on.iban && i+4 <= len(t) && isUpper(t[i]) && isUpper(t[i+1]) && isDigit(t[i+2]) && isDigit(t[i+3]) {
		end, ok, past := iban(t, i)
		if ok {
			return span{i, end, IBAN}, true, end
		}
		skip = max(skip, past)
	}
	if r.on.secret {
		if start, end, ok := secret(t, i); ok {
			return span{start, end, Secret}, true, end
		}
	}
	return span{}, false, skip
}
