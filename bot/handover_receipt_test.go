package bot

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// answeredByR2 is the journal of an answer replica r2 writes, alive as far as the leases say.
type answeredByR2 struct {
	*state.Memory
	state.MemoryAnswers
}

func (answeredByR2) Alive(context.Context, string) (bool, error) { return true, nil }

func (answeredByR2) Get(context.Context, string) (state.Answer, bool, error) {
	return state.Answer{Owner: "r2"}, true, nil
}

// r2Inbox is r2's inbox: a live r2 takes what it is sent (claims its receipt, as firstDelivery
// does); a dead one never reads it.
type r2Inbox struct {
	state.MemoryInbox
	claims Claims
	alive  bool
	mu     sync.Mutex
	sent   int
}

func (i *r2Inbox) Send(ctx context.Context, replica string, msg []byte) error {
	i.mu.Lock()
	i.sent++
	i.mu.Unlock()
	if i.alive {
		_, err := i.claims.Claim(ctx, receiptOf(msg), 2*handoverMaxAge)
		return err
	}
	return nil
}

func (i *r2Inbox) count() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.sent
}

// A Stop clicked here on an answer another replica writes is handed to it; when that replica died
// before its liveness ran out (it never takes the hand-over), the person is told to click again
// rather than left with nothing; when it took it, nothing is said here.
func TestHandoverNotTakenIsTold(t *testing.T) {
	for _, tc := range []struct {
		name  string
		alive bool
		told  []string
	}{
		{"taken by the writer", true, nil},
		{"the writer died before its liveness ran out", false, []string{handlers.TextStopFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem, err := state.NewMemory("r1", "", zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = mem.Close() })
			r2 := answeredByR2{mem, mem.Answers()}
			inbox := &r2Inbox{MemoryInbox: mem.Inbox(), claims: mem.Keys(), alive: tc.alive}
			fs := newFakeSlack(t, fakeslack.Config{})
			h := startBot(t, fs, &fakeReplier{}, nil, Options{InboxKey: InboxKey("xoxb-test"),
				Replicas: Replicas{Claims: mem.Keys(), Leases: r2, Journal: r2, Inbox: inbox}})
			q := fs.PostUserMessage("C1", "U1", "", "a question r2 answers")
			msg := showButton(t, h, "C1", q, gateway.Button{ActionID: route.ActionStop, Text: "Stop",
				Value: route.ReplyRef{ThreadTS: q, TS: q}.Value()})
			click(t, fs, "C1", msg, "U1", route.ActionStop)
			h.waitFor(t, "the hand-over", func() bool { return inbox.count() == 1 })
			if tc.told != nil {
				h.waitFor(t, "the note", func() bool { return len(ephemeralsTo(fs, "U1")) > 0 })
			} else {
				time.Sleep(receiptWait + 500*time.Millisecond) // past the check: nothing to see
			}
			if got := ephemeralsTo(fs, "U1"); !slices.Equal(got, tc.told) {
				t.Errorf("U1 told %q, want %q", got, tc.told)
			}
		})
	}
}
