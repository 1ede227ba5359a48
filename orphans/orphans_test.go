package orphans

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// fakeJournal is the state package's journal as the answers and the orphans' closer see it: answers by id, some of them
// orphaned, adopted at most once.
type fakeJournal struct {
	mu       sync.Mutex
	answers  map[string]state.Answer
	orphaned []string // ids whose owner died
	taken    []string // ids another replica adopts first
	closed   []string
	given    []string      // ids handed back (Abandon)
	slow     time.Duration // how long an adoption takes
	onClose  func()        // called as a record is removed
	onAdopt  func()        // called as a record is adopted
}

func (j *fakeJournal) AddMessage(_ context.Context, id, ts string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	a := j.answers[id]
	a.ID = id
	if !slices.Contains(a.Messages, ts) {
		a.Messages = append(a.Messages, ts)
	}
	j.answers[id] = a
	return nil
}

func (j *fakeJournal) Orphans(context.Context) ([]state.Answer, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []state.Answer
	for _, id := range j.orphaned {
		out = append(out, j.answers[id])
	}
	return out, nil
}

func (j *fakeJournal) Adopt(_ context.Context, id string) (state.Answer, bool, error) {
	time.Sleep(j.slow)
	j.mu.Lock()
	defer j.mu.Unlock()
	if slices.Contains(j.taken, id) || slices.Contains(j.closed, id) {
		return state.Answer{}, false, nil
	}
	a := j.answers[id]
	a.Owner = "me"
	if j.onAdopt != nil {
		j.onAdopt()
	}
	return a, true, nil
}

func (j *fakeJournal) Abandon(_ context.Context, id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.given = append(j.given, id)
	a := j.answers[id]
	a.Owner = ""
	j.answers[id] = a
	return nil
}

func (j *fakeJournal) CloseAnswer(_ context.Context, id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = append(j.closed, id)
	if j.onClose != nil {
		j.onClose()
	}
	return nil
}

// TestCloseOrphans: an answer left open by a replica that died keeps what Slack shows of it,
// marked as interrupted, with Regenerate; one that showed nothing gets a note; one closed already
// or adopted by another replica is left alone.
func TestCloseOrphans(t *testing.T) {
	const (
		channel, thread = "C1", "1700000000.000001"
		partial         = "The first half of an answer"
	)
	for _, tc := range []struct {
		name string
		// shown is what the dead replica left: "placeholder", "partial", "stream", "closed", "" (nothing)
		shown     string
		unlisted  bool // the replica died between the post and its journal write
		taken     bool
		readErr   string // what Slack answers the thread read
		kept      bool   // the record stays: another replica adopted it, or a later sweep will close it
		wantWrite string // "update", "post" or "" (none)
		wantText  string // what the closing write shows (a substring)
		wantMark  convo.Mark
	}{
		{name: "nothing shown", shown: "", wantWrite: "post", wantText: TextOrphanedNothing,
			wantMark: convo.Mark{Kind: convo.MarkNotice, Note: TextOrphanedNothing, Done: true}},
		{name: "placeholder", shown: "placeholder", wantWrite: "update", wantText: TextOrphanedNothing,
			wantMark: convo.Mark{Kind: convo.MarkNotice, Note: TextOrphanedNothing, Done: true}},
		{name: "partial answer", shown: "partial", wantWrite: "update", wantText: partial,
			wantMark: convo.Mark{Kind: convo.MarkAnswer, Question: thread, Note: TextOrphaned, Done: true}},
		{name: "partial answer, not journaled", shown: "partial", unlisted: true, wantWrite: "update", wantText: partial,
			wantMark: convo.Mark{Kind: convo.MarkAnswer, Question: thread, Note: TextOrphaned, Done: true}},
		{name: "native stream", shown: "stream", wantWrite: "update", wantText: partial,
			wantMark: convo.Mark{Kind: convo.MarkAnswer, Question: thread, Note: TextOrphaned, Done: true}},
		{name: "closed already", shown: "closed", wantWrite: ""},
		{name: "whole, marked done", shown: "done", wantWrite: ""},
		{name: "the bot left the channel", shown: "partial", readErr: "channel_not_found", wantWrite: ""},
		{name: "the channel is archived", shown: "partial", readErr: "is_archived", wantWrite: ""},
		{name: "another replica adopts it", shown: "partial", taken: true, kept: true, wantWrite: ""},
		{name: "the thread cannot be read now", shown: "partial", readErr: "internal_error", kept: true, wantWrite: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := gatewaytest.NewSlack()
				ctx := t.Context()
				id := route.AnswerID(channel, thread)
				j := &fakeJournal{answers: map[string]state.Answer{}, orphaned: []string{id}}
				j.answers[id] = state.Answer{ID: id, Channel: channel, ThreadTS: thread, TS: thread, Owner: "dead"}
				var ts string
				switch tc.shown {
				case "placeholder":
					ts, _ = fs.Post(ctx, channel, thread, gateway.Msg{Text: "_Thinking…_", Mark: convo.Mark{Kind: convo.MarkPlaceholder}})
				case "partial":
					ts, _ = fs.Post(ctx, channel, thread, gateway.Msg{Text: partial, Mark: convo.Mark{Kind: convo.MarkAnswer, Question: thread}})
				case "stream":
					ts, _ = fs.StartStream(ctx, gateway.StreamStart{Channel: channel, ThreadTS: thread, Markdown: partial})
				case "done":
					ts, _ = fs.Post(ctx, channel, thread, gateway.Msg{Text: partial, Mark: convo.Mark{Kind: convo.MarkAnswer, Question: thread, Done: true}})
				case "closed":
					ts, _ = fs.Post(ctx, channel, thread, gateway.Msg{Text: partial, Mark: convo.Mark{Kind: convo.MarkAnswer, Note: "Stopped."}})
				}
				if ts != "" && !tc.unlisted {
					mustNoErr(t, j.AddMessage(ctx, id, ts))
				}
				if tc.taken {
					j.taken = []string{id}
				}
				if tc.readErr != "" {
					fs.RepliesErr = func(int, gatewaytest.Call) error { return slack.SlackErrorResponse{Err: tc.readErr} }
				}
				before := len(fs.Calls)
				New(fs, fs, zap.NewNop(), buttonOptions()).CloseOrphans(ctx, j)

				var writes []gatewaytest.Call
				for _, c := range fs.Calls[before:] {
					if c.Method == "update" || c.Method == "post" {
						writes = append(writes, c)
					}
				}
				if tc.wantWrite == "" {
					if len(writes) != 0 {
						t.Fatalf("writes %+v; want none", writes)
					}
					if reads := len(fs.CallsOf("replies")); reads > 1 && !tc.kept {
						t.Errorf("thread read %d times; want once", reads)
					}
					if wantClosed := !tc.kept; wantClosed != slices.Contains(j.closed, id) {
						t.Errorf("journal records removed: %v; want the answer's removed: %t", j.closed, wantClosed)
					}
					return
				}
				if len(writes) != 1 || writes[0].Method != tc.wantWrite {
					t.Fatalf("writes %+v; want one %s", writes, tc.wantWrite)
				}
				w := writes[0]
				if !strings.Contains(w.Text, tc.wantText) || w.Mark != tc.wantMark {
					t.Errorf("%s shows %q, mark %+v; want it to show %q, mark %+v", w.Method, w.Text, w.Mark, tc.wantText, tc.wantMark)
				}
				if len(w.Buttons) != 1 || w.Buttons[0].ActionID != route.ActionRegenerate || w.Buttons[0].Value != (route.ReplyRef{ThreadTS: thread, TS: thread}).Value() {
					t.Errorf("buttons %+v; want Regenerate for the question", w.Buttons)
				}
				if !slices.Equal(j.closed, []string{id}) {
					t.Errorf("journal records removed: %v; want %v", j.closed, id)
				}
			})
		})
	}
}

// TestCloseOrphansStoppingLeavesTheRecords: a replica that stops while closing orphans leaves their
// records, so another replica closes them once this one is gone.
func TestCloseOrphansStoppingLeavesTheRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := gatewaytest.NewSlack()
		j := &fakeJournal{answers: map[string]state.Answer{}}
		for i := range 20 {
			id := route.AnswerID("C1", fmt.Sprintf("1700000000.%06d", i+1))
			j.answers[id] = state.Answer{ID: id, Channel: "C1", ThreadTS: "1700000000.000001", TS: "1700000000.000001"}
			j.orphaned = append(j.orphaned, id)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		New(fs, fs, zap.NewNop(), buttonOptions()).CloseOrphans(ctx, j)
		if len(j.closed) != 0 {
			t.Errorf("records removed while stopping: %v; want them left for another replica", j.closed)
		}
	})
}

// TestCloseOrphansManyAtOnce: the answers of a replica that died with many open are closed
// together, not one after the other.
func TestCloseOrphansManyAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := gatewaytest.NewSlack()
		j := &fakeJournal{answers: map[string]state.Answer{}, slow: time.Second} // each adoption takes a second
		const n = 16
		for i := range n {
			ts := fmt.Sprintf("1700000000.%06d", i+1)
			id := route.AnswerID(fmt.Sprintf("C%d", i), ts)
			j.answers[id] = state.Answer{ID: id, Channel: fmt.Sprintf("C%d", i), ThreadTS: ts, TS: ts}
			j.orphaned = append(j.orphaned, id)
		}
		opt := buttonOptions()
		opt.Budgets.Reads = pace.NewBucket(6000, 100) // the read budget is not what this test is about
		start := time.Now()
		New(fs, fs, zap.NewNop(), opt).CloseOrphans(t.Context(), j)
		if len(j.closed) != n {
			t.Fatalf("%d of %d closed", len(j.closed), n)
		}
		if took := time.Since(start); took > n*time.Second/2 {
			t.Errorf("closing %d orphans took %v; want them closed %d at once", n, took, orphansAtOnce)
		}
	})
}

// TestCloseOrphansTouchesOnlyAnswerMessages: a journal record is read back from the shared store,
// which anyone able to write to Redis can fill. Whatever a record lists, the adopter edits none of
// another person's messages in its thread, nor a summary the bot posted there; with nothing of the
// answer's own to close, it only posts its note.
func TestCloseOrphansTouchesOnlyAnswerMessages(t *testing.T) {
	const channel, thread = "C1", "1700000000.000001"
	for _, listed := range []string{"a person's message", "the bot's summary"} {
		t.Run(listed, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := gatewaytest.NewSlack()
				ctx := t.Context()
				person := slack.Message{}
				person.User, person.Text, person.Timestamp, person.ThreadTimestamp = "U2", "my own words", "1700000000.000050", thread
				fs.Threads[channel+"/"+thread] = append(fs.Threads[channel+"/"+thread], person)
				summary, err := fs.Post(ctx, channel, thread, gateway.Msg{Text: "the day's summary", Mark: convo.Mark{Kind: convo.MarkSummary}})
				mustNoErr(t, err)
				target := map[string]string{"a person's message": person.Timestamp, "the bot's summary": summary}[listed]
				id := route.AnswerID(channel, thread)
				j := &fakeJournal{answers: map[string]state.Answer{id: {ID: id, Channel: channel, ThreadTS: thread, TS: thread,
					Owner: "dead", Messages: []string{target}}}, orphaned: []string{id}}

				before := len(fs.Calls)
				New(fs, fs, zap.NewNop(), buttonOptions()).CloseOrphans(ctx, j)
				for _, c := range fs.Calls[before:] {
					if c.Method == "update" || c.Method == "delete" {
						t.Errorf("the adopter called %s on %s: a record's list made it touch a message no answer wrote", c.Method, c.TS)
					}
				}
				if posts := fs.CallsOf("post"); len(posts) != 2 || posts[1].Mark != (convo.Mark{Kind: convo.MarkNotice, Note: TextOrphanedNothing, Done: true}) {
					t.Errorf("%d posts; want the summary, then only the note that the answer showed nothing", len(posts))
				}
			})
		})
	}
}

// An orphan whose close Slack refuses for a reason that may pass (an outage) is handed back rather
// than dropped: the next sweep, once Slack answers again, closes it.
func TestCloseOrphansHandsBackAFailedClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const thread = "1700000000.000001"
		fs := gatewaytest.NewSlack()
		ctx := t.Context()
		j, id, _ := halfAnswerOrphan(t, fs, thread)
		fs.UpdateErr = func(int, gatewaytest.Call) error { return slack.SlackErrorResponse{Err: "service_unavailable"} }
		r := New(fs, fs, zap.NewNop(), buttonOptions())

		r.CloseOrphans(ctx, j)
		if len(j.closedIDs()) != 0 || !slices.Equal(j.given, []string{id}) {
			t.Fatalf("after a failed close: records removed %v, handed back %v; want none removed, %s handed back",
				j.closedIDs(), j.given, id)
		}
		fs.Mu.Lock()
		fs.UpdateErr = nil
		fs.Mu.Unlock()
		r.CloseOrphans(ctx, j)
		if got := j.closedIDs(); !slices.Equal(got, []string{id}) {
			t.Errorf("after the next sweep: records removed %v; want %s", got, id)
		}
		if ups := fs.CallsOf("update"); len(ups) == 0 || ups[len(ups)-1].Mark.Note != TextOrphaned {
			t.Errorf("updates %+v; want the interrupted note last", ups)
		}
	})
}

// The owner's closing write that lands between the adopter's read and its adoption (it was on its way
// as the owner's liveness ran out) is seen: the adopter reads again once it holds the record, and
// leaves an answer shown done as it is.
func TestCloseOrphansLeavesAnAnswerClosedDuringTheAdoption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const thread = "1700000000.000001"
		fs := gatewaytest.NewSlack()
		ctx := t.Context()
		j, id, ts := halfAnswerOrphan(t, fs, thread)
		j.onAdopt = func() {
			done := gateway.Msg{Text: "The whole answer", Mark: convo.Mark{Kind: convo.MarkAnswer, Question: thread, Done: true}}
			mustNoErr(t, fs.Update(ctx, testCh, ts, done))
		}
		r := New(fs, fs, zap.NewNop(), buttonOptions())
		before := len(fs.CallsOf("update"))
		r.CloseOrphans(ctx, j)
		if ups := fs.CallsOf("update"); len(ups) != before+1 {
			t.Errorf("updates %+v; want only the owner's closing write, no note over it", ups[before:])
		}
		if got := j.closedIDs(); !slices.Equal(got, []string{id}) {
			t.Errorf("records removed %v; want %s", got, id)
		}
	})
}

// TestCloseOrphanPanicDropsItsRecord: a close that panics (a message or a record whose bytes the
// closing code cannot take) is logged and its record dropped, and the process goes on.
func TestCloseOrphanPanicDropsItsRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const channel, thread = "C1", "1700000000.000001"
		fs := gatewaytest.NewSlack()
		fs.RepliesErr = func(int, gatewaytest.Call) error { panic("a message the closing code cannot take") }
		id := route.AnswerID(channel, thread)
		j := &fakeJournal{answers: map[string]state.Answer{id: {ID: id, Channel: channel, ThreadTS: thread, TS: thread,
			Owner: "dead"}}, orphaned: []string{id}}
		New(fs, fs, zap.NewNop(), buttonOptions()).CloseOrphans(t.Context(), j)
		if got := j.closedIDs(); len(got) != 1 || got[0] != id {
			t.Errorf("records closed %v, want %s dropped", got, id)
		}
	})
}

// halfAnswerOrphan is a journal holding one orphan, the answer to thread's question in testCh, whose
// one message (ts) shows half an answer: posted in fs, listed in the record.
func halfAnswerOrphan(t *testing.T, fs *gatewaytest.Slack, thread string) (j *fakeJournal, id, ts string) {
	t.Helper()
	id = route.AnswerID(testCh, thread)
	j = &fakeJournal{answers: map[string]state.Answer{}, orphaned: []string{id}}
	j.answers[id] = state.Answer{ID: id, Channel: testCh, ThreadTS: thread, TS: thread, Owner: "dead"}
	ts, err := fs.Post(t.Context(), testCh, thread, gateway.Msg{Text: "Half an answer", Mark: convo.Mark{Kind: convo.MarkAnswer, Question: thread}})
	mustNoErr(t, err)
	mustNoErr(t, j.AddMessage(t.Context(), id, ts))
	return j, id, ts
}

// closedIDs is the ids whose records the journal has removed so far.
func (j *fakeJournal) closedIDs() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.closed)
}

// TestCloseOrphansWaitsForQuietMessages: an orphan whose message changed within the liveness TTL
// (a write of its replica's was on its way) is closed only once Options.Quiet has passed since, also
// when it changes again during that wait; one left unchanged longer is closed at once.
func TestCloseOrphansWaitsForQuietMessages(t *testing.T) {
	for _, tc := range []struct {
		name     string
		age      time.Duration // how long ago the message last changed
		editedIn time.Duration // when it is edited again after the sweep began (0: never)
		wantWait time.Duration
	}{
		{name: "changed long ago", age: time.Hour, wantWait: 0},
		{name: "changed just now", age: time.Second, wantWait: 14 * time.Second},
		{name: "changed again during the wait", age: time.Second, editedIn: 10 * time.Second, wantWait: 25 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := gatewaytest.NewSlack()
				ts := convo.TS(time.Now().Add(-tc.age))
				m := slack.Message{}
				m.User, m.BotID, m.Text, m.Timestamp, m.ThreadTimestamp = "UBOT", "BBOT", "Half an answer", ts, testTS
				m.Metadata = convo.Mark{Kind: convo.MarkAnswer, Question: testTS}.Metadata()
				fs.Threads[testCh+"/"+testTS] = []slack.Message{mention(testQuestion), m}
				id := route.AnswerID(testCh, testTS)
				j := &fakeJournal{answers: map[string]state.Answer{id: {ID: id, Channel: testCh, ThreadTS: testTS,
					TS: testTS, Owner: "dead", Messages: []string{ts}}}, orphaned: []string{id}}
				start := time.Now()
				opt := buttonOptions()
				opt.Quiet = 15 * time.Second
				if tc.editedIn > 0 {
					go func() {
						time.Sleep(tc.editedIn)
						fs.Mu.Lock()
						defer fs.Mu.Unlock()
						edited := fs.Threads[testCh+"/"+testTS][1]
						edited.Edited = &slack.Edited{User: "UBOT", Timestamp: convo.TS(time.Now())}
						fs.Threads[testCh+"/"+testTS][1] = edited
					}()
				}
				New(fs, fs, zap.NewNop(), opt).CloseOrphans(t.Context(), j)
				ups := fs.CallsOf("update")
				if len(ups) != 1 || ups[0].Mark.Note != TextOrphaned {
					t.Fatalf("updates %+v; want the interrupted note", ups)
				}
				if got := ups[0].At.Sub(start); got != tc.wantWait {
					t.Errorf("closed %v after the sweep; want %v", got, tc.wantWait)
				}
			})
		})
	}
}

const (
	testTS       = "1700000000.000001"
	testCh       = "C1"
	testQuestion = "<@UBOT> explain token buckets"
)

// buttonOptions are the options of a bot with buttons, whose answers are marked as the tests' bot's.
func buttonOptions() Options {
	return Options{BotUserID: "UBOT", BotID: "BBOT", Buttons: true}
}

func mention(text string) slack.Message {
	var m slack.Message
	m.User, m.Text, m.Timestamp = "U1", text, "1700000000.000001"
	return m
}

func mustNoErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
