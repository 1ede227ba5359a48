package bot

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
)

// BenchmarkEnvelopeAck measures the ack path end to end: the fake Slack writes a message.im
// envelope on a real WebSocket, the loop acks, dedupes, routes and starts a (no-op) reply.
// One envelope at a time (each waits for its ack), so the latency is not queueing; ns/op is
// the round trip. It reports the ack latency seen by the fake (envelope written -> ack read).
//
//	go test ./bot -run '^$' -bench EnvelopeAck -benchtime 2000x
func BenchmarkEnvelopeAck(b *testing.B) {
	benchAcks(b, 1)
}

// BenchmarkEnvelopeAckBurst sends envelopes in bursts of 200 (as when 200 people ask at once)
// and reports the ack latency including the wait behind the burst.
func BenchmarkEnvelopeAckBurst(b *testing.B) {
	benchAcks(b, 200)
}

func benchAcks(b *testing.B, burst int) {
	fs := newFakeSlack(b, fakeslack.Config{})
	r := &fakeReplier{fn: func(context.Context, route.ReplyRequest) error { return handlers.ErrIgnored }}
	startBot(b, fs, r, nil, Options{MaxConcurrent: 1000})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += burst {
		n := min(burst, b.N-i)
		for range n {
			fs.PostUserMessage("D1", "U1", "", "hello")
		}
		if err := fs.WaitFor(ctx, func() bool { return fs.Stats().Acks >= i+n }); err != nil {
			b.Fatalf("waiting for acks: %v", err)
		}
	}
	b.StopTimer()
	acks := fs.Acks()
	lat := make([]time.Duration, 0, len(acks))
	for _, a := range acks {
		lat = append(lat, a.Latency)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "ack-p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "ack-p99-µs")
}

// BenchmarkSeen measures the dedupe cache at its bound (20,000 keys, oldest evicted).
func BenchmarkSeen(b *testing.B) {
	s := newSeen(15*time.Minute, 20000)
	now := time.Now()
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "Ev" + time.Duration(i).String()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		s.add(keys[i&(len(keys)-1)], now)
	}
	if s.len() > 20000 {
		b.Fatalf("%d keys kept, bound is 20000", s.len())
	}
}
