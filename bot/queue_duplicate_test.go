package bot

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// claimedElsewhere is a replica set where every message after the first was answered already (a
// redelivery another replica, or this one before a restart, answers).
type claimedElsewhere struct {
	alone
	n atomic.Int32
}

func (c *claimedElsewhere) Claim(context.Context, string, time.Duration) (bool, error) {
	return c.n.Add(1) == 1, nil
}

// a queued question shows "is waiting…" under its thread, then turns out to be answered by
// another replica (errDuplicate): nothing this bot posts will clear the status, and it is not
// taken down.
func TestDuplicateTakesTheWaitingStatusDown(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r, started, release := holdingReplier("one", 2)
	q := &fakeQueue{}
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1, MaxQueued: 1, Queue: q, Replicas: Replicas{Claims: &claimedElsewhere{}}})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	ts := fs.PostUserMessage("C2", "U2", "", "<@UBOT> two")
	h.waitFor(t, "second waiting", func() bool { return h.bot.slots.queued() == 1 })
	h.waitFor(t, "the status", func() bool { return len(q.seen()) == 1 })
	close(release)
	h.waitFor(t, "both done", func() bool { return h.bot.replies.Load() == 0 })
	want := []string{"show C2/" + ts + " at 1", "clear C2/" + ts}
	if got := q.seen(); !slices.Equal(got, want) {
		t.Errorf("statuses %q, want %q (nothing is posted here to clear it)", got, want)
	}
}
