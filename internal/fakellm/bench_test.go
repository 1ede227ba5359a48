package fakellm_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/internal/fakellm"
)

// BenchmarkStream400 measures serving a 400-token stream without pacing: the fake's cost
// per streamed answer in the load benchmark.
func BenchmarkStream400(b *testing.B) {
	srv := fakellm.New()
	defer srv.Close()
	reply := fakellm.Text(fakellm.Answer(400, 1))
	srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return reply })
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(streamBody))
		req.Header.Set("Authorization", "Bearer "+fakellm.DefaultAPIKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.ReportMetric(float64(len(reply.Tokens)), "tokens/op")
}
