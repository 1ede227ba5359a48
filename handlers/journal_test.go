package handlers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/orphans"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// fakeJournal is the state package's journal of open answers as the answers see it (Journal), and as
// a surviving replica's orphans.Closer does: answers by id, some of them orphaned.
type fakeJournal struct {
	mu       sync.Mutex
	answers  map[string]state.Answer
	orphaned []string // ids whose owner died
	closed   []string
	onClose  func() // called as a record is removed
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

func (j *fakeJournal) CloseAnswer(_ context.Context, id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = append(j.closed, id)
	if j.onClose != nil {
		j.onClose()
	}
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
	j.mu.Lock()
	defer j.mu.Unlock()
	if slices.Contains(j.closed, id) {
		return state.Answer{}, false, nil
	}
	a := j.answers[id]
	a.Owner = "me"
	return a, true, nil
}

func (j *fakeJournal) Abandon(_ context.Context, id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	a := j.answers[id]
	a.Owner = ""
	j.answers[id] = a
	return nil
}

// orphanCloser is the orphans' closer of a replica whose answers are written with opt, as
// cmd/llmbot builds it.
func orphanCloser(fs *gatewaytest.Slack, opt ReplyOptions) *orphans.Closer {
	return orphans.New(fs, fs, zap.NewNop(), orphans.Options{Budgets: opt.Budgets, Fence: opt.Fence,
		BotUserID: opt.BotUserID, BotID: opt.BotID, Buttons: opt.Buttons, HistoryLimit: opt.HistoryLimit})
}

// closedIDs is the ids whose records the journal has removed so far.
func (j *fakeJournal) closedIDs() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.closed)
}

// TestAnswerLeavesTheJournalWhenItsTextLands: under load the answers end by a continuation post and
// their stale Stop buttons wait long for the edit budget; each answer's record goes as soon as its
// whole text shows, not once that tidying is done, and the last message of each says the answer is
// done. A replica that dies then leaves nothing for another to mark as interrupted: one that closes
// orphans right then writes nothing.
func TestAnswerLeavesTheJournalWhenItsTextLands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const answers = 10
		opt := lazyOptions()
		opt.Budgets.Edits = pace.NewScheduler(6, 2) // the Stop buttons' edits wait about a minute
		fs := newQuestionSlack()
		j := &fakeJournal{answers: map[string]state.Answer{}}
		opt.Journal = j
		ws := paragraphs(12)
		chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, 150*time.Millisecond)}
		r := NewReplies(fs, fs, fs, fs, chat, zap.NewNop(), opt)
		var wg sync.WaitGroup
		var ids []string
		for i := range answers {
			req := testRequest()
			req.Channel = fmt.Sprint("C", i)
			fs.Threads[req.Channel+"/"+testTS] = fs.Threads[testCh+"/"+testTS]
			id := route.AnswerID(req.Channel, req.TS)
			ids = append(ids, id)
			j.answers[id] = state.Answer{ID: id, Channel: req.Channel, ThreadTS: testTS, TS: testTS, Owner: "me"}
			wg.Go(func() { _ = r.Reply(t.Context(), req) })
		}
		lastToken := time.Now().Add(time.Duration(len(ws)) * 150 * time.Millisecond)
		time.Sleep(time.Until(lastToken) + 3*time.Second)
		want := strings.TrimSpace(strings.ReplaceAll(joined(ws), "\n\n", " "))
		stale := 0
		for i := range answers {
			ms := messagesIn(fs, fmt.Sprint("C", i))
			if got := shownText(fs, fmt.Sprint("C", i)); got != want {
				t.Fatalf("answer %d shows %q 3 s after the model's last token\nwant %q", i, got, want)
			}
			if last := ms[len(ms)-1]; !last.Mark.Done {
				t.Errorf("answer %d: its last message's mark %+v; want it done", i, last.Mark)
			}
			for _, m := range ms[:len(ms)-1] {
				if m.Mark.Done {
					t.Errorf("answer %d: an earlier message is marked done: %+v", i, m.Mark)
				}
				if buttonKey(m.Buttons) != "" {
					stale++
				}
			}
		}
		if stale == 0 {
			t.Fatal("no stale Stop button left to tidy: the test does not show what it is about")
		}
		closed := j.closedIDs()
		slices.Sort(closed)
		slices.Sort(ids)
		if !slices.Equal(closed, ids) {
			t.Errorf("records removed once the answers show whole (%d Stop buttons still to tidy): %v; want all %d",
				stale, closed, answers)
		}
		// A survivor closing them now (as orphans) finds every answer done: it writes nothing.
		dead := &fakeJournal{answers: map[string]state.Answer{}}
		for _, id := range ids {
			ch, _, _ := strings.Cut(id, "/")
			dead.answers[id] = state.Answer{ID: id, Channel: ch, ThreadTS: testTS, TS: testTS, Owner: "dead"}
			dead.orphaned = append(dead.orphaned, id)
		}
		survivor := opt
		survivor.Journal = nil
		orphanCloser(fs, survivor).CloseOrphans(t.Context(), dead)
		for _, c := range append(fs.CallsOf("post"), fs.CallsOf("update")...) {
			if c.Mark.Note == orphans.TextOrphaned || c.Mark.Note == orphans.TextOrphanedNothing {
				t.Errorf("the survivor wrote over a finished answer: %s %s %q", c.Method, c.TS, c.Text)
			}
		}
		if got := dead.closedIDs(); len(got) != answers {
			t.Errorf("the survivor removed %d records; want all %d", len(got), answers)
		}
		wg.Wait()
	})
}

// TestOrphanReadsTakeOnlySpareTokens: closing many orphans at start-up never puts their thread reads
// in front of the read of a person asking now: with the read budget at a read a second, the answer's
// read comes with the next token, not after every orphan's.
func TestOrphanReadsTakeOnlySpareTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := gatewaytest.NewSlack()
		opt := buttonOptions()
		opt.Budgets.Reads = pace.NewBucket(60, 1) // a read a second
		r := NewReplies(fs, fs, fs, fs, &llmtest.Chat{}, zap.NewNop(), opt)
		oc := orphanCloser(fs, opt)
		const n = 6
		j := &fakeJournal{answers: map[string]state.Answer{}}
		for i := range n {
			ts := fmt.Sprintf("1700000000.%06d", i+1)
			id := route.AnswerID(testCh, ts)
			j.answers[id] = state.Answer{ID: id, Channel: testCh, ThreadTS: ts, TS: ts, Owner: "dead"}
			j.orphaned = append(j.orphaned, id)
		}
		var wg sync.WaitGroup
		wg.Go(func() { oc.CloseOrphans(t.Context(), j) })
		time.Sleep(1500 * time.Millisecond) // the orphans are being closed, a read a second
		asked := time.Now()
		_, _, err := r.reads.Replies(t.Context(), testCh, testTS)
		mustNoErr(t, err)
		if took := time.Since(asked); took > time.Second {
			t.Errorf("the read of an answer asking now waited %v behind the orphans; want the next token, within 1s", took)
		}
		wg.Wait()
		if got := len(j.closedIDs()); got != n {
			t.Errorf("%d orphans closed; want %d", got, n)
		}
	})
}

// A streamed answer whose stream cannot be stopped is rescued (posted whole as ordinary messages):
// its record goes once those posts have landed, before its streamed messages are deleted, and its
// last post is marked done.
func TestRescuedAnswerLeavesTheJournalBeforeItsDeletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		opt := streamOptions()
		j := &fakeJournal{answers: map[string]state.Answer{}}
		opt.Journal = j
		deletesAtClose := -1
		j.onClose = func() { deletesAtClose = len(fs.CallsOf("delete")) }
		fs.StopErr = func(int, gatewaytest.Call) error { return slack.SlackErrorResponse{Err: "cant_update_message"} }
		ws := lines(6)
		chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, 100*time.Millisecond)}
		_ = NewReplies(fs, fs, fs, fs, chat, zap.NewNop(), opt).Reply(t.Context(), testRequest())
		posts, deletes := fs.CallsOf("post"), fs.CallsOf("delete")
		if len(posts) == 0 || len(deletes) == 0 {
			t.Fatalf("posts %d, deletes %d: the answer was not rescued", len(posts), len(deletes))
		}
		if deletesAtClose != 0 {
			t.Errorf("the record was removed after %d of the streamed messages' deletes; want before them", deletesAtClose)
		}
		if last := posts[len(posts)-1]; !last.Mark.Done {
			t.Errorf("the rescue's last post is marked %+v; want done", last.Mark)
		}
	})
}

// An answer whose closing write does not land (here Slack refuses every edit for longer than the
// final write waits) says so (ErrUnclosed), so that its record is handed over rather than removed;
// one whose closing write landed does not.
func TestAnswerSaysWhenItsCloseDidNotLand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refuse   bool
		unclosed bool
	}{
		{name: "closed", refuse: false, unclosed: false},
		{name: "Slack refuses the edits", refuse: true, unclosed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := newQuestionSlack()
				if tc.refuse {
					fs.UpdateErr = func(int, gatewaytest.Call) error { return slack.SlackErrorResponse{Err: "service_unavailable"} }
				}
				chat := &llmtest.Chat{Steps: llmtest.Deltas(paragraphs(4), 500*time.Millisecond)}
				err := NewReplies(fs, fs, fs, fs, chat, zap.NewNop(), testOptions()).Reply(t.Context(), testRequest())
				if got := errors.Is(err, ErrUnclosed); got != tc.unclosed {
					t.Errorf("Reply: %v; ErrUnclosed %v, want %v", err, got, tc.unclosed)
				}
			})
		})
	}
}

// TestAnswerMessagesAreJournaled: every message an answer posts is recorded under its id, so the
// replica closing it after a crash finds them, and the record goes once the answer's final write is
// made (a replica dying right after must not leave a finished answer to be closed as interrupted).
func TestAnswerMessagesAreJournaled(t *testing.T) {
	for _, mode := range []ReplyMode{ModeEdit, ModeStream} {
		t.Run(string(mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := gatewaytest.NewSlack()
				j := &fakeJournal{answers: map[string]state.Answer{}}
				opt := testOptions()
				opt.Mode, opt.Journal = mode, j
				chat := &llmtest.Chat{Steps: llmtest.Deltas(llmtest.Words(strings.Repeat("word ", 2000), 2000), 0)} // two messages long when edited
				req := route.ReplyRequest{Channel: "C1", User: "U1", TS: "1700000000.000001", ThreadTS: "1700000000.000001", Text: "<@UBOT> hi"}
				fs.Threads["C1/"+req.ThreadTS] = []slack.Message{mention("<@UBOT> hi")}
				mustNoErr(t, NewReplies(fs, fs, fs, fs, chat, zap.NewNop(), opt).Reply(t.Context(), req))
				var want []string
				for _, m := range fs.BotMessages(req.ThreadTS) {
					want = append(want, m.TS)
				}
				got := j.answers[route.AnswerID("C1", req.TS)].Messages
				if len(want) == 0 || !slices.Equal(got, want) {
					t.Errorf("journaled %v; want the answer's messages %v", got, want)
				}
				if !slices.Equal(j.closed, []string{route.AnswerID("C1", req.TS)}) {
					t.Errorf("records closed %v; want the answer's, once its final write is made", j.closed)
				}
			})
		})
	}
}
