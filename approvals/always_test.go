package approvals

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/command"
	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/state"
	"github.com/llmbot/llmbot/toolinfo"
)

var alwaysKey = []byte("the replicas' always key")

func lookupCalls(approvers ...string) []toolinfo.Call {
	return []toolinfo.Call{{Info: toolinfo.Info{Tool: llm.Tool{Name: "srv__lookup"}, Server: "srv", Approvers: approvers}, Args: []byte(`{}`)}}
}

// redisRecords are the records of a replica of one bot on a real redis-server.
func redisRecords(t *testing.T, url, self string) Records {
	t.Helper()
	r, err := state.NewRedis(t.Context(), url, "llmbot:test:", self, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r.Records()
}

func run(t *testing.T, p *Approvals, user, args string) string {
	t.Helper()
	text, err := p.Command().Run(t.Context(), command.Call{Channel: "C9", User: user, Args: args, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestAlwaysAllowedOnEveryReplicaUntilRevoked: "Always allow" given on one replica holds on the
// other (Redis), in any channel and thread, for that person only; /llmbot tools lists it and
// revoking it on either replica makes both ask again.
func TestAlwaysAllowedOnEveryReplicaUntilRevoked(t *testing.T) {
	url := redistest.New(t).URL()
	a := NewWith(nil, nil, zaptest.NewLogger(t), Options{Records: redisRecords(t, url, "a"), Key: alwaysKey})
	b := NewWith(nil, nil, zaptest.NewLogger(t), Options{Records: redisRecords(t, url, "b"), Key: alwaysKey})
	if got := run(t, b, "U1", ""); !strings.Contains(got, "no tool") {
		t.Errorf("list before any grant: %q", got)
	}
	a.keep(toolinfo.Approval{Channel: "C1", Thread: "1.1", Asker: "U1", Calls: lookupCalls()}, toolinfo.AllowAlways, a.log)
	if !b.ThreadAllowed("C2", "2.2", "U1", "srv__lookup") {
		t.Error("always allowed on one replica, not on the other")
	}
	if b.ThreadAllowed("C2", "2.2", "U2", "srv__lookup") || b.ThreadAllowed("C2", "2.2", "U1", "srv__other") {
		t.Error("allowed for another person or tool")
	}
	if got := run(t, b, "U1", "list"); !strings.Contains(got, "`srv__lookup` of *srv*") {
		t.Errorf("list: %q", got)
	}
	if got := run(t, b, "U2", "revoke srv__lookup"); !strings.Contains(got, "do not always allow") {
		t.Errorf("another person revoking: %q", got)
	}
	if got := run(t, b, "U1", "revoke `srv__lookup`"); !strings.Contains(got, "Revoked") {
		t.Errorf("revoke: %q", got)
	}
	if a.ThreadAllowed("C1", "1.1", "U1", "srv__lookup") {
		t.Error("still allowed after the revocation")
	}
	a.keep(toolinfo.Approval{Channel: "C1", Thread: "1.1", Asker: "U1", Calls: lookupCalls()}, toolinfo.AllowAlways, a.log)
	if got := run(t, a, "U1", "revoke all"); !strings.Contains(got, "Revoked 1 tools") || b.ThreadAllowed("C1", "1.1", "U1", "srv__lookup") {
		t.Errorf("revoke all: %q", got)
	}
}

// TestAlwaysNotByAForgedOrMovedRecord: whoever can write to the shared store cannot grant: a record
// sealed under another key, or one person's grant copied to another's collection, grants nothing.
func TestAlwaysNotByAForgedOrMovedRecord(t *testing.T) {
	mem, err := state.NewMemory("test", "", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	rec := mem.Records()
	replica := NewWith(nil, nil, zaptest.NewLogger(t), Options{Records: rec, Key: alwaysKey})
	forger := NewWith(nil, nil, zaptest.NewLogger(t), Options{Records: rec, Key: []byte("guessed")})
	forger.keep(toolinfo.Approval{Asker: "U1", Calls: lookupCalls()}, toolinfo.AllowAlways, forger.log)
	// The forger's record under the replica's names: the seal does not hold.
	fa, ra := forger.always, replica.always
	sealed, _, _ := rec.Get(t.Context(), fa.coll("U1"), fa.id("srv__lookup"))
	if err := rec.Put(t.Context(), ra.coll("U1"), ra.id("srv__lookup"), sealed); err != nil {
		t.Fatal(err)
	}
	if replica.ThreadAllowed("C1", "1.1", "U1", "srv__lookup") {
		t.Error("a record sealed under another key granted")
	}
	// U2's genuine grant, copied into U1's collection.
	replica.keep(toolinfo.Approval{Asker: "U2", Calls: lookupCalls()}, toolinfo.AllowAlways, replica.log)
	sealed, _, _ = rec.Get(t.Context(), ra.coll("U2"), ra.id("srv__lookup"))
	if err := rec.Put(t.Context(), ra.coll("U1"), ra.id("srv__lookup"), sealed); err != nil {
		t.Fatal(err)
	}
	if replica.ThreadAllowed("C1", "1.1", "U1", "srv__lookup") {
		t.Error("another person's grant, moved, granted")
	}
	if got := run(t, replica, "U1", ""); !strings.Contains(got, "no tool") {
		t.Errorf("U1's list shows a forged grant: %q", got)
	}
}

// TestAlwaysNotWithForeignContent: a verdict given on a prompt for a context that holds more than
// the asker's words keeps no standing grant (the prompt does not offer one; Decide refuses it).
func TestAlwaysNotWithForeignContent(t *testing.T) {
	mem, err := state.NewMemory("test", "", zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	p := NewWith(nil, nil, zaptest.NewLogger(t), Options{Records: mem.Records(), Key: alwaysKey})
	p.keep(toolinfo.Approval{Asker: "U1", Calls: lookupCalls(), Foreign: "another person's message"}, toolinfo.AllowAlways, p.log)
	if p.ThreadAllowed("C1", "1.1", "U1", "srv__lookup") {
		t.Error("always allowed from a prompt over foreign content")
	}
}

// TestApproversAloneDecide: with approvers, only they decide (the asker too only if listed), and
// neither standing grant is offered; without, the asker alone.
func TestApproversAloneDecide(t *testing.T) {
	p := New(nil, nil, zaptest.NewLogger(t))
	ref := ApprovalRef{TS: "1.1", ID: "a1", Asker: "U1", Approvers: true}
	p.add(ref.ID, waiter{deciders: deciders{"U7": true}})
	if got := p.Decide(ref, "U1", ActionToolAllowOnce); got != DecidedNotApprover {
		t.Errorf("the asker, not an approver: %v", got)
	}
	if got := p.Decide(ref, "U7", ActionToolAllowThread); got != DecidedNotOffered {
		t.Errorf("an approver's Allow for this thread: %v", got)
	}
	if got := p.Decide(ref, "U7", ActionToolAllowOnce); got != DecidedHere {
		t.Errorf("the approver: %v", got)
	}
	mine := ApprovalRef{TS: "1.1", ID: "a2", Asker: "U1"}
	p.add(mine.ID, waiter{standing: true})
	if got := p.Decide(mine, "U7", ActionToolAllowOnce); got != DecidedNotAsker {
		t.Errorf("someone else on the asker's prompt: %v", got)
	}
	if got := p.Decide(ApprovalRef{TS: "1.1", ID: "gone", Asker: "U1", Approvers: true}, "U7", ActionToolDeny); got != DecidedUnknown {
		t.Errorf("a prompt not waiting here: %v (want it handed over)", got)
	}
}

type groups map[string][]string

func (g groups) Members(_ context.Context, id string) ([]string, error) {
	if ms, ok := g[id]; ok {
		return ms, nil
	}
	return nil, errors.New("usergroups.users.list: no_such_subteam")
}

// TestApproverGroupsResolved: a user group's members may decide; a group that cannot be read fails
// the resolution (the calls are denied) rather than letting anyone approve.
func TestApproverGroupsResolved(t *testing.T) {
	p := NewWith(nil, nil, zaptest.NewLogger(t), Options{Groups: groups{"S1": {"U3", "U4"}}})
	d, err := p.resolve(t.Context(), lookupCalls("S1", "U9"))
	if err != nil || !d["U3"] || !d["U4"] || !d["U9"] || d["U1"] {
		t.Errorf("deciders %v, %v", d, err)
	}
	if d, err := p.resolve(t.Context(), lookupCalls("S2")); err == nil || d != nil {
		t.Errorf("an unreadable group resolved to %v", d)
	}
	if d, err := New(nil, nil, nil).resolve(t.Context(), lookupCalls("S1")); err == nil || d != nil {
		t.Errorf("no group reader: resolved to %v", d)
	}
	if d, err := p.resolve(t.Context(), lookupCalls()); err != nil || d != nil {
		t.Errorf("no approvers: %v, %v (want the asker: nil)", d, err)
	}
}

// TestCallsGroupedByApprovers: calls with different approvers go to different prompts, in order.
func TestCallsGroupedByApprovers(t *testing.T) {
	calls := append(append(lookupCalls("U2", "S1"), lookupCalls()...), lookupCalls("S1", "U2")...)
	gs := groupCalls(calls)
	if len(gs) != 2 || len(gs[0]) != 2 || len(gs[1]) != 1 || len(gs[1][0].Approvers) != 0 {
		t.Errorf("groups %v", gs)
	}
}
