package llm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

const truncatedMsg = "the stream ended without [DONE] or a finish reason"

// streamFixtures: one per stream variant of openai-wire.md §3.1/§3.2, each served by a fake
// server with its Content-Type (by extension) to Client.Stream. A fixture is named after the
// server the reference attributes the variant to (openai_, azure_, ollama_, vllm_, llamacpp_
// old and new, litellm_, openrouter_, lmstudio_, groq_, deepseek_); sse_ fixtures are wire
// variants the reference attributes to no particular server (WHATWG framing edge cases, an
// error string, "error": null), and proxy_ fixtures are what gateways and proxies in front of
// any server send. An .sse fixture starts with a comment saying what it imitates and where
// that is from (proxy_empty_200.sse is an empty body; sse_bom.sse starts with its BOM).
var streamFixtures = []struct {
	fixture string
	want    streamResult
}{
	{"openai_basic.sse", streamResult{Content: "Hello world", Finish: "stop", Usage: &Usage{9, 2, 11}}},
	{"openai_refusal.sse", streamResult{Refusal: "I'm sorry, I can't help with that.", Finish: "stop"}},
	{"openai_midstream_error.sse", streamResult{Content: "Hello wor", Err: &Error{Kind: KindServer, Status: 200,
		Type: "server_error", Message: "The server had an error while processing your request. Sorry about that!"}}},
	{"openai_error_then_done.sse", streamResult{Content: "Hello", Err: &Error{Kind: KindServer, Status: 200,
		Type: "server_error", Code: "server_error", Message: "upstream boom"}}},
	{"azure_first_chunk_empty.sse", streamResult{Content: "Hello world", Finish: "stop"}},
	{"azure_content_filter_finish.sse", streamResult{Content: "I can", Finish: "content_filter"}},
	{"ollama_reasoning.sse", streamResult{Content: "Hello world", Reasoning: "Let me think. Briefly.", Finish: "stop", Usage: &Usage{12, 6, 18}}},
	{"ollama_midstream_error.sse", streamResult{Content: "Hel", Err: &Error{Kind: KindTruncated, Status: 200, Message: truncatedMsg}}},
	{"vllm_reasoning_usage_choices_null.sse", streamResult{Content: "Hello world", Reasoning: "Plan: greet.", Finish: "stop", Usage: &Usage{20, 5, 25}}},
	{"vllm_midstream_error.sse", streamResult{Content: "Hello", Err: &Error{Kind: KindServer, Status: 200,
		Type: "InternalServerError", Code: "500", Message: "Internal server error"}}},
	{"llamacpp_new.sse", streamResult{Content: "Hello world", Reasoning: "Hmm.", Finish: "length", Usage: &Usage{14, 3, 17}}},
	{"llamacpp_midstream_error.sse", streamResult{Content: "Hello", Err: &Error{Kind: KindServer, Status: 200,
		Type: "server_error", Code: "500", Message: "slot unavailable"}}},
	{"llamacpp_old_error_line.sse", streamResult{Content: "Hel", Err: &Error{Kind: KindServer, Status: 200,
		Type: "server_error", Code: "500", Message: "Compute error during generation"}}},
	{"litellm_reasoning_content.sse", streamResult{Content: "Hello world", Reasoning: "Thinking.", Finish: "stop"}},
	{"openrouter_processing_comments.sse", streamResult{Content: "Hello world", Finish: "stop", Usage: &Usage{9, 2, 11}}},
	{"openrouter_midstream_error.sse", streamResult{Content: "Hello", Err: &Error{Kind: KindServer, Status: 200,
		Code: "server_error", Message: "Provider disconnected unexpectedly"}}},
	{"openrouter_finish_reason_error.sse", streamResult{Content: "Hello wor", Err: &Error{Kind: KindServer, Status: 200,
		Message: `the server ended the answer with finish_reason "error"`}}},
	{"openrouter_reasoning.sse", streamResult{Content: "Hello world", Reasoning: "Weighing options.", Finish: "stop"}},
	{"groq_x_groq.sse", streamResult{Content: "Hello world", Finish: "stop", Usage: &Usage{40, 2, 42}}},
	{"lmstudio_midstream_error.sse", streamResult{Content: "Hel", Err: &Error{Kind: KindServer, Status: 200, Message: "Compute error."}}},
	{"lmstudio_context_overflow.sse", streamResult{Content: "Hello wor", Err: &Error{Kind: KindTruncated, Status: 200, Message: truncatedMsg}}},
	{"deepseek_reasoning_content.sse", streamResult{Content: "Hello world", Reasoning: "First, greet.", Finish: "stop", Usage: &Usage{10, 8, 18}}},
	{"sse_crlf.sse", streamResult{Content: "Hello world", Finish: "stop"}},
	{"sse_cr_only.sse", streamResult{Content: "Hello world", Finish: "stop"}},
	{"sse_data_no_space.sse", streamResult{Content: "Hello world", Finish: "stop"}},
	{"sse_multiline_data.sse", streamResult{Content: "Hello world", Finish: "stop"}},
	{"sse_final_event_no_blank_line.sse", streamResult{Content: "Hello world", Finish: "stop"}},
	{"sse_final_event_no_finish.sse", streamResult{Content: "Hello world", Err: &Error{Kind: KindTruncated, Status: 200, Message: truncatedMsg}}},
	{"sse_final_partial_event.sse", streamResult{Content: "Hello", Err: &Error{Kind: KindTruncated, Status: 200, Message: truncatedMsg}}},
	{"sse_empty_data_frame.sse", streamResult{Content: "Hello world", Finish: "stop"}},
	{"sse_event_error.sse", streamResult{Content: "Hello", Err: &Error{Kind: KindServer, Status: 200, Type: "overloaded_error", Message: "Overloaded"}}},
	{"sse_error_string.sse", streamResult{Content: "Hello", Err: &Error{Kind: KindServer, Status: 200, Message: "STREAM_EXPLODED"}}},
	{"sse_error_null.sse", streamResult{Content: "Hello world", Finish: "stop"}},
	{"sse_bom.sse", streamResult{Content: "Hello world", Finish: "stop", Usage: &Usage{9, 2, 11}}},
	{"proxy_raw_json_error.sse", streamResult{Content: "Hello", Err: &Error{Kind: KindServer, Status: 200,
		Type: "proxy_error", Code: "504", Message: "upstream timed out"}}},
	{"proxy_empty_200.sse", streamResult{Err: &Error{Kind: KindTruncated, Status: 200, Message: truncatedMsg}}},
	{"proxy_captive_portal_200.html", streamResult{Err: &Error{Kind: KindInvalid, Status: 200,
		Message: "the service answered with a web page, not the API (check the base URL): Sign in to Wi-Fi"}}},
	{"proxy_ignores_stream.json", streamResult{Content: "Hello world", Finish: "stop", Usage: &Usage{1117, 46, 1163}}},
	{"proxy_json_as_text_plain.txt", streamResult{Content: "Hello world", Finish: "stop", Usage: &Usage{1117, 46, 1163}}},
}

func TestStreamFixtures(t *testing.T) {
	for _, tc := range streamFixtures {
		t.Run(tc.fixture, func(t *testing.T) {
			body := readFixture(t, tc.fixture)
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", contentType(tc.fixture))
				w.Write(body)
			})
			c, _ := newTestClient(t, srv.URL, nil)
			got := collect(t, c.Stream(t.Context(), hello))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %s\nwant %s", show(got), show(tc.want))
			}
			reqs := srv.got()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			if got, want := reqs[0].Body["stream"], true; got != want {
				t.Errorf("stream = %v, want %v", got, want)
			}
		})
	}
}

// TestCompleteCollectsStream: Complete gives the same answer from a server that streams
// although stream:false was asked, and from one that answers JSON.
func TestCompleteFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		want    Completion
	}{
		{"proxy_ignores_stream.json", Completion{Content: "Hello world", FinishReason: "stop", Usage: &Usage{1117, 46, 1163}}},
		{"proxy_json_as_text_plain.txt", Completion{Content: "Hello world", FinishReason: "stop", Usage: &Usage{1117, 46, 1163}}},
		{"openai_basic.sse", Completion{Content: "Hello world", FinishReason: "stop", Usage: &Usage{9, 2, 11}}},
		{"deepseek_reasoning_content.sse", Completion{Content: "Hello world", Reasoning: "First, greet.", FinishReason: "stop", Usage: &Usage{10, 8, 18}}},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			body := readFixture(t, tc.fixture)
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", contentType(tc.fixture))
				w.Write(body)
			})
			c, _ := newTestClient(t, srv.URL, nil)
			got, err := c.Complete(t.Context(), hello)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if got, want := srv.got()[0].Body["stream"], false; got != want {
				t.Errorf("stream = %v, want %v", got, want)
			}
		})
	}
}

func show(r streamResult) string {
	return fmt.Sprintf("{Content:%q Reasoning:%q Refusal:%q Finish:%q Usage:%+v Calls:%+v Err:%+v}",
		r.Content, r.Reasoning, r.Refusal, r.Finish, r.Usage, r.Calls, r.Err)
}

// TestFixtureChunksMatchSpec: the chunks of the fixtures that imitate OpenAI itself are valid
// CreateChatCompletionStreamResponse values, so the fixtures are faithful.
func TestFixtureChunksMatchSpec(t *testing.T) {
	skipWithoutSchema(t)
	for _, name := range []string{"openai_basic.sse", "openai_refusal.sse", // not azure_first_chunk_empty.sse: its object is "", off spec

		"azure_content_filter_finish.sse", "groq_x_groq.sse", "sse_crlf.sse"} {
		t.Run(name, func(t *testing.T) {
			sc := bufio.NewScanner(bytes.NewReader(readFixture(t, name)))
			n := 0
			for sc.Scan() {
				data, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				n++
				if err := validateJSON(t, "CreateChatCompletionStreamResponse", []byte(data)); err != nil {
					t.Errorf("chunk %d: %v\n%s", n, err, data)
				}
			}
			if n == 0 {
				t.Fatal("no chunks")
			}
		})
	}
	t.Run("proxy_ignores_stream.json", func(t *testing.T) {
		if err := validateJSON(t, "CreateChatCompletionResponse", readFixture(t, "proxy_ignores_stream.json")); err != nil {
			t.Error(err)
		}
	})
}

// TestDecoderReadSizes: every stream fixture decodes the same when the body arrives one byte
// at a time (line ends, CRLF and lone CR split across reads) as when it arrives whole.
func TestDecoderReadSizes(t *testing.T) {
	names, err := filepath.Glob("testdata/*.sse")
	if err != nil || len(names) == 0 {
		t.Fatal(names, err)
	}
	decodeAll := func(r io.Reader) (chunks []Chunk, last error) {
		dec := newStreamDecoder(r, nil, nil)
		for {
			c, err := dec.next()
			if err != nil {
				return chunks, err
			}
			chunks = append(chunks, c)
		}
	}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		whole, wholeErr := decodeAll(bytes.NewReader(data))
		for _, r := range []io.Reader{iotest.OneByteReader(bytes.NewReader(data)), iotest.HalfReader(bytes.NewReader(data))} {
			got, gotErr := decodeAll(r)
			if !reflect.DeepEqual(got, whole) || fmt.Sprint(gotErr) != fmt.Sprint(wholeErr) {
				t.Errorf("%s: small reads give %d chunks, %v; whole body %d chunks, %v", name, len(got), gotErr, len(whole), wholeErr)
			}
		}
	}
}

func TestLineReader(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"a\nb\n", []string{"a", "b"}},
		{"a\r\nb\r\n\r\n", []string{"a", "b", ""}},
		{"a\rb\r\rc", []string{"a", "b", "", "c"}},
		{"a\r\n\rb", []string{"a", "", "b"}},
		{"a\n\r\n\n", []string{"a", "", ""}},
		{"no end", []string{"no end"}},
		{"", nil},
	} {
		for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
			l := newLineReader(r)
			var got []string
			for {
				line, err := l.line()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, string(line))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
			}
		}
	}
}

func TestLineTooLong(t *testing.T) {
	r := io.MultiReader(strings.NewReader("data: "), bytes.NewReader(make([]byte, maxLineBuffer+1)))
	_, err := newStreamDecoder(r, nil, nil).next()
	if KindOf(err) != KindInvalid {
		t.Errorf("got %v, want an invalid-answer error", err)
	}
}

// TestCompleteStreamFailures: Complete reports the errors of a stream it did not ask for.
func TestCompleteStreamFailures(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		kind    Kind
	}{
		{"lmstudio_context_overflow.sse", KindTruncated},
		{"openai_midstream_error.sse", KindServer},
		{"llamacpp_old_error_line.sse", KindServer},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			body := readFixture(t, tc.fixture)
			srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Write(body)
			})
			c, _ := newTestClient(t, srv.URL, nil)
			comp, err := c.Complete(t.Context(), hello)
			if KindOf(err) != tc.kind || !reflect.DeepEqual(comp, Completion{}) {
				t.Errorf("got %+v, %v; want kind %q", comp, err, tc.kind)
			}
		})
	}
}
