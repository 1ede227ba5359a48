package llm

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is the fast path of wireChunk.decode: a small JSON walker that reads the few
// fields of a chat chunk and skips the rest without allocating, so a content chunk costs one
// allocation (its text). Anything it is not sure about (invalid UTF-8, escaped keys, floats
// where ints are expected, deep nesting, malformed JSON) makes it give up, and
// encoding/json decodes the event instead: the two must agree (see fastjson_test.go).

const maxFastDepth = 32

// jsonWalk is a cursor over one JSON document.
type jsonWalk struct {
	b       []byte
	i       int
	depth   int
	scratch *[]byte // reused buffer for unescaping strings
}

// decodeFast fills w from data. It reports false when the slow path must decide.
func (w *wireChunk) decodeFast(data []byte) bool {
	w.reset()
	j := jsonWalk{b: data, scratch: &w.scratch}
	j.space()
	var seen [3]bool // a repeated key would merge differently from encoding/json: let it decide
	once := func(i int) bool {
		dup := seen[i]
		seen[i] = true
		return !dup
	}
	ok := j.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return once(0) && j.choices(w)
		case "usage":
			return once(1) && j.usage(&w.Usage)
		case "x_groq":
			if !once(2) {
				return false
			}
			if j.null() {
				return true
			}
			w.XGroq = &struct {
				Usage *wireUsage `json:"usage"`
			}{}
			return j.object(func(key []byte) bool {
				if string(key) == "usage" {
					return j.usage(&w.XGroq.Usage)
				}
				return !folds(key, "usage") && j.skip()
			})
		case "error":
			start := j.i
			if !j.skip() {
				return false
			}
			w.Error = append(w.Error[:0], j.b[start:j.i]...)
			return true
		}
		return !folds(key, "choices", "usage", "x_groq", "error") && j.skip()
	})
	j.space()
	return ok && j.i == len(j.b)
}

func (j *jsonWalk) choices(w *wireChunk) bool {
	w.Choices = w.Choices[:0]
	if j.null() {
		return true
	}
	return j.array(func() bool {
		w.Choices = append(w.Choices, wireChoice{})
		ch := &w.Choices[len(w.Choices)-1]
		return j.object(func(key []byte) bool {
			switch string(key) {
			case "delta":
				return j.delta(&ch.Delta)
			case "message":
				return j.delta(&ch.Message)
			case "finish_reason":
				return j.str(&ch.FinishReason)
			}
			return !folds(key, "delta", "message", "finish_reason") && j.skip()
		})
	})
}

func (j *jsonWalk) delta(d *wireDelta) bool {
	if j.null() {
		return true
	}
	return j.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			return j.str(&d.Content)
		case "reasoning_content":
			return j.str(&d.ReasoningContent)
		case "reasoning":
			return j.str(&d.Reasoning)
		case "refusal":
			return j.str(&d.Refusal)
		case "tool_calls":
			// null or [] (some servers send them on every chunk) pass; calls go to encoding/json,
			// which the assembler's fragments need whole.
			return j.null() || j.literal("[]")
		}
		return !folds(key, "content", "reasoning_content", "reasoning", "refusal", "tool_calls") && j.skip()
	})
}

func (j *jsonWalk) usage(dst **wireUsage) bool {
	if j.null() {
		*dst = nil
		return true
	}
	u := *dst
	if u == nil { // like encoding/json, a repeated "usage" merges into the first
		u = &wireUsage{}
		*dst = u
	}
	return j.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return j.int(&u.PromptTokens)
		case "completion_tokens":
			return j.int(&u.CompletionTokens)
		case "total_tokens":
			return j.int(&u.TotalTokens)
		}
		return !folds(key, "prompt_tokens", "completion_tokens", "total_tokens") && j.skip()
	})
}

// folds reports whether key matches one of names only case-insensitively: encoding/json
// would use it for that field, so the fast path must not skip it.
func folds(key []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(key, []byte(n)) {
			return true
		}
	}
	return false
}

func (j *jsonWalk) space() {
	for j.i < len(j.b) {
		switch j.b[j.i] {
		case ' ', '\t', '\n', '\r':
			j.i++
		default:
			return
		}
	}
}

// null consumes a null literal if one is next.
func (j *jsonWalk) null() bool {
	if j.i+4 <= len(j.b) && string(j.b[j.i:j.i+4]) == "null" {
		j.i += 4
		return true
	}
	return false
}

// object walks {"key": value, ...}, calling member with the cursor on each value.
func (j *jsonWalk) object(member func(key []byte) bool) bool {
	if j.i >= len(j.b) || j.b[j.i] != '{' || j.depth >= maxFastDepth {
		return false
	}
	j.depth++
	j.i++
	j.space()
	if j.i < len(j.b) && j.b[j.i] == '}' {
		j.i++
		j.depth--
		return true
	}
	for {
		j.space()
		key, ok := j.key()
		if !ok {
			return false
		}
		j.space()
		if j.i >= len(j.b) || j.b[j.i] != ':' {
			return false
		}
		j.i++
		j.space()
		if !member(key) {
			return false
		}
		j.space()
		if j.i >= len(j.b) {
			return false
		}
		switch j.b[j.i] {
		case ',':
			j.i++
		case '}':
			j.i++
			j.depth--
			return true
		default:
			return false
		}
	}
}

// array walks [value, ...], calling elem with the cursor on each value.
func (j *jsonWalk) array(elem func() bool) bool {
	if j.i >= len(j.b) || j.b[j.i] != '[' || j.depth >= maxFastDepth {
		return false
	}
	j.depth++
	j.i++
	j.space()
	if j.i < len(j.b) && j.b[j.i] == ']' {
		j.i++
		j.depth--
		return true
	}
	for {
		j.space()
		if !elem() {
			return false
		}
		j.space()
		if j.i >= len(j.b) {
			return false
		}
		switch j.b[j.i] {
		case ',':
			j.i++
		case ']':
			j.i++
			j.depth--
			return true
		default:
			return false
		}
	}
}

// key reads an object key without escapes (keys with escapes go to the slow path).
func (j *jsonWalk) key() ([]byte, bool) {
	end, escaped, ok := j.stringEnd()
	if !ok || escaped {
		return nil, false
	}
	k := j.b[j.i+1 : end]
	j.i = end + 1
	return k, true
}

// stringEnd finds the closing quote of the string at the cursor.
func (j *jsonWalk) stringEnd() (end int, escaped, ok bool) {
	if j.i >= len(j.b) || j.b[j.i] != '"' {
		return 0, false, false
	}
	for i := j.i + 1; i < len(j.b); i++ {
		switch c := j.b[i]; {
		case c == '"':
			return i, escaped, true
		case c == '\\':
			escaped = true
			i++
			if i >= len(j.b) {
				return 0, false, false
			}
			switch j.b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := hex4(j.b[i+1:]); !ok {
					return 0, false, false
				}
				i += 4
			default:
				return 0, false, false
			}
		case c < 0x20:
			return 0, false, false
		}
	}
	return 0, false, false
}

// str reads a string value into dst; null leaves dst empty, and another type of value is
// skipped (encoding/json leaves the field empty too).
func (j *jsonWalk) str(dst *string) bool {
	if j.i < len(j.b) && j.b[j.i] != '"' {
		return j.skip()
	}
	end, escaped, ok := j.stringEnd()
	if !ok {
		return false
	}
	raw := j.b[j.i+1 : end]
	if !utf8.Valid(raw) { // encoding/json replaces invalid bytes; let it
		return false
	}
	j.i = end + 1
	if !escaped {
		*dst = string(raw)
		return true
	}
	buf, ok := unescape((*j.scratch)[:0], raw)
	*j.scratch = buf
	if ok {
		*dst = string(buf)
	}
	return ok
}

// unescape appends the JSON string body raw, unescaped, to buf, as encoding/json does
// (a lone surrogate becomes U+FFFD).
func unescape(buf, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			buf = append(buf, c)
			continue
		}
		i++
		if i >= len(raw) {
			return buf, false
		}
		switch raw[i] {
		case '"', '\\', '/':
			buf = append(buf, raw[i])
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(raw[i+1:])
			if !ok {
				return buf, false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					r2, ok = hex4(raw[i+3:])
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return buf, false
		}
	}
	return buf, true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// int reads a small integer; null leaves dst at 0. Anything else goes to the slow path.
func (j *jsonWalk) int(dst *int) bool {
	if j.null() {
		return true
	}
	neg := j.i < len(j.b) && j.b[j.i] == '-'
	if neg {
		j.i++
	}
	start, n := j.i, 0
	for j.i < len(j.b) && '0' <= j.b[j.i] && j.b[j.i] <= '9' && j.i-start < 15 {
		n = n*10 + int(j.b[j.i]-'0')
		j.i++
	}
	if j.i == start || (j.b[start] == '0' && j.i-start > 1) {
		return false
	}
	if j.i < len(j.b) {
		switch j.b[j.i] {
		case '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return false
		}
	}
	if neg {
		n = -n
	}
	*dst = n
	return true
}

// skip passes over one value of any type, checking its syntax.
func (j *jsonWalk) skip() bool {
	if j.i >= len(j.b) {
		return false
	}
	switch c := j.b[j.i]; {
	case c == '{':
		return j.object(func([]byte) bool { return j.skip() })
	case c == '[':
		return j.array(j.skip)
	case c == '"':
		end, _, ok := j.stringEnd()
		j.i = end + 1
		return ok
	case c == 't':
		return j.literal("true")
	case c == 'f':
		return j.literal("false")
	case c == 'n':
		return j.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return j.number()
	}
	return false
}

func (j *jsonWalk) literal(s string) bool {
	if j.i+len(s) <= len(j.b) && string(j.b[j.i:j.i+len(s)]) == s {
		j.i += len(s)
		return true
	}
	return false
}

// number passes over a JSON number (-?int frac? exp?).
func (j *jsonWalk) number() bool {
	if j.b[j.i] == '-' {
		j.i++
	}
	digits := func() int {
		start := j.i
		for j.i < len(j.b) && '0' <= j.b[j.i] && j.b[j.i] <= '9' {
			j.i++
		}
		return j.i - start
	}
	first := j.i
	n := digits()
	if n == 0 || (n > 1 && j.b[first] == '0') {
		return false
	}
	if j.i < len(j.b) && j.b[j.i] == '.' {
		j.i++
		if digits() == 0 {
			return false
		}
	}
	if j.i < len(j.b) && (j.b[j.i] == 'e' || j.b[j.i] == 'E') {
		j.i++
		if j.i < len(j.b) && (j.b[j.i] == '+' || j.b[j.i] == '-') {
			j.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
