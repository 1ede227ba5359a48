package llm

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// benchChunks is the number of content chunks in the benchmark stream.
const benchChunks = 2000

// realisticStream is an OpenAI-shaped stream as gpt-4o sends it with include_usage:
// role chunk, benchChunks content deltas of one to a few words (with obfuscation padding),
// finish chunk, usage chunk, [DONE]. About 500 KB.
func realisticStream() []byte {
	words := []string{"The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".", "\n\n", " Über", " naïve", " café", " `code`", " **bold**", ` "quoted"`, " 42", " —", " emoji 🦦"}
	var b bytes.Buffer
	head := `data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_fc9f1d7035","choices":[{"index":0,"delta":`
	b.WriteString(head + `{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"r4N7vQ2m"}` + "\n\n")
	for i := range benchChunks {
		fmt.Fprintf(&b, "%s{\"content\":%q},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null,\"obfuscation\":\"%s\"}\n\n",
			head, words[i%len(words)], strings.Repeat("x", i%11))
	}
	b.WriteString(head + `{},"logprobs":null,"finish_reason":"stop"}],"usage":null,"obfuscation":""}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_fc9f1d7035","choices":[],"usage":{"prompt_tokens":1117,"completion_tokens":2001,"total_tokens":3118,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"aQ"}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkStreamDecode decodes a whole realistic stream from memory (no network): SSE
// framing, JSON decoding of every chunk, error checks. Reports MB/s and allocations per chunk.
func BenchmarkStreamDecode(b *testing.B) {
	data := realisticStream()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	r := bytes.NewReader(data)
	var chunks int
	decodeAll := func() {
		r.Reset(data)
		dec := newStreamDecoder(r, nil, nil)
		chunks = 0
		for {
			_, err := dec.next()
			if err == io.EOF {
				return
			}
			if err != nil {
				b.Fatal(err)
			}
			chunks++
		}
	}
	for b.Loop() {
		decodeAll()
	}
	if chunks != benchChunks+2 { // content chunks + finish + usage
		b.Fatalf("%d chunks", chunks)
	}
	b.StopTimer()
	b.ReportMetric(testing.AllocsPerRun(3, decodeAll)/float64(chunks), "allocs/chunk")
}

// TestStreamDecodeAllocations keeps the decoder's per-chunk allocations in check: encoding/json
// into the one reused chunk costs about 9 per content chunk; a change that makes it cost more
// (a fresh chunk per event, a copy of the data) shows here.
func TestStreamDecodeAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count")
	}
	data := realisticStream()
	r := bytes.NewReader(data)
	allocs := testing.AllocsPerRun(3, func() {
		r.Reset(data)
		dec := newStreamDecoder(r, nil, nil)
		for {
			if _, err := dec.next(); err != nil {
				break
			}
		}
	})
	if perChunk := allocs / benchChunks; perChunk > 10 {
		t.Errorf("%.2f allocations per chunk, want at most 10", perChunk)
	}
}
