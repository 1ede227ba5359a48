package approvals

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/command"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/state"
	"github.com/llmbot/llmbot/toolinfo"
)

// hookRecords are records whose Delete and List may be replaced.
type hookRecords struct {
	Records
	del  func(ctx context.Context, coll, id string) error // nil: the records'
	list map[string][]byte                                // non-nil: what List answers (a stale listing)
}

func (h *hookRecords) Delete(ctx context.Context, coll, id string) error {
	if h.del != nil {
		return h.del(ctx, coll, id)
	}
	return h.Records.Delete(ctx, coll, id)
}

func (h *hookRecords) List(ctx context.Context, coll string) (map[string][]byte, error) {
	if h.list != nil {
		return h.list, nil
	}
	return h.Records.List(ctx, coll)
}

// leases are replicas' liveness: self, and the others alive.
type leases struct {
	self  string
	alive map[string]bool
}

func (l leases) Self() string { return l.self }
func (l leases) Alive(_ context.Context, r string) (bool, error) {
	return r == l.self || l.alive[r], nil
}

type lapseRig struct {
	mem   *state.Memory
	slack *gatewaytest.Slack
	lines *gateway.Writer
}

func newLapseRig(t *testing.T) lapseRig {
	t.Helper()
	mem, err := state.NewMemory("test", "", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	slack := gatewaytest.NewSlack()
	return lapseRig{mem: mem, slack: slack, lines: &gateway.Writer{Budgets: gateway.NewBudgets(600, pace.PolicyFair), Msgs: slack}}
}

func (r lapseRig) replica(t *testing.T, rec Records, ans Answers, l Leases) *Approvals {
	return NewWith(nil, nil, zaptest.NewLogger(t), Options{Records: rec, Key: alwaysKey, Answers: ans, Lines: r.lines, Leases: l})
}

func (r lapseRig) last() *gatewaytest.Message { return r.slack.Msgs[len(r.slack.Msgs)-1] }

var lapseQ = toolinfo.Approval{Channel: "C1", Thread: "1700000000.000100", TS: "1700000000.000100", Asker: "U1",
	Calls: lookupCalls(), Wait: 20 * time.Millisecond, Settle: time.Second}

// TestLiveReplicasApprovalNotLapsedOnAJournalMiss: another replica's pending approval is not lapsed
// because this replica's journal does not find its answer (a slow Redis call answered from its
// own memory): only once its replica is gone.
func TestLiveReplicasApprovalNotLapsedOnAJournalMiss(t *testing.T) {
	rig := newLapseRig(t)
	a := rig.replica(t, rig.mem.Records(), openAnswers{}, leases{self: "a"})
	line, _ := rig.slack.Post(t.Context(), "C1", lapseQ.Thread, gateway.Msg{Text: "_Waiting…_"})
	a.add("a1", waiter{})
	a.remember(lapseQ, "a1", line, a.log)
	l := leases{self: "b", alive: map[string]bool{"a": true}}
	b := rig.replica(t, rig.mem.Records(), openAnswers{}, l)
	b.sweep(t.Context())
	b.sweep(t.Context())
	if strings.Contains(rig.last().Text, "Lapsed") {
		t.Fatal("a live replica's approval lapsed on a journal miss")
	}
	delete(l.alive, "a")
	b.sweep(t.Context())
	b.sweep(t.Context())
	if !strings.Contains(rig.last().Text, "Lapsed") {
		t.Errorf("a dead replica's approval did not lapse: %q", rig.last().Text)
	}
}

// TestSettledApprovalNotLapsedWhenItsRecordStays: an approval decided here whose record could not
// be removed keeps its verdict (no sweep rewrites it as lapsed), and the record is removed later.
func TestSettledApprovalNotLapsedWhenItsRecordStays(t *testing.T) {
	rig := newLapseRig(t)
	failing := true
	rec := &hookRecords{Records: rig.mem.Records()}
	rec.del = func(ctx context.Context, coll, id string) error {
		if failing {
			return errors.New("redis: i/o timeout")
		}
		return rig.mem.Records().Delete(ctx, coll, id)
	}
	p := rig.replica(t, rec, openAnswers{}, nil)
	if v := p.Approve(t.Context(), rig.lines, lapseQ); v != toolinfo.TimedOut {
		t.Fatalf("verdict %v", v)
	}
	p.sweep(t.Context())
	p.sweep(t.Context())
	if got := rig.last().Text; !strings.Contains(got, "Not answered in time") {
		t.Fatalf("a settled approval rewritten: %q", got)
	}
	failing = false
	p.sweep(t.Context())
	if all, _ := rig.mem.Records().List(t.Context(), collPending); len(all) != 0 {
		t.Errorf("the decided approval's record is kept: %v", all)
	}
	if got := rig.last().Text; !strings.Contains(got, "Not answered in time") {
		t.Errorf("a settled approval rewritten: %q", got)
	}
}

// TestStaleListingDoesNotLapse: a record listed before its approval was decided (and removed) is
// read again once claimed, and left alone.
func TestStaleListingDoesNotLapse(t *testing.T) {
	rig := newLapseRig(t)
	a := rig.replica(t, rig.mem.Records(), openAnswers{}, nil)
	line, _ := rig.slack.Post(t.Context(), "C1", lapseQ.Thread, gateway.Msg{Text: "_Allowed once._"})
	a.remember(lapseQ, "a1", line, a.log)
	stale, _ := rig.mem.Records().List(t.Context(), collPending)
	a.forget("a1", a.log)
	b := rig.replica(t, &hookRecords{Records: rig.mem.Records(), list: stale}, openAnswers{}, nil)
	b.sweep(t.Context())
	b.sweep(t.Context())
	if got := rig.last().Text; strings.Contains(got, "Lapsed") {
		t.Errorf("a decided approval lapsed from a stale listing: %q", got)
	}
}

// TestLateClickIsToldTheApprovalIsOver: a click after the wait ended (a timeout), while the line is
// settled and the record removed, is not taken as delivered (its person would be told "Allowed").
func TestLateClickIsToldTheApprovalIsOver(t *testing.T) {
	rig := newLapseRig(t)
	rec := &hookRecords{Records: rig.mem.Records()}
	var late []Decided
	var p *Approvals
	rec.del = func(ctx context.Context, coll, id string) error {
		late = append(late, p.Decide(ApprovalRef{TS: lapseQ.TS, ID: id, Asker: "U1"}, "U1", ActionToolAllowOnce))
		return rig.mem.Records().Delete(ctx, coll, id)
	}
	p = rig.replica(t, rec, openAnswers{}, nil)
	if v := p.Approve(t.Context(), rig.lines, lapseQ); v != toolinfo.TimedOut {
		t.Fatalf("verdict %v", v)
	}
	if len(late) != 1 || late[0] != DecidedUnknown {
		t.Errorf("a late click: %v, want DecidedUnknown", late)
	}
}

// TestRevocationNotSaidDoneWhenTheGrantStays: a revocation whose Delete reported success but left
// the grant (a shared store's failure hidden behind the local copy's removal) is not said to be done.
func TestRevocationNotSaidDoneWhenTheGrantStays(t *testing.T) {
	rig := newLapseRig(t)
	rec := &hookRecords{Records: rig.mem.Records(), del: func(context.Context, string, string) error { return nil }}
	p := rig.replica(t, rec, openAnswers{}, nil)
	p.keep(toolinfo.Approval{Channel: "C1", Thread: "1.1", Asker: "U1", Calls: lookupCalls()}, toolinfo.AllowAlways, p.log)
	got, err := p.Command().Run(t.Context(), command.Call{Channel: "C9", User: "U1", Args: "revoke srv__lookup", Now: time.Now()})
	if err == nil || strings.Contains(got, "Revoked") {
		t.Errorf("a revocation that did not hold: %q, %v", got, err)
	}
}

// TestForgedAskerDoesNotDecide: who may decide is the waiting prompt's asker, not the one a button's
// value names (a forged value naming the clicker, or claiming approvers).
func TestForgedAskerDoesNotDecide(t *testing.T) {
	p := New(nil, nil, zaptest.NewLogger(t))
	p.add("a1", waiter{asker: "U1", standing: true})
	for _, ref := range []ApprovalRef{{TS: "1.1", ID: "a1", Asker: "U7"}, {TS: "1.1", ID: "a1", Asker: "U7", Approvers: true}} {
		if got := p.Decide(ref, "U7", ActionToolAllowOnce); got != DecidedNotAsker {
			t.Errorf("%+v: %v, want DecidedNotAsker", ref, got)
		}
	}
	if got := p.Decide(ApprovalRef{TS: "1.1", ID: "a1", Asker: "U1"}, "U1", ActionToolAllowOnce); got != DecidedHere {
		t.Errorf("the asker: %v", got)
	}
}

// ephemerals post nothing until their context ends, counting the posts in progress.
type ephemerals struct {
	mu       sync.Mutex
	now, top int
}

func (e *ephemerals) PostEphemeral(ctx context.Context, _, _, _ string, _ gateway.Msg) error {
	e.mu.Lock()
	e.now++
	e.top = max(e.top, e.now)
	e.mu.Unlock()
	<-ctx.Done()
	e.mu.Lock()
	e.now--
	e.mu.Unlock()
	return ctx.Err()
}

func (e *ephemerals) RespondPrivate(context.Context, string, gateway.Private) error { return nil }

// TestStopDoesNotWaitForThePrivatePrompts: a Stop while the private prompts are being posted (to
// each approver in turn, up to showTimeout each) ends the approval at once.
func TestStopDoesNotWaitForThePrivatePrompts(t *testing.T) {
	rig := newLapseRig(t)
	p := NewWith(nil, nil, zaptest.NewLogger(t), Options{Private: &ephemerals{}})
	ctx, stop := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, stop)
	q := lapseQ
	q.Calls, q.Wait = lookupCalls("U7", "U8"), time.Minute
	began := time.Now()
	if v := p.Approve(ctx, rig.lines, q); v != toolinfo.Cancelled {
		t.Errorf("verdict %v", v)
	}
	if took := time.Since(began); took > showTimeout/2 {
		t.Errorf("a Stop took %v", took)
	}
}

// TestShowApprovalClicksBounded: Show approval clicks post at most maxShows prompts at a time, and
// the prompt, decided, waits for them (none is left running).
func TestShowApprovalClicksBounded(t *testing.T) {
	rig := newLapseRig(t)
	e := &ephemerals{}
	p := NewWith(nil, nil, zaptest.NewLogger(t), Options{Private: e})
	q := lapseQ
	q.Calls, q.Wait = lookupCalls(), 300*time.Millisecond
	done := make(chan toolinfo.Verdict)
	go func() { done <- p.Approve(t.Context(), rig.lines, q) }()
	var ref ApprovalRef
	for ref.ID == "" {
		time.Sleep(10 * time.Millisecond)
		p.mu.Lock()
		for id := range p.waiting {
			ref = ApprovalRef{TS: q.TS, ID: id, Asker: "U1"}
		}
		p.mu.Unlock()
	}
	for range 3 * maxShows {
		p.Decide(ref, "U1", ActionToolShowApproval)
	}
	<-done
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.top > maxShows+1 || e.now != 0 { // +1: the first prompt, shown at once
		t.Errorf("%d posts at a time (want at most %d), %d left running", e.top, maxShows+1, e.now)
	}
}

// TestStaleRecordsRemoved: a record a day past its deadline goes, even while its replica is alive
// (its line could never be rewritten): the collection does not fill up.
func TestStaleRecordsRemoved(t *testing.T) {
	rig := newLapseRig(t)
	a := rig.replica(t, rig.mem.Records(), openAnswers{}, leases{self: "a"})
	q := lapseQ
	q.Wait = -25 * time.Hour
	a.remember(q, "old", "1700000000.000200", a.log)
	b := rig.replica(t, rig.mem.Records(), openAnswers{}, leases{self: "b", alive: map[string]bool{"a": true}})
	b.sweep(t.Context())
	if all, _ := rig.mem.Records().List(t.Context(), collPending); len(all) != 0 {
		t.Errorf("a stale record is kept: %v", all)
	}
}

// TestOneBlipDoesNotLapse: a replica taken for dead by one sweep alone (a slow shared call answered
// from this replica's memory) keeps its approval: a lapse needs two sweeps in a row.
func TestOneBlipDoesNotLapse(t *testing.T) {
	rig := newLapseRig(t)
	a := rig.replica(t, rig.mem.Records(), openAnswers{}, leases{self: "a"})
	line, _ := rig.slack.Post(t.Context(), "C1", lapseQ.Thread, gateway.Msg{Text: "_Waiting…_"})
	a.add("a1", waiter{})
	a.remember(lapseQ, "a1", line, a.log)
	l := leases{self: "b", alive: map[string]bool{}}
	b := rig.replica(t, rig.mem.Records(), openAnswers{}, l)
	b.sweep(t.Context()) // the blip
	l.alive["a"] = true
	b.sweep(t.Context())
	b.sweep(t.Context())
	if strings.Contains(rig.last().Text, "Lapsed") {
		t.Error("a live replica's approval lapsed on one blip")
	}
}
