package redact

import "strings"

// numberShape is a run of digit groups read from the text: "+1 (415) 555-0132" is plus, groups
// 1, 3, 3, 4, with separators ' ', ' ', '-' (a group in parentheses counts as paren).
type numberShape struct {
	plus  bool
	paren bool // a group was in parentheses
	end   int
	// groups, separators, digits and where each group ends, in arrays: a candidate costs no
	// allocation
	g, ends    [16]int
	s          [16]byte
	d          [48]byte
	ng, ns, nd int
}

// prefix is n cut to its first k groups.
func (n *numberShape) prefix(k int) {
	nd := 0
	for _, g := range n.g[:k] {
		nd += g
	}
	n.ng, n.ns, n.nd, n.end = k, k-1, nd, n.ends[k-1]
}

func (n *numberShape) groups() []int  { return n.g[:n.ng] }
func (n *numberShape) seps() []byte   { return n.s[:n.ns] }
func (n *numberShape) digits() []byte { return n.d[:n.nd] }

// readNumber reads digit groups from i, each separated by one of " -." (or by ") " after a group
// in parentheses), at most 16 groups and 48 digits: a run longer than that ends before the group
// that would pass them. It reports whether it read a group; the caller checks where the run (or
// the part of it that it takes) ends.
func readNumber(t string, i int, n *numberShape) bool {
	*n = numberShape{}
	j := i
	if t[j] == '+' {
		n.plus = true
		j++
	}
	for {
		open := j < len(t) && t[j] == '('
		if open {
			j++
		}
		k, nd := j, n.nd
		for k < len(t) && isDigit(t[k]) && n.nd < len(n.d) {
			n.d[n.nd] = t[k]
			n.nd++
			k++
		}
		if k == j || (k < len(t) && isDigit(t[k])) || n.ng == len(n.g) {
			// No group, or past the bounds: the run ends with the group before.
			n.nd = nd
			return n.ng > 0
		}
		n.g[n.ng] = k - j
		if open {
			if k >= len(t) || t[k] != ')' {
				n.nd = nd
				return n.ng > 0
			}
			n.paren = true
			k++
		}
		n.ends[n.ng] = k
		n.ng++
		j, n.end = k, k
		sep, next := separator(t, k)
		if next < 0 {
			break
		}
		n.s[n.ns] = sep
		n.ns++
		j = next
	}
	return true
}

// separator reads the separator at k that another group follows: its kind and where the group
// starts, or next -1.
func separator(t string, k int) (byte, int) {
	if k+1 >= len(t) || strings.IndexByte(" -.", t[k]) < 0 {
		return 0, -1
	}
	if isDigit(t[k+1]) || (t[k] == ' ' && t[k+1] == '(') {
		return t[k], k + 1
	}
	return 0, -1
}

// number checks the number at i: a card number, else a phone number; when the whole run of
// groups is neither, its longest first groups that are one (a phone number and a card number a
// space apart are one run of groups), ending by limit.
func (r *Redactor) number(t string, i, limit int) (span, bool) {
	var n numberShape
	if !readNumber(t, i, &n) {
		return span{}, false
	}
	for k := n.ng; k > 0; k-- {
		n.prefix(k)
		if n.end > limit || !endsAt(t, n.end) {
			continue
		}
		if r.on.card && isCard(&n) {
			return span{i, n.end, Card}, true
		}
		if r.on.phone && isPhone(&n) {
			return span{i, n.end, Phone}, true
		}
	}
	return span{}, false
}

// isCard: 13 to 19 digits, written whole or in the groups cards print (4 4 4 4, 4 6 5, 4 6 4,
// 4 4 4 4 3) with one separator, a card network's prefix, and Luhn's check digit.
func isCard(n *numberShape) bool {
	d := n.nd
	if n.plus || n.paren || d < 13 || d > 19 || !cardPrefix(n.digits()) || !sameSeps(n.seps(), " -") {
		return false
	}
	if n.ng > 1 && !cardGroups(n.groups()) {
		return false
	}
	return luhn(n.digits())
}

func cardGroups(g []int) bool {
	if len(g) == 3 && g[0] == 4 && g[1] == 6 && (g[2] == 5 || g[2] == 4) {
		return true
	}
	for i, n := range g {
		if n != 4 && !(i == len(g)-1 && n >= 1 && n <= 3) {
			return false
		}
	}
	return len(g) >= 4
}

// cardPrefix: Visa (4), Mastercard (51-55, 22-27), American Express (34, 37), Diners (30, 36, 38),
// Discover and UnionPay (6), JCB (35).
func cardPrefix(d []byte) bool {
	switch d[0] {
	case '4', '6':
		return true
	case '5':
		return d[1] >= '1' && d[1] <= '5'
	case '3':
		return strings.IndexByte("045678", d[1]) >= 0 && !(d[1] == '5' && len(d) < 16)
	case '2':
		return d[1] >= '2' && d[1] <= '7'
	}
	return false
}

func luhn(d []byte) bool {
	sum := 0
	for i := range d {
		v := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// sameSeps reports whether every separator is the same one, among allowed.
func sameSeps(seps []byte, allowed string) bool {
	for _, s := range seps {
		if s != seps[0] || strings.IndexByte(allowed, s) < 0 {
			return false
		}
	}
	return true
}

// isPhone: an international number (+, 8 to 15 digits); a North American one, (415) 555-0132 or
// 415-555-0132 (also after a 1); or a national one with its trunk 0 in groups, 0171 2345678 or
// 030 1234 5678 (9 to 12 digits). Dates, versions, times and ids have other shapes.
func isPhone(n *numberShape) bool {
	d, g := n.nd, n.groups()
	switch {
	case n.plus:
		return d >= 8 && d <= 15 && g[0] <= 4
	case northAmerican(g) && (n.paren || sameSeps(n.seps(), " -.")):
		return true
	case n.paren:
		return false
	}
	return n.d[0] == '0' && len(g) >= 2 && g[0] >= 2 && g[0] <= 5 &&
		d >= 9 && d <= 12 && sameSeps(n.seps(), " -") && !dateLike(g)
}

func northAmerican(g []int) bool {
	if len(g) == 4 && g[0] == 1 {
		g = g[1:]
	}
	return len(g) == 3 && g[0] == 3 && g[1] == 3 && g[2] == 4
}

// dateLike: 2-2-4 and 4-2-2 groups are dates whatever their digits.
func dateLike(g []int) bool {
	return len(g) == 3 && (g[0] == 2 && g[1] == 2 && g[2] == 4 || g[0] == 4 && g[1] == 2 && g[2] == 2)
}

// iban reads an IBAN at i: a country code, two check digits and 11 to 30 letters and digits,
// whole or in groups of four a space apart; the longest reading whose mod-97 check holds. When
// none does, skip is where the IBAN-shaped run ends: its groups are read as nothing else (a
// mistyped IBAN's last groups are not a phone number).
func iban(t string, i int) (end int, ok bool, skip int) {
	var ends []int // where the IBAN could end: after each group
	var chars []byte
	j, group := i, 0
	for j < len(t) && len(chars) < 34 {
		c := t[j]
		switch {
		case isUpper(c) || isDigit(c):
			chars = append(chars, c)
			group++
			j++
			continue
		case c == ' ' && group == 4 && j+1 < len(t) && (isUpper(t[j+1]) || isDigit(t[j+1])):
			ends = append(ends, j)
			group = 0
			j++
			continue
		}
		break
	}
	if j < len(t) && (isAlnum(t[j]) || t[j] == '_' || t[j] >= 0x80) {
		return 0, false, j
	}
	ends = append(ends, j)
	for k := len(ends) - 1; k >= 0; k-- {
		e := ends[k]
		n := ibanLen(t[i:e])
		if n >= 15 && n <= 34 && endsAt(t, e) && mod97(t[i:e]) {
			return e, true, e
		}
	}
	return 0, false, j
}

func ibanLen(s string) int { return len(s) - strings.Count(s, " ") }

// mod97: the IBAN with its first four characters moved to the end, letters as 10..35, is 1
// modulo 97 (ISO 13616).
func mod97(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	r := 0
	for k := range len(s) {
		c := s[(k+4)%len(s)]
		if isDigit(c) {
			r = (r*10 + int(c-'0')) % 97
		} else {
			r = (r*100 + int(c-'A'+10)) % 97
		}
	}
	return r == 1
}
