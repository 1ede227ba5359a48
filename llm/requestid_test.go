package llm

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestOversizedCompletionRequestIDCarriesNoKey: the "larger than 16 MiB" error of a non-streamed
// completion (from Complete, and from Stream when the server ignores stream:true) copies the request
// id header like every other error, and must redact it like them (TestRequestIDNeverCarriesTheKey).
func TestOversizedCompletionRequestIDCarriesNoKey(t *testing.T) {
	big := `{"choices":[{"index":0,"message":{"role":"assistant","content":"` + strings.Repeat("x", maxCompletionBody) + `"}}]}`
	srv := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", testKey)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(big))
	})
	c, _ := newTestClient(t, srv.URL, func(c *Config) { c.MaxRetries = -1 })
	r := collect(t, c.Stream(t.Context(), hello))
	_, err := c.Complete(t.Context(), hello)
	for name, e := range map[string]error{"Stream": r.Err, "Complete": err} {
		le, ok := errors.AsType[*Error](e)
		if !ok {
			t.Fatalf("%s: got %T %v, want *Error", name, e, e)
		}
		if strings.Contains(le.RequestID, testKey[:8]) {
			t.Errorf("%s: %q has request id %q: the key", name, e, le.RequestID)
		}
	}
}
