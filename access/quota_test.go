package access_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/access"
)

// sleepUntil advances the bubble's fake clock to t (UTC).
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

func TestQuotaDailyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// synctest's clock starts at 2000-01-01 00:00 UTC; start the day at 14:20.
		day := time.Now().UTC().Truncate(24 * time.Hour)
		sleepUntil(day.Add(14*time.Hour + 20*time.Minute))

		q := access.NewQuota(3, 0)
		for i := range 3 {
			if d, _ := q.Take("U0ALICE"); !d.Allowed {
				t.Fatalf("picture %d refused: %+v", i+1, d)
			}
		}
		if got := q.Remaining("U0ALICE"); got != 0 {
			t.Errorf("Remaining after 3 of 3 = %d, want 0", got)
		}
		d, _ := q.Take("U0ALICE")
		want := "You've made your 3 /imagine pictures for today. You can make more in 9h 40m (at 00:00 UTC)."
		if d.Allowed || d.Reason != access.ReasonQuota || d.Message != want {
			t.Errorf("4th picture = %+v, want refused with %q", d, want)
		}
		if d, _ := q.Take("U0BOB"); !d.Allowed {
			t.Errorf("another person refused: %+v", d)
		}

		// One second before midnight UTC: still refused; at midnight: a new day.
		sleepUntil(day.Add(24*time.Hour - time.Second))
		if d, _ := q.Take("U0ALICE"); d.Allowed || d.Message != "You've made your 3 /imagine pictures for today. You can make more in less than a minute (at 00:00 UTC)." {
			t.Errorf("at 23:59:59 = %+v, want refused", d)
		}
		sleepUntil(day.Add(24 * time.Hour))
		if got := q.Remaining("U0ALICE"); got != 3 {
			t.Errorf("Remaining on the next day = %d, want 3", got)
		}
		if d, _ := q.Take("U0ALICE"); !d.Allowed {
			t.Errorf("first picture of the next day refused: %+v", d)
		}
	})
}

func TestQuotaOnePictureWording(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(time.Now().UTC().Truncate(24 * time.Hour).Add(22 * time.Hour))
		q := access.NewQuota(1, 0)
		q.Take("U1")
		if got, want := takeMessage(q, "U1"), "You've made your 1 /imagine picture for today. You can make more in 2h (at 00:00 UTC)."; got != want {
			t.Errorf("Message = %q, want %q", got, want)
		}
	})
}

func TestQuotaRefund(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := access.NewQuota(2, 0)
		_, a := q.Take("U1")
		_, b := q.Take("U1")
		q.Refund(a) // the job failed
		if got := q.Remaining("U1"); got != 1 {
			t.Errorf("Remaining after a refund = %d, want 1", got)
		}
		q.Refund(b)
		q.Refund(b) // more refunds than pictures never give extra
		if got := q.Remaining("U1"); got != 2 {
			t.Errorf("Remaining after extra refunds = %d, want 2", got)
		}
		_, c := q.Take("U1")
		time.Sleep(24 * time.Hour) // a refund after the day changed does nothing
		q.Take("U1")
		q.Refund(c)
		if got := q.Remaining("U1"); got != 1 {
			t.Errorf("Remaining after a refund of the day before = %d, want 1: the new day's picture stays", got)
		}
	})
}

func TestQuotaUnlimited(t *testing.T) {
	for _, limit := range []int{0, -1} {
		q := access.NewQuota(limit, 1)
		for range 1000 {
			if d, _ := q.Take("U1"); !d.Allowed {
				t.Fatalf("quota %d refused: %+v", limit, d)
			}
		}
		if q.Remaining("U1") != -1 || q.Limit() != 0 {
			t.Errorf("quota %d: Remaining = %d, Limit = %d; want -1, 0", limit, q.Remaining("U1"), q.Limit())
		}
	}
}

// Beyond maxUsers people a day, newcomers are let through uncounted; people already counted
// keep their counts.
func TestQuotaBoundedUsers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := access.NewQuota(1, 3)
		for i := range 3 {
			q.Take(fmt.Sprintf("U%d", i))
		}
		for range 5 {
			if d, _ := q.Take("U99"); !d.Allowed {
				t.Fatalf("untracked newcomer refused: %+v", d)
			}
		}
		if d, _ := q.Take("U0"); d.Allowed {
			t.Error("a counted person got past the quota once the table was full")
		}
		time.Sleep(24 * time.Hour) // a new day empties the table
		q.Take("U99")
		if d, _ := q.Take("U99"); d.Allowed {
			t.Error("the next day, the newcomer is counted again")
		}
	})
}

// Many goroutines taking at once get exactly the limit (run with -race).
func TestQuotaConcurrent(t *testing.T) {
	q := access.NewQuota(10, 0)
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if d, _ := q.Take("U1"); d.Allowed {
					granted.Add(1)
				}
				q.Remaining("U1")
			}
		})
	}
	wg.Wait()
	if got := granted.Load(); got != 10 {
		t.Errorf("granted %d pictures concurrently, want 10", got)
	}
}

func BenchmarkQuotaTake(b *testing.B) {
	q := access.NewQuota(1<<30, 0)
	users := make([]string, 1000)
	for i := range users {
		users[i] = fmt.Sprintf("U%08d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q.Take(users[i%len(users)])
		i++
	}
}

// takeMessage is the message of user's next Take.
func takeMessage(q *access.Quota, user string) string {
	d, _ := q.Take(user)
	return d.Message
}

// A picture taken just before midnight UTC whose job fails just after must not be given back
// out of the new day's count: Refund's contract says "a refund after the day changed does
// nothing". Otherwise a person who starts a job at 23:59 and another at 00:00 gets limit+1
// pictures on the new day.
func TestQuotaRefundAfterMidnightLeavesNewDayAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		day := time.Now().UTC().Truncate(24 * time.Hour)
		sleepUntil(day.Add(24*time.Hour - 10*time.Second)) // 23:59:50 UTC

		q := access.NewQuota(1, 0)
		d, day1 := q.Take("U0ALICE") // day 1's job starts
		if !d.Allowed {
			t.Fatalf("day 1 picture refused: %+v", d)
		}
		sleepUntil(day.Add(24*time.Hour + 10*time.Second)) // 00:00:10, day 2
		if d, _ := q.Take("U0ALICE"); !d.Allowed {         // day 2's first picture
			t.Fatalf("day 2 picture refused: %+v", d)
		}
		sleepUntil(day.Add(24*time.Hour + 30*time.Second))
		q.Refund(day1) // day 1's job fails now: its picture belongs to day 1

		if got := q.Remaining("U0ALICE"); got != 0 {
			t.Errorf("Remaining on day 2 after its 1 of 1 and a refund of day 1's picture = %d, want 0", got)
		}
		if d, _ := q.Take("U0ALICE"); d.Allowed {
			t.Errorf("a second picture on day 2 with a quota of 1 was allowed")
		}
	})
}

// sharedCount is a hand-written shared counter (the state package's Add in Redis); fail makes
// every call fail, as an unreachable Redis does.
type sharedCount struct {
	mu   sync.Mutex
	n    map[string]int64
	fail bool
}

func (c *sharedCount) Add(_ context.Context, key string, delta int64, _ time.Duration) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail {
		return 0, errors.New("redis: connection refused")
	}
	c.n[key] += delta
	return c.n[key], nil
}

// TestQuotaSharedByReplicas: two replicas sharing the count give a person the day's pictures
// once between them, a refund on either gives one back, and a counter that cannot be reached
// leaves each counting in its memory.
func TestQuotaSharedByReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &sharedCount{n: map[string]int64{}}
		a, b := access.NewQuota(2, 0), access.NewQuota(2, 0)
		a.Share(c)
		b.Share(c)
		steps := []struct {
			q     *access.Quota
			allow bool
		}{{a, true}, {b, true}, {a, false}, {b, false}}
		var last access.Taken
		for i, s := range steps {
			d, taken := s.q.Take("U1")
			if d.Allowed != s.allow {
				t.Fatalf("picture %d: allowed %v, want %v", i+1, d.Allowed, s.allow)
			}
			if s.allow {
				last = taken
			}
		}
		b.Refund(last)
		if d, _ := a.Take("U1"); !d.Allowed {
			t.Error("a picture refunded on one replica is not available on the other")
		}
		c.fail = true
		for i := range 2 {
			if d, _ := a.Take("U1"); !d.Allowed {
				t.Errorf("counter down: picture %d refused; want the memory's own count", i+1)
			}
		}
		if d, _ := a.Take("U1"); d.Allowed {
			t.Error("counter down: a third picture allowed; the memory counts too")
		}
	})
}
