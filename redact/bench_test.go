package redact

import (
	"strings"
	"testing"
)

// thread50KB is 50 KB of a support thread: prose, numbers of every look-alike shape, and a
// value to redact every few lines.
func thread50KB() string {
	lines := []string{
		"Hi team, the customer jane.doe@example.com says the 2026-12-02 invoice is wrong.",
		"Release v1.24.3 went out at 12:30 to 10.0.0.12; order #4000123412341235 failed.",
		"Please call her back on +44 20 7946 0958 before Friday, or (415) 555-0132.",
		"She paid with 4111 1111 1111 1111 and the refund goes to DE89 3704 0044 0532 0130 00.",
		"Stack trace: at com.example.Billing.charge(Billing.java:412) caused by timeout after 30000 ms.",
		"The deploy used token xoxb-1234567890-0987654321-AbCdEfGhIjKl by mistake, rotate it.",
		"Ticket ORD-77812, commit 3f786850e387550fdab836ed7e6dc881de23001b, build 20261202.4.",
		"Totals: 1,234,567.89 EUR across 1532 orders; median 42.50 EUR; p99 latency 812 ms.",
	}
	var b strings.Builder
	for b.Len() < 50<<10 {
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()[:50<<10]
}

// BenchmarkRedact50KB: one request's 50 KB through every built-in kind (docs/benchmarks.md).
func BenchmarkRedact50KB(b *testing.B) {
	r, err := New(Kinds, nil)
	if err != nil {
		b.Fatal(err)
	}
	text := thread50KB()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		r.Session().Text(text)
	}
}
