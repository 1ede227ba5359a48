package bot

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
)

// Beyond MaxConcurrent, answers wait for a place in the order they were asked (none is told it
// is busy); beyond MaxQueued waiting, the asker is told the bot is busy.
func TestQueuedAnswersRunInArrivalOrder(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	release := make(chan struct{})
	started := make(chan string, 4) // at most four replies start
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- req.Text
		if req.Text == "one" {
			<-release
		}
		return nil
	}}
	var busy sync.WaitGroup
	busy.Add(1)
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1, MaxQueued: 2, Hooks: Hooks{Busy: busy.Done}})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	for i, text := range []string{"two", "three", "four"} {
		fs.PostUserMessage(fmt.Sprint("D", i+2), fmt.Sprint("U", i+2), "", text)
		h.waitFor(t, text+" handled", func() bool { return int(h.bot.replies.Load()) == min(i+2, 3) && len(fs.Acks()) == i+2 })
	}
	busy.Wait()
	h.waitFor(t, "the busy note", func() bool { return len(fs.Ephemerals()) >= 1 })
	es := fs.Ephemerals()
	if len(es) != 1 || es[0].User != "U4" || es[0].Text != BusyText {
		t.Errorf("notes %+v, want one busy note, to U4 (the third waiting)", es)
	}
	close(release)
	for _, want := range []string{"two", "three"} {
		if got := waitChan(t, want+" started", started); got != want {
			t.Errorf("started %q, want %q (arrival order)", got, want)
		}
	}
}

// An answer still waiting for a place at shutdown is not started; its asker is told to ask again.
func TestShutdownTellsAskerWaitingForAPlace(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	started := make(chan string, 2) // at most two replies start
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- req.Text
		<-ctx.Done()
		return context.Cause(ctx)
	}}
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1, MaxQueued: 1, Grace: time.Second})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	fs.PostUserMessage("D2", "U2", "", "two")
	h.waitFor(t, "second waiting", func() bool { return h.bot.slots.queued() == 1 })
	if err := h.shutdown(t); err != nil {
		t.Fatal(err)
	}
	select {
	case text := <-started:
		t.Errorf("reply %q started during shutdown", text)
	default:
	}
	e := fs.Ephemerals()
	if len(e) != 1 || e[0].User != "U2" || e[0].Text != RestartText || e[0].Channel != "D2" {
		t.Errorf("notes %+v: want the restart notice to U2 in D2", e)
	}
}

func TestSlotsServeInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(1)
		if err := s.acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		gone, cancel := context.WithCancelCause(t.Context())
		for i := range 4 {
			ctx := t.Context()
			if i == 1 {
				ctx = gone // gives up while waiting: its turn passes to the next
			}
			wg.Go(func() {
				if s.acquire(ctx) != nil {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Second)
				s.release()
			})
			synctest.Wait() // each waits before the next comes
		}
		cancel(context.Canceled)
		synctest.Wait()
		if n := s.queued(); n != 3 {
			t.Errorf("queued = %d, want 3 (of 4, one gave up)", n)
		}
		s.release()
		wg.Wait()
		if fmt.Sprint(order) != "[0 2 3]" {
			t.Errorf("order %v, want [0 2 3]", order)
		}
		if s.free != 1 || len(s.waiting) != 0 {
			t.Errorf("free %d, waiting %d at the end: want 1 free", s.free, len(s.waiting))
		}
	})
}
