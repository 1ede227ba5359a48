package bot

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// An answer's journal record is removed once it has run, unless its closing write did not land (or
// its handler panicked): Slack may show that one unfinished, so its record is handed over for
// adoption, and the next sweep of any replica closes it with the interrupted note.
func TestJournalRecordOfAnUnfinishedAnswerIsHandedOver(t *testing.T) {
	mem, err := state.NewMemory("me", "", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	var mu sync.Mutex
	ids := map[string]string{} // question -> answer id
	r := &fakeReplier{fn: func(_ context.Context, req route.ReplyRequest) error {
		mu.Lock()
		ids[req.Text] = route.AnswerID(req.Channel, req.TS)
		mu.Unlock()
		switch req.Text {
		case "unfinished":
			return fmt.Errorf("final write: %w: %w", handlers.ErrUnclosed, context.DeadlineExceeded)
		case "panics":
			panic("a renderer met bytes it could not take")
		}
		return nil
	}}
	fs := newFakeSlack(t, fakeslack.Config{})
	h := startBot(t, fs, r, nil, Options{Replicas: memoryReplicas(mem)})
	for i, q := range []string{"finished", "unfinished", "panics"} {
		fs.PostUserMessage(fmt.Sprint("D", i), "U1", "", q)
	}
	h.waitFor(t, "the three answers", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ids) == 3 && h.bot.replies.Load() == 0
	})
	ctx := t.Context()
	for _, tc := range []struct {
		question  string
		wantOpen  bool
		wantOwner string
	}{
		{question: "finished", wantOpen: false},
		{question: "unfinished", wantOpen: true, wantOwner: ""},
		{question: "panics", wantOpen: true, wantOwner: ""},
	} {
		a, open, err := mem.Answers().Get(ctx, ids[tc.question])
		if err != nil || open != tc.wantOpen || a.Owner != tc.wantOwner {
			t.Errorf("%s: record open %v, owner %q, %v; want open %v, owner %q", tc.question, open, a.Owner, err,
				tc.wantOpen, tc.wantOwner)
		}
	}
	orphans, err := mem.Answers().Orphans(ctx)
	if err != nil || len(orphans) != 2 {
		t.Errorf("orphans %+v, %v; want the two unfinished answers, for the next sweep", orphans, err)
	}
}

// memoryReplicas is m by the parts the bot uses.
func memoryReplicas(m *state.Memory) Replicas {
	return Replicas{Claims: m.Keys(), Leases: m, Journal: m.Answers(), Inbox: m.Inbox()}
}
