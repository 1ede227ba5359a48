package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// decoded is what the client takes from one event, for comparing the two decoders.
type decoded struct {
	Delta, Whole Chunk
	Choices      int
	ErrorTruthy  bool
}

func project(w *wireChunk) decoded {
	return decoded{Delta: w.chunk(true), Whole: w.chunk(false), Choices: len(w.Choices), ErrorTruthy: truthy(w.Error)}
}

// slowDecode is the reference: encoding/json, tolerating type mismatches like decode does.
func slowDecode(data []byte) (decoded, error) {
	var w wireChunk
	err := json.Unmarshal(data, &w)
	if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		err = nil
	}
	return project(&w), err
}

// agree checks that when the fast path accepts data, encoding/json accepts it too and reads
// the same values. It reports whether the fast path accepted.
func agree(t *testing.T, data []byte) bool {
	t.Helper()
	var w wireChunk
	if !w.decodeFast(data) {
		return false
	}
	fast := project(&w)
	slow, err := slowDecode(data)
	if err != nil {
		t.Fatalf("fast path accepted what encoding/json rejects (%v): %q", err, data)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("decoders disagree on %q\nfast %+v\nslow %+v", data, fast, slow)
	}
	return true
}

// fixtureEvents returns the JSON of every data: line of the stream fixtures.
func fixtureEvents(t testing.TB) [][]byte {
	names, err := filepath.Glob("testdata/*.sse")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.HasPrefix(data, "{") {
				out = append(out, []byte(data))
			}
		}
	}
	return out
}

func TestFastDecodeAgreesOnFixtures(t *testing.T) {
	events := fixtureEvents(t)
	if len(events) < 100 {
		t.Fatalf("only %d events", len(events))
	}
	for _, ev := range events {
		if !json.Valid(ev) {
			continue // a deliberately broken fixture line
		}
		if !agree(t, ev) {
			t.Errorf("fast path declined a real chunk: %s", ev)
		}
	}
}

func TestFastDecode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   string
		accept bool // false: encoding/json decides
	}{
		{"escapes", `{"choices":[{"delta":{"content":"a\"b\\c\/d\n\t\r\b\fé\u00e9\ud83e\udda6"}}]}`, true},
		{"lone surrogate", `{"choices":[{"delta":{"content":"x\ud83ey\udda6z"}}]}`, true},
		{"content not a string", `{"choices":[{"delta":{"content":[{"type":"text","text":"hi"}],"reasoning":"r"}}]}`, true},
		{"nulls everywhere", `{"choices":null,"usage":null,"x_groq":null,"error":null}`, true},
		{"usage in x_groq", `{"choices":[],"x_groq":{"id":"x","usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"queue_time":0.5}}}`, true},
		{"numbers skipped", `{"created":-1.5e+10,"choices":[{"index":0,"logprobs":{"content":[{"token":"a","logprob":-0.01}]},"delta":{"content":"x"}}]}`, true},
		{"several choices", `{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}}]}`, true},
		{"white space", " \n{ \"choices\" : [ { \"delta\" : { \"content\" : \"x\" } , \"finish_reason\" : \"stop\" } ] } \n", true},
		{"error object", `{"error":{"message":"boom","code":500}}`, true},
		{"repeated usage merges", `{"usage":{"prompt_tokens":1},"choices":[],"usage":{"total_tokens":3}}`, false},
		{"float usage", `{"usage":{"prompt_tokens":1.0}}`, false},
		{"escaped key", `{"choi\u0063es":[{"delta":{"content":"x"}}]}`, false},
		{"invalid utf-8", "{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}", false},
		{"trailing garbage", `{"choices":[]}x`, false},
		{"truncated", `{"choices":[{"delta":{"content":"Hel`, false},
		{"bad escape", `{"id":"\x","choices":[]}`, false},
		{"leading zero", `{"created":012,"choices":[]}`, false},
		{"not an object", `[1,2]`, false},
		{"deep", `{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := agree(t, []byte(tc.data)); got != tc.accept {
				t.Errorf("fast path accepted = %v, want %v", got, tc.accept)
			}
			// Whatever path is taken, decode gives what encoding/json gives.
			var w wireChunk
			err := w.decode([]byte(tc.data))
			slow, slowErr := slowDecode([]byte(tc.data))
			if (err == nil) != (slowErr == nil) || (err == nil && !reflect.DeepEqual(project(&w), slow)) {
				t.Errorf("decode = %+v, %v; encoding/json = %+v, %v", project(&w), err, slow, slowErr)
			}
		})
	}
}

// FuzzFastDecode: the fast path never accepts what encoding/json rejects, and never reads
// differently. Run with: go test -fuzz FuzzFastDecode ./llm
func FuzzFastDecode(f *testing.F) {
	for _, ev := range fixtureEvents(f) {
		f.Add(ev)
	}
	f.Add([]byte(`{"choices":[{"delta":{"content":"\ud83e\udda6 \u00e9"}}],"usage":{"total_tokens":3}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		agree(t, data)
	})
}

// FuzzStreamDecoder: any body ends in io.EOF or an error, never a panic or a loop, and
// reading it in small pieces changes nothing. Run with: go test -fuzz FuzzStreamDecoder ./llm
func FuzzStreamDecoder(f *testing.F) {
	names, _ := filepath.Glob("testdata/*.sse")
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"object\":1,\"error\":\"boom\"}\n\n")) // once a nil *Error (a panic)
	f.Fuzz(func(t *testing.T, body []byte) {
		decodeAll := func(r io.Reader) (n int, last string) {
			dec := newStreamDecoder(r, nil, nil)
			for i := 0; ; i++ {
				if i > len(body)+2 {
					t.Fatalf("more chunks than bytes: %q", body)
				}
				_, err := dec.next()
				if err != nil {
					return i, err.Error()
				}
			}
		}
		n1, e1 := decodeAll(bytes.NewReader(body))
		n2, e2 := decodeAll(iotest.OneByteReader(bytes.NewReader(body)))
		if n1 != n2 || e1 != e2 {
			t.Fatalf("whole: %d chunks, %s; one byte at a time: %d, %s\n%q", n1, e1, n2, e2, body)
		}
	})
}
