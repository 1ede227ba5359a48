package bot

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// blipClaims are claims as state.FallbackKeys makes them during a Redis blip: Claim answers from
// this process's memory (first), ClaimShared says Redis did not decide.
type blipClaims struct{ state.MemoryKeys }

func (blipClaims) ClaimShared(context.Context, string, time.Duration) (bool, error) {
	return false, state.ErrNotShared
}

// When the shared store cannot decide whether the receiver took a hand-over, the clicker is not
// told to click again (the click may well have acted): this replica's memory alone cannot see the
// receiver's claim.
func TestHandoverReceiptUndecidedIsNotToldToClickAgain(t *testing.T) {
	t.Parallel()
	mem, err := state.NewMemory("r1", "", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	r2 := answeredByR2{mem, mem.Answers()}
	claims := blipClaims{mem.Keys()}
	// Whether r2 took it is in Redis alone; this process's memory has no claim of it.
	inbox := &r2Inbox{MemoryInbox: mem.Inbox()}
	fs := newFakeSlack(t, fakeslack.Config{})
	h := startBot(t, fs, &fakeReplier{}, nil, Options{InboxKey: InboxKey("xoxb-test"),
		Replicas: Replicas{Claims: claims, Leases: r2, Journal: r2, Inbox: inbox}})
	q := fs.PostUserMessage("C1", "U1", "", "a question r2 answers")
	msg := showButton(t, h, "C1", q, gateway.Button{ActionID: route.ActionStop, Text: "Stop",
		Value: route.ReplyRef{ThreadTS: q, TS: q}.Value()})
	click(t, fs, "C1", msg, "U1", route.ActionStop)
	h.waitFor(t, "the hand-over", func() bool { return inbox.count() == 1 })
	time.Sleep(receiptWait + 500*time.Millisecond) // past the check
	if got := ephemeralsTo(fs, "U1"); len(got) != 0 {
		t.Errorf("U1 told %q, want nothing", got)
	}
}
