package bot

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// leaseCounter is a replica set of one that counts the takings of each thread's lease.
type leaseCounter struct {
	alone
	mu     sync.Mutex
	leases map[string]int
}

func (l *leaseCounter) Self() string { return "me" }

func (l *leaseCounter) Lease(_ context.Context, key string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leases[key]++
	return "me", nil
}

func (l *leaseCounter) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leases[key]
}

// An answer that runs long (tools, approvals) renews its thread's lease while it runs, so the
// lease's TTL never ends it; once the answer is done the renewals stop.
func TestLongAnswerRenewsItsThreadLease(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r, started, release := holdingReplier("one", 1)
	shared := &leaseCounter{leases: map[string]int{}}
	h := startBot(t, fs, r, nil, Options{Replicas: Replicas{Leases: shared}, leaseRenew: 20 * time.Millisecond})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "the answer", started)
	const key = "thread:D1/"
	h.waitFor(t, "renewals of the lease", func() bool { return shared.count(key) >= 4 }) // taken, then renewed
	close(release)
	h.waitFor(t, "the answer done", func() bool { return h.bot.replies.Load() == 0 })
	after := shared.count(key)
	time.Sleep(100 * time.Millisecond)
	if got := shared.count(key); got != after {
		t.Errorf("the lease was taken %d more times after the answer ended; want none", got-after)
	}
}
