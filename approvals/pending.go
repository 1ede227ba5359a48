package approvals

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
	"github.com/llmbot/llmbot/toolinfo"
)

// Answers are the journal of the answers in progress (the state package's): whether the answer
// an approval belongs to is still being written, by a live replica or one whose answers the
// orphans' closer has not closed yet.
type Answers interface {
	Get(ctx context.Context, id string) (state.Answer, bool, error)
}

// Claims let one replica of several do a thing once (the state package's keys).
type Claims interface {
	Claim(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// pendingRecord is an approval waiting for its click, kept in the shared records while it waits:
// ids, tool names, who may decide and until when; never the arguments. A replica that restarts
// (or another one) finds it once its answer is no longer open, and rewrites its line as lapsed.
type pendingRecord struct {
	ID        string    `json:"id"`
	Channel   string    `json:"channel"`
	Line      string    `json:"line"`   // ts of the approval's message in the thread
	Answer    string    `json:"answer"` // route.AnswerID of the answer that asked
	Tools     []string  `json:"tools"`
	Approvers []string  `json:"approvers,omitempty"`
	Deadline  time.Time `json:"deadline"`
	// Owner is the replica waiting for the click (Leases.Self; "" without Leases): while it is
	// alive, it alone lapses the approval.
	Owner string `json:"owner,omitempty"`
}

// Leases tell which replica this is and whether another one is alive (the state package's).
type Leases interface {
	Self() string
	Alive(ctx context.Context, replica string) (bool, error)
}

// collPending is the collection of the pending approvals.
const collPending = "tool-approvals-pending"

// How often the pending approvals are looked at, and how long after its deadline one whose answer
// is still open counts as lapsed all the same (its replica settles it at the deadline).
const (
	lapseSweep   = 5 * time.Second
	lapseGrace   = time.Minute
	lapseTimeout = 30 * time.Second
	// staleAfter: a record this long past its deadline is removed without a word (its line was
	// deleted, or could not be rewritten all this time).
	staleAfter = 24 * time.Hour
)

// TextLapsed is what an approval's line says once the bot restarted while it waited.
const TextLapsed = "_Lapsed: %s waited for approval when the bot restarted, and was not used. Ask again._"

// remember keeps q's pending approval id, posted as line, until forget (best effort: without it a
// restart leaves the line as it is, and a click on it is told that the request lapsed all the same).
func (p *Approvals) remember(q toolinfo.Approval, id, line string, log *zap.Logger) {
	if p.opt.Records == nil || len(p.opt.Key) == 0 {
		return
	}
	r := pendingRecord{ID: id, Channel: q.Channel, Line: line, Answer: route.AnswerID(q.Channel, q.TS),
		Approvers: approversOf(q.Calls[0]), Deadline: time.Now().Add(q.Wait).UTC()}
	if p.opt.Leases != nil {
		r.Owner = p.opt.Leases.Self()
	}
	for _, c := range q.Calls {
		r.Tools = append(r.Tools, c.Name)
	}
	b, _ := json.Marshal(r) // strings and a time: cannot fail
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if err := p.opt.Records.Put(ctx, collPending, id, state.Seal(p.opt.Key, collPending, id, b)); err != nil {
		log.Warn("pending tool approval not kept", zap.Error(err))
	}
}

// forget removes the pending approval id, decided; until that works, id stays among the decided
// (settled) ones, which the sweeps remove again and never lapse.
func (p *Approvals) forget(id string, log *zap.Logger) {
	if p.opt.Records == nil || len(p.opt.Key) == 0 {
		p.done.drop(id)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	if err := p.opt.Records.Delete(ctx, collPending, id); err != nil {
		log.Warn("decided tool approval not removed; removed again later", zap.Error(err))
		return
	}
	p.done.drop(id)
}

// forgetDecided removes again the records of the approvals decided here whose removal failed.
func (p *Approvals) forgetDecided() {
	for _, id := range p.done.all() {
		p.forget(id, p.log)
	}
}

// WatchLapsed rewrites, every few seconds until ctx ends, the lines of the pending approvals whose
// answer is no longer open (its replica restarted or died, and the orphans' closer closed it) as
// lapsed, and removes them. Without Options.Records, Answers or Lines it returns at once.
func (p *Approvals) WatchLapsed(ctx context.Context) {
	if p.opt.Records == nil || len(p.opt.Key) == 0 || p.opt.Answers == nil || p.opt.Lines == nil {
		return
	}
	t := time.NewTicker(lapseSweep)
	defer t.Stop()
	for {
		p.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep lapses the pending approvals found lapsed in two sweeps in a row (one slow shared call may
// answer from this replica's memory, where another's answer and liveness are not).
func (p *Approvals) sweep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, lapseTimeout)
	defer cancel()
	p.forgetDecided()
	all, err := p.opt.Records.List(ctx, collPending)
	if err != nil {
		p.log.Debug("pending tool approvals not read", zap.Error(err))
		return
	}
	suspects := map[string]bool{} // lapsed in this sweep: lapsed by the next one if still so
	for id, sealed := range all {
		b, ok := state.Unseal(p.opt.Key, collPending, id, sealed)
		var r pendingRecord
		if !ok || json.Unmarshal(b, &r) != nil || r.ID != id {
			continue // not one of this bot's: never acted on
		}
		if time.Since(r.Deadline) > staleAfter {
			p.forget(r.ID, p.log) // its line could never be rewritten: it only fills the collection
			continue
		}
		if !p.lapsed(ctx, r) {
			continue
		}
		suspects[id] = true
		if p.suspects[id] && claim(ctx, p.opt.Claims, r.ID) && stillPending(ctx, p.opt.Records, r.ID) {
			p.lapse(ctx, r)
		}
	}
	p.suspects = suspects
}

// lapsed reports whether r waits no more: not here, nor decided here, and its replica is this
// one (restarted) or dead with its answer closed. The journal alone never says so (a slow call
// answers from this replica's memory, where another's answer is not open); a record with no
// owner (no Leases) lapses once its answer is closed or long past its deadline.
func (p *Approvals) lapsed(ctx context.Context, r pendingRecord) bool {
	p.mu.Lock()
	_, here := p.waiting[r.ID]
	p.mu.Unlock()
	decided := p.done.has(r.ID)
	if here || decided {
		return false
	}
	if r.Owner != "" && p.opt.Leases != nil {
		return ownerGone(ctx, p.opt.Leases, p.opt.Answers, r)
	}
	_, open, err := p.opt.Answers.Get(ctx, r.Answer)
	return err == nil && (!open || time.Now().After(r.Deadline.Add(lapseGrace)))
}

// ownerGone reports whether r's replica waits for it no more: this one (it is not waiting here),
// or another one that is not alive and whose answer is closed.
func ownerGone(ctx context.Context, l Leases, a Answers, r pendingRecord) bool {
	if r.Owner == l.Self() {
		return true
	}
	alive, err := l.Alive(ctx, r.Owner)
	if err != nil || alive {
		return false
	}
	_, open, err := a.Get(ctx, r.Answer)
	return err == nil && !open
}

// stillPending reports whether record id is still kept, read again once claimed: the listing may be older
// than the click that decided it (its replica then settled its line and removed it).
func stillPending(ctx context.Context, rec Records, id string) bool {
	_, ok, err := rec.Get(ctx, collPending, id)
	return err == nil && ok
}

// claim reports whether this replica rewrites the lapsed approval id (another one may be sweeping
// too); a claim lasts as long as a sweep may, so a rewrite that failed is tried again later.
func claim(ctx context.Context, c Claims, id string) bool {
	if c == nil {
		return true
	}
	ok, err := c.Claim(ctx, "tool-approval-lapsed:"+id, lapseTimeout)
	return err == nil && ok
}

// lapse rewrites r's line as lapsed, without buttons, and removes r.
func (p *Approvals) lapse(ctx context.Context, r pendingRecord) {
	log := p.log.With(zap.String("channel", r.Channel), zap.String("line", r.Line))
	w := p.opt.Lines
	lane := w.EditLane()
	defer lane.Close()
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = "`" + safeName(t) + "`"
	}
	text := fmt.Sprintf(TextLapsed, strings.Join(names, ", "))
	err := w.Update(ctx, gateway.InterimRetry, nil, w.EditTurn(lane, pace.Final, time.Now()), r.Channel, r.Line,
		gateway.Msg{Text: text, Mark: noticeMark, Buttons: []gateway.Button{}})
	if err != nil && !goneForGood(err) {
		log.Warn("lapsed tool approval not rewritten; tried again later", zap.Error(err))
		return
	}
	p.opt.Decided("lapsed", len(r.Approvers) > 0)
	log.Info("tool approval lapsed: its answer ended without it")
	p.forget(r.ID, log)
}

// goneForGood reports whether err means the line can never be rewritten (deleted, or the channel
// gone): the record goes all the same.
func goneForGood(err error) bool {
	switch gateway.SlackErr(err) {
	case "message_not_found", "channel_not_found", "is_archived", "cant_update_message", "not_in_channel":
		return true
	}
	return false
}

// decidedIDs are the approvals decided here whose pending record is not removed yet.
type decidedIDs struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (d *decidedIDs) add(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ids == nil {
		d.ids = map[string]bool{}
	}
	d.ids[id] = true
}

func (d *decidedIDs) drop(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.ids, id)
}

func (d *decidedIDs) has(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ids[id]
}

func (d *decidedIDs) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]string, 0, len(d.ids))
	for id := range d.ids {
		ids = append(ids, id)
	}
	return ids
}
