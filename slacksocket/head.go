package slacksocket

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// head is what the reader reads of a frame before anything else: enough to ack it.
type head struct {
	id     string // envelope_id ("" for hello and disconnect)
	typ    string // type: events_api, slash_commands, interactive, hello, disconnect
	reason string // disconnect's reason
}

var errNotObject = errors.New("not a JSON object")

// readHead reads the top-level "envelope_id", "type" and "reason" of a Socket Mode frame
// without decoding the rest: values are skipped byte by byte (strings, nested objects and
// arrays), so finding the id costs a few microseconds even behind a large payload, and only
// the three strings are allocated. It does not validate what it skips; the consumer's decoding
// does, after the ack. A key appearing twice keeps its last value, as encoding/json does.
func readHead(frame []byte) (head, error) {
	var h head
	i := skipSpace(frame, 0)
	if !at(frame, i, '{') {
		return h, errNotObject
	}
	if i = skipSpace(frame, i+1); at(frame, i, '}') {
		return h, nil
	}
	for {
		key, value, end, err := member(frame, i)
		if err != nil {
			return h, err
		}
		if err := h.set(key, value); err != nil {
			return h, err
		}
		switch i = skipSpace(frame, end); {
		case at(frame, i, '}'):
			return h, nil
		case at(frame, i, ','):
			i = skipSpace(frame, i+1)
		default:
			return h, errNotObject
		}
	}
}

// at reports whether b[i] is c (false past the end).
func at(b []byte, i int, c byte) bool { return i < len(b) && b[i] == c }

// member reads the object member ("key": value) starting at frame[i]. It returns the key as
// written (the keys of interest have no escapes), the value, and the index after the value.
func member(frame []byte, i int) (key, value []byte, end int, err error) {
	if !at(frame, i, '"') {
		return nil, nil, 0, errNotObject
	}
	keyEnd, err := skipString(frame, i)
	if err != nil {
		return nil, nil, 0, err
	}
	key = frame[i+1 : keyEnd-1]
	if i = skipSpace(frame, keyEnd); !at(frame, i, ':') {
		return nil, nil, 0, errNotObject
	}
	i = skipSpace(frame, i+1)
	if end, err = skipValue(frame, i); err != nil {
		return nil, nil, 0, err
	}
	return key, frame[i:end], end, nil
}

// set keeps value when key names a field of the head, and ignores it otherwise.
func (h *head) set(key, value []byte) error {
	var dst *string
	switch string(key) { // no allocation: the compiler compares in place
	case "envelope_id":
		dst = &h.id
	case "type":
		dst = &h.typ
	case "reason":
		dst = &h.reason
	default:
		return nil
	}
	v, err := stringValue(value)
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	*dst = v
	return nil
}

// stringValue is the Go string of a JSON value: a string, or "" for null.
func stringValue(v []byte) (string, error) {
	switch {
	case string(v) == "null":
		return "", nil
	case len(v) < 2 || v[0] != '"':
		return "", errors.New("not a string")
	case bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v):
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at b[i] (a quote).
func skipString(b []byte, i int) (int, error) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errors.New("unterminated string")
}

// skipValue returns the index after the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("missing value")
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated object or array")
	}
	start := i // number, true, false, null
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	if i == start {
		return 0, errors.New("missing value")
	}
	return i, nil
}
