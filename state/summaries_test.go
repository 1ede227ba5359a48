package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/internal/redistest"
)

// summaryStore is what the three thread stores keep of the long threads' summaries.
type summaryStore interface {
	PutSummary(ctx context.Context, key string, data []byte) error
	LoadSummary(ctx context.Context, key string, maxBytes int) ([]byte, bool, error)
}

func TestThreadSummaries(t *testing.T) {
	for _, b := range threadBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			newStores := b.setup(t)
			lim := testThreadLimits
			lim.TTL = 300 * time.Millisecond
			stores := newStores(t, lim)
			s := stores().(summaryStore)
			ctx := context.Background()
			if _, ok, err := s.LoadSummary(ctx, "C1/1.0", 100); ok || err != nil {
				t.Fatalf("a summary never put: ok %v, err %v", ok, err)
			}
			check(t, s.PutSummary(ctx, "C1/1.0", []byte("first")))
			check(t, s.PutSummary(ctx, "C1/1.0", []byte("second")))
			got, ok, err := s.LoadSummary(ctx, "C1/1.0", 100)
			if !ok || err != nil || string(got) != "second" {
				t.Fatalf("LoadSummary = %q, %v, %v; want the last put", got, ok, err)
			}
			if _, ok, _ := s.LoadSummary(ctx, "C1/1.0", 5); ok {
				t.Error("a summary over the reader's bound was read")
			}
			if b.shared { // another replica sees it
				if got, ok, _ := stores().(summaryStore).LoadSummary(ctx, "C1/1.0", 100); !ok || string(got) != "second" {
					t.Errorf("the other replica reads %q, %v", got, ok)
				}
			}
			// A thread's entry begun afresh (a read) keeps its summary.
			ts := stores()
			_, err = ts.Begin(ctx, "C1/1.0", "1.0", "g", false)
			check(t, err)
			if _, ok, _ := s.LoadSummary(ctx, "C1/1.0", 100); !ok {
				t.Error("a read of the thread dropped its summary")
			}
			if err := s.PutSummary(ctx, "C1/2.0", bytes.Repeat([]byte("x"), MaxSummaryBytes+1)); !errors.Is(err, ErrSummaryTooLarge) {
				t.Errorf("a summary over MaxSummaryBytes: %v", err)
			}
			time.Sleep(lim.TTL + 50*time.Millisecond)
			if _, ok, _ := s.LoadSummary(ctx, "C1/1.0", 100); ok {
				t.Error("a summary outlived the TTL")
			}
		})
	}
}

func TestThreadSummariesBounded(t *testing.T) {
	for _, b := range threadBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.setup(t)(t, testThreadLimits)().(summaryStore)
			ctx := context.Background()
			for i := range MaxSummaries + 10 {
				check(t, s.PutSummary(ctx, fmt.Sprintf("C1/%d.0", i), []byte("s")))
			}
			held := 0
			for i := range MaxSummaries + 10 {
				if _, ok, _ := s.LoadSummary(ctx, fmt.Sprintf("C1/%d.0", i), 10); ok {
					held++
				}
			}
			if held != MaxSummaries {
				t.Errorf("%d summaries held, want %d", held, MaxSummaries)
			}
			if _, ok, _ := s.LoadSummary(ctx, fmt.Sprintf("C1/%d.0", MaxSummaries+9), 10); !ok {
				t.Error("the newest summary was dropped")
			}
		})
	}
}

// TestFallbackSummariesThroughAnOutage: while Redis cannot be reached, no summary is held (the
// answers make one, and nothing fails); once it is back, the one kept before is read again.
func TestFallbackSummariesThroughAnOutage(t *testing.T) {
	ctx := t.Context()
	srv := redistest.New(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	f := NewFallback(newTestRedis(t, proxy.URL(), "t:", "r"), newTestMemory(t, "r", ""), zap.NewNop(), FallbackHooks{})
	f.timeout = 200 * time.Millisecond
	s, err := f.Threads(testThreadLimits)
	check(t, err)
	check(t, s.PutSummary(ctx, "C1/1.0", []byte("kept")))
	proxy.Cut()
	for range 2 {
		if _, ok, err := s.LoadSummary(ctx, "C1/1.0", 100); ok || err != nil {
			t.Fatalf("LoadSummary while Redis is away = %v, %v; want none, no error", ok, err)
		}
		check(t, s.PutSummary(ctx, "C1/1.0", []byte("made meanwhile")))
	}
	if !f.Degraded() {
		t.Fatal("not degraded after failed calls")
	}
	proxy.Restore()
	if !f.probe(ctx) {
		t.Fatal("the probe failed once Redis was back")
	}
	if got, ok, err := s.LoadSummary(ctx, "C1/1.0", 100); !ok || err != nil || string(got) != "kept" {
		t.Errorf("LoadSummary once Redis is back = %q, %v, %v; want the one kept before", got, ok, err)
	}
}
