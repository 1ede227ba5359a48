package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
)

// holdingReplier is a Replier that reports the text of each request it starts on started (buffered
// for n) and holds the one asking held until release is closed.
func holdingReplier(held string, n int) (r *fakeReplier, started chan string, release chan struct{}) {
	started, release = make(chan string, n), make(chan struct{})
	r = &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- req.Text
		if req.Text == held {
			<-release
		}
		return nil
	}}
	return r, started, release
}

// Beyond MaxConcurrent, answers wait for a place in the order they were asked, each asker told
// privately their place in line; beyond MaxQueued waiting, the asker is told the bot is busy.
func TestQueuedAnswersRunInArrivalOrder(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r, started, release := holdingReplier("one", 4)
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
	h.waitFor(t, "the notes", func() bool { return len(fs.Ephemerals()) >= 3 })
	var notes []string
	for _, e := range fs.Ephemerals() {
		notes = append(notes, e.User+": "+e.Text)
	}
	slices.Sort(notes)
	want := []string{"U2: " + queuedText(1), "U3: " + queuedText(2), "U4: " + BusyText}
	if fmt.Sprint(notes) != fmt.Sprint(want) {
		t.Errorf("notes %q\nwant  %q (two in line, the third waiting told the bot is busy)", notes, want)
	}
	close(release)
	for _, want := range []string{"two", "three"} {
		if got := waitChan(t, want+" started", started); got != want {
			t.Errorf("started %q, want %q (arrival order)", got, want)
		}
	}
}

// fakeQueue is a QueueStatus that shows every place (or none: refuse) and records its calls.
type fakeQueue struct {
	refuse bool
	mu     sync.Mutex
	calls  []string // "show C1/1.0 at 1", "clear C1/1.0"
}

func (q *fakeQueue) ShowQueued(_ context.Context, channel, threadTS string, place int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, fmt.Sprintf("show %s/%s at %d", channel, threadTS, place))
	return !q.refuse
}

func (q *fakeQueue) ClearQueued(_ context.Context, channel, threadTS string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, fmt.Sprintf("clear %s/%s", channel, threadTS))
}

func (q *fakeQueue) seen() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.calls)
}

// A question that waits for a place in a thread shows its place there (the thread's status), and
// its asker gets no private note; when the status is not shown, or the question has no thread (a
// top-level DM), the asker is told privately as before. A question that turns out to need no
// answer takes its status down: nothing will be posted to clear it.
func TestQueuedPlaceShownInTheThread(t *testing.T) {
	for _, tc := range []struct {
		name      string
		channel   string // where the second question is asked, at the top: a mention in C2 is answered in its thread
		refuse    bool   // the status cannot be shown
		ignored   bool   // the second question needs no answer
		wantCalls []string
		wantNote  bool // U2 is told their place privately
	}{
		{name: "in a thread: the status", channel: "C2", wantCalls: []string{"show C2/{ts} at 1"}},
		{name: "status not shown: the note", channel: "C2", refuse: true, wantCalls: []string{"show C2/{ts} at 1"}, wantNote: true},
		{name: "no thread: the note", channel: "D2", wantNote: true},
		{name: "nothing to answer: taken down", channel: "C2", ignored: true,
			wantCalls: []string{"show C2/{ts} at 1", "clear C2/{ts}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeSlack(t, fakeslack.Config{})
			r, started, release := holdingReplier("one", 2)
			held := r.fn
			r.fn = func(ctx context.Context, req route.ReplyRequest) error {
				err := held(ctx, req)
				if tc.ignored && req.User == "U2" {
					return handlers.ErrIgnored
				}
				return err
			}
			q := &fakeQueue{refuse: tc.refuse}
			h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1, MaxQueued: 1, Queue: q})
			fs.PostUserMessage("D1", "U1", "", "one")
			waitChan(t, "first reply", started)
			ts := fs.PostUserMessage(tc.channel, "U2", "", "<@UBOT> two")
			h.waitFor(t, "second waiting", func() bool { return h.bot.slots.queued() == 1 })
			if tc.wantNote {
				h.waitFor(t, "the note", func() bool { return len(fs.Ephemerals()) == 1 })
			}
			close(release)
			waitChan(t, "second reply", started)
			h.waitFor(t, "both done", func() bool { return h.bot.replies.Load() == 0 })
			var want []string
			for _, c := range tc.wantCalls {
				want = append(want, strings.ReplaceAll(c, "{ts}", ts))
			}
			if got := q.seen(); !slices.Equal(got, want) {
				t.Errorf("statuses %q, want %q", got, want)
			}
			var notes []string
			for _, e := range fs.Ephemerals() {
				notes = append(notes, e.Channel+" "+e.User+": "+e.Text)
			}
			var wantNotes []string
			if tc.wantNote {
				wantNotes = []string{tc.channel + " U2: " + queuedText(1)}
			}
			if !slices.Equal(notes, wantNotes) {
				t.Errorf("notes %q, want %q", notes, wantNotes)
			}
		})
	}
}

// At shutdown a question whose place shows under its thread is told to ask again, and its status is
// taken down: it must not say the question waits.
func TestShutdownClearsTheWaitingStatus(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r, started := runsUntilCancelled(func(req route.ReplyRequest) string { return req.Text })
	q := &fakeQueue{}
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1, MaxQueued: 1, Grace: time.Second, Queue: q})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	ts := fs.PostUserMessage("C2", "U2", "", "<@UBOT> two")
	h.waitFor(t, "the status", func() bool { return len(q.seen()) == 1 })
	if err := h.shutdown(t); err != nil {
		t.Fatal(err)
	}
	if got, want := q.seen(), []string{"show C2/" + ts + " at 1", "clear C2/" + ts}; !slices.Equal(got, want) {
		t.Errorf("statuses %q, want %q", got, want)
	}
	if e := fs.Ephemerals(); len(e) != 1 || e[0].User != "U2" || e[0].Text != RestartText {
		t.Errorf("notes %+v, want only the restart note to U2", e)
	}
}

// An answer still waiting for a place at shutdown is not started; its asker is told to ask again.
func TestShutdownTellsAskerWaitingForAPlace(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r, started := runsUntilCancelled(func(req route.ReplyRequest) string { return req.Text })
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
	if len(e) != 2 || e[0].Text != queuedText(1) || e[1].User != "U2" || e[1].Text != RestartText || e[1].Channel != "D2" {
		t.Errorf("notes %+v: want U2's place in line, then the restart notice to U2 in D2", e)
	}
}

func TestSlotsServeInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(1)
		if err := s.join().wait(t.Context()); err != nil {
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
				if s.join().wait(ctx) != nil {
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

// Questions that arrive together (one burst, whose work starts once it is acked) are answered in
// the order they were asked, whatever order their goroutines start in.
func TestBurstIsAnsweredInArrivalOrder(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r, started, release := holdingReplier("first", 9)
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1, MaxQueued: 20})
	fs.PostUserMessage("D0", "U0", "", "first")
	waitChan(t, "first reply", started)
	var want []string
	for i := range 8 {
		text := fmt.Sprint("q", i)
		want = append(want, text)
		fs.PostUserMessage(fmt.Sprint("D", i+1), fmt.Sprint("U", i+1), "", text)
	}
	h.waitFor(t, "eight waiting", func() bool { return h.bot.slots.queued() == 8 })
	close(release)
	var got []string
	for range 8 {
		got = append(got, waitChan(t, "a reply", started))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("started %v, want the order asked %v", got, want)
	}
}

// A handler that panics leaves its asker a short private reason.
func TestPanicTellsTheAsker(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r := &fakeReplier{fn: func(context.Context, route.ReplyRequest) error { panic("boom") }}
	h := startBot(t, fs, r, nil, Options{})
	fs.PostUserMessage("D1", "U1", "", "hello")
	h.waitFor(t, "the note", func() bool { return len(fs.Ephemerals()) == 1 })
	if e := fs.Ephemerals()[0]; e.User != "U1" || e.Text != textFailed {
		t.Errorf("note %+v, want %q to U1", e, textFailed)
	}
}

// A slash command is acked once: when its answer in a thread cannot run (the bot is full), the busy
// note is told privately, not as a second ack.
func TestCommandAnsweredInAThreadIsAckedOnce(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 1) // one reply starts
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- struct{}{}
		<-release
		return nil
	}}
	ask := route.Route{Kind: route.Command, Name: "/ask", Handler: route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			req.Reply = &route.ReplyRequest{Channel: req.Channel, User: req.User, TS: "1.0", ThreadTS: "1.0", Text: req.Text}
			return route.Decision{Run: true, Say: "On it."}
		},
		RunFunc: func(context.Context, *route.Request) error { return nil },
	}}
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1}, ask)
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	fs.SlashCommand("C1", "U2", "/ask", "two")
	h.waitFor(t, "the busy note", func() bool { return len(fs.Ephemerals()) == 1 })
	if e := fs.Ephemerals()[0]; e.User != "U2" || e.Text != BusyText {
		t.Errorf("note %+v, want the busy note to U2", e)
	}
	if acks := fs.Acks(); len(acks) != len(fs.Envelopes()) {
		t.Errorf("%d acks for %d envelopes, want one each", len(acks), len(fs.Envelopes()))
	}
}

// At shutdown an answer waiting for its thread's turn is told to ask again at once, not after the
// answer before it has written its closing note (by then the grace period may be over).
func TestShutdownTellsTheNextInTheThreadAtOnce(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	const grace = 2 * time.Second
	started := make(chan struct{}, 1) // one reply starts
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- struct{}{}
		<-ctx.Done()
		time.Sleep(CloseReserve(grace)) // its closing note takes all the time kept for closing
		return context.Cause(ctx)
	}}
	h := startBot(t, fs, r, nil, Options{Grace: grace})
	parent := fs.PostUserMessage("C1", "U1", "", "<@UBOT> first")
	waitChan(t, "first reply", started)
	fs.PostUserMessage("C1", "U2", parent, "<@UBOT> second, same thread")
	h.waitFor(t, "second waiting for its turn", func() bool { return len(fs.Acks()) == len(fs.Envelopes()) && h.bot.replies.Load() == 2 })
	if err := h.shutdown(t); err != nil {
		t.Fatal(err)
	}
	e := fs.Ephemerals()
	if len(e) != 1 || e[0].User != "U2" || e[0].Text != RestartText {
		t.Errorf("notes %+v, want the restart note to U2", e)
	}
}

// Someone who keeps asking while the bot is full is told it is busy once a minute, not once per
// message.
func TestBusyNoteOncePerPersonAMinute(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 1) // one reply starts
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- struct{}{}
		<-release
		return nil
	}}
	var busy atomic.Int32
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1, Hooks: Hooks{Busy: func() { busy.Add(1) }}})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	for i := range 3 {
		fs.PostUserMessage("D2", "U2", "", fmt.Sprint("again ", i))
	}
	h.waitFor(t, "three refused", func() bool { return busy.Load() == 3 })
	h.waitFor(t, "the note", func() bool { return len(fs.Ephemerals()) >= 1 })
	time.Sleep(100 * time.Millisecond) // a second note would be on its way by now
	if n := len(fs.Ephemerals()); n != 1 {
		t.Errorf("%d busy notes to U2, want 1", n)
	}
}

// A route whose Accept says Now runs at once, while every place is taken by answers: short work
// with Slack alone (a modal's 3-second trigger) never waits behind model requests.
func TestNowRunsWhileEveryPlaceIsTaken(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r, started, release := holdingReplier("one", 1)
	defer close(release)
	ran := make(chan struct{}, 1)
	now := route.Route{Kind: route.Action, Name: "now_action", Feature: "now", Handler: route.Funcs{
		AcceptFunc: func(*route.Request) route.Decision { return route.Decision{Run: true, Now: true} },
		RunFunc:    func(context.Context, *route.Request) error { ran <- struct{}{}; return nil },
	}}
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1}, now)
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "the answer holding the only place", started)
	ts := showButton(t, h, "C1", "", gateway.Button{ActionID: "now_action", Text: "Now", Value: "x"})
	click(t, fs, "C1", ts, "U1", "now_action")
	waitChan(t, "the Now route run while the place is taken", ran)
}

// Private notes of their place that Slack refuses with a 429 (its chat.postEphemeral limit is
// tighter than the bot's budget thought) are sent again after the Retry-After: every queued asker
// gets theirs.
func TestQueuedNotesRefusedBySlackAreSentAgain(t *testing.T) {
	limits := fakeslack.Limits{Methods: map[string]fakeslack.Limit{"chat.postEphemeral": {PerMinute: 120, Burst: 1}}}
	fs := newFakeSlack(t, fakeslack.Config{Limits: limits})
	r, started, release := holdingReplier("one", 4)
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1, MaxQueued: 3})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	for i, text := range []string{"two", "three", "four"} {
		fs.PostUserMessage(fmt.Sprint("D", i+2), fmt.Sprint("U", i+2), "", text)
	}
	h.waitFor(t, "a note for each asker in line", func() bool { return len(fs.Ephemerals()) == 3 })
	if fs.Count429("chat.postEphemeral") == 0 {
		t.Error("Slack refused no note: the case under test did not happen")
	}
	close(release)
}

// An answer done with the model gives its place to the next question in line at once, while its own
// last writes (paced by Slack's budgets) go on.
func TestPlaceFreedWhenTheModelIsDone(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	started, release := make(chan string, 2), make(chan struct{})
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- req.Text
		if req.Text == "one" {
			req.ModelDone() // the model has answered; the answer's last edits wait for their turn
			<-release
		}
		return nil
	}}
	startBot(t, fs, r, nil, Options{MaxConcurrent: 1, MaxQueued: 1})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	fs.PostUserMessage("D2", "U2", "", "two")
	if got := waitChan(t, "second reply, while the first still writes", started); got != "two" {
		t.Errorf("started %q, want two", got)
	}
	close(release)
}

// An answer done with the model no longer counts against MAX_CONCURRENT_REPLIES + MAX_QUEUED_REPLIES:
// with no queue, a question that comes while its last writes go on takes the free place, and is not
// told the bot is busy.
func TestFreedPlaceTakenWithoutAQueue(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	started, release := make(chan string, 2), make(chan struct{})
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- req.Text
		if req.Text == "one" {
			req.ModelDone() // the model has answered; the last writes wait for their turn
			<-release
		}
		return nil
	}}
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	h.waitFor(t, "the place freed", func() bool { return h.bot.replies.Load() == 0 })
	fs.PostUserMessage("D2", "U2", "", "two")
	if got := waitChan(t, "second reply", started); got != "two" {
		t.Errorf("started %q, want two", got)
	}
	if e := fs.Ephemerals(); len(e) != 0 {
		t.Errorf("notes %+v, want none (no busy note)", e)
	}
	close(release)
}
