package bot

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// inboxEndingAtPop is an inbox whose one message is popped just as the reader's context ends.
type inboxEndingAtPop struct {
	state.MemoryInbox
	msg    []byte
	cancel context.CancelFunc
}

func (i *inboxEndingAtPop) Receive(ctx context.Context) ([]byte, error) {
	if i.msg == nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	msg := i.msg
	i.msg = nil
	i.cancel()
	return msg, nil
}

// A hand-over popped from the inbox as the reader stops (its receipt claimed, so its sender takes it
// as delivered) is passed on, not dropped.
func TestReceivePassesOnWhatItPoppedAsItStops(t *testing.T) {
	const self = "r1"
	key := InboxKey("xoxb-test")
	mem, err := state.NewMemory(self, "", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	h := handover{Action: route.EventSessionStopped, Team: "T1", Channel: "C1", User: "U1",
		ThreadTS: "1700000000.000100", From: "r2", To: self, Sent: time.Now().UnixMilli()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inbox := &inboxEndingAtPop{MemoryInbox: mem.Inbox(), msg: mustSeal(t, key, h), cancel: cancel}
	r := &replicas{shared: Replicas{Claims: mem.Keys(), Leases: mem, Journal: mem.Answers(), Inbox: inbox},
		inboxKey: key, log: zaptest.NewLogger(t)}
	out := make(chan *route.Request)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.receive(ctx, out)
	}()
	select {
	case req := <-out:
		if req == nil || req.Name != route.EventSessionStopped || req.From != "r2" {
			t.Fatalf("passed on %+v, want the session's Stop from r2", req)
		}
	case <-done:
		t.Fatal("the popped hand-over was dropped")
	case <-time.After(waitTimeout):
		t.Fatal("nothing passed on")
	}
	if _, open := <-out; open {
		t.Error("more passed on")
	}
	if first, err := mem.Keys().Claim(context.Background(), receiptOf(mustSeal(t, key, h)), time.Minute); err == nil && first {
		t.Error("the receipt was not claimed")
	}
}

// While a replica drains (SIGTERM, a rolling deploy), the clicks other replicas hand to it still act:
// its inbox is read until its work has ended.
func TestDrainingReplicaTakesHandovers(t *testing.T) {
	const self = "r1"
	key := InboxKey("xoxb-test")
	mem, err := state.NewMemory(self, "", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	release := make(chan struct{})
	running := make(chan struct{}, 1)
	// The work in progress: a session Stop's route that runs until released (an answer still draining).
	slow := route.Funcs{AcceptFunc: func(*route.Request) route.Decision { return route.Decision{Run: true, Now: true} },
		RunFunc: func(ctx context.Context, _ *route.Request) error {
			running <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}}
	rec := &recorder{}
	fs := newFakeSlack(t, fakeslack.Config{})
	hs := startBot(t, fs, &fakeReplier{}, nil, Options{Replicas: memoryReplicas(mem), InboxKey: key, Grace: 20 * time.Second},
		route.Route{Kind: route.Action, Name: approvals.ActionToolAllowOnce, Handler: rec.handler()},
		route.Route{Kind: route.Event, Name: route.EventSessionStopped, Handler: slow})

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	now := time.Now()
	session := handover{Action: route.EventSessionStopped, Team: "T1", Channel: "C1", User: "U1",
		ThreadTS: "1700000000.000100", From: "r2", To: self, Sent: now.UnixMilli()}
	if err := mem.Inbox().Send(ctx, self, mustSeal(t, key, session)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-ctx.Done():
		t.Fatal("the work never started")
	}
	hs.stop() // SIGTERM: the work drains
	hs.waitFor(t, "the loop's end", func() bool {
		select {
		case <-hs.bot.ended:
			return true
		default:
			return false
		}
	})
	approval := handover{Action: approvals.ActionToolAllowOnce, Team: "T1", Channel: "C1", User: "U1",
		ThreadTS: "1700000000.000100", MessageTS: "1700000000.000300", RefThreadTS: "1700000000.000100",
		RefTS: "1700000000.000200", Call: "0123456789abcdef", Asker: "U1", From: "r2", To: self,
		Sent: time.Now().UnixMilli()}
	if err := mem.Inbox().Send(ctx, self, mustSeal(t, key, approval)); err != nil {
		t.Fatal(err)
	}
	hs.waitFor(t, "the approval dispatched while draining", func() bool { return len(rec.got()) == 1 })
	close(release)
	select {
	case <-hs.errc:
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return once the work ended")
	}
	hs.errc <- nil // for the cleanup
}
