// Package orphans closes the answers a replica left open when it died (a crash, an OOM kill, a lost
// node): every few seconds it reads the journal of open answers (package state) for those whose
// replica is no longer alive, adopts each (so exactly one replica closes it), and marks what Slack
// shows of it as interrupted, with the answers' Regenerate, or posts a note where it showed nothing.
// Its reads and writes take only what the answers in progress leave of the shared budgets.
//
// It owns the orphans' side of the journal (Journal), their notes (TextOrphaned,
// TextOrphanedNothing) and when an orphan is closed, kept for later or dropped. It imports no other
// use case: the answers write the journal (handlers.Journal), and the marks it reads and writes are
// package convo's.
package orphans

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/watch"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
	"github.com/llmbot/llmbot/state"
)

// Journal is the journal of open answers (package state) as the replica that closes other replicas'
// answers sees it: the answers whose replica died, which one live replica adopts, closes in Slack
// and removes.
type Journal interface {
	Orphans(ctx context.Context) ([]state.Answer, error)
	Adopt(ctx context.Context, id string) (state.Answer, bool, error)
	CloseAnswer(ctx context.Context, id string) error
	// Abandon hands an adopted answer back, an orphan again for the next sweep of any replica.
	Abandon(ctx context.Context, id string) error
}

// What a closed orphan says.
const (
	// TextOrphaned closes an answer whose replica died mid-answer (a crash, a lost node): another
	// replica, or the restarted one, keeps what it showed and adds this.
	TextOrphaned = "Interrupted: the bot stopped before finishing this answer. Ask again to get a full answer."
	// TextOrphanedNothing is the same for an answer that showed nothing yet.
	TextOrphanedNothing = "I was interrupted before I could answer (the bot stopped). Please ask again."
)

const (
	// journalTimeout bounds one journal write. The state package answers from memory when its
	// store is slow, so this is a last resort.
	journalTimeout = 3 * time.Second
	// defaultHistoryLimit is Options.HistoryLimit's default, the answers' own.
	defaultHistoryLimit = 20
	// orphanSweep is how often WatchOrphans looks for answers left open by a dead replica. With the
	// state package's liveness TTL (15 s), such an answer is closed within about 20 s of the death.
	orphanSweep = 5 * time.Second
	// orphansAtOnce bounds the orphans closed at once: each takes a read and a write from the
	// shared budgets, which the answers in progress need too.
	orphansAtOnce = 8
	// orphanTimeout bounds the closing of one orphan (a read and an edit or a post).
	orphanTimeout = 30 * time.Second
	// orphanClockSkew is how far Slack's clock (message ts) may be behind the replica's (the
	// journal's start time) when closeOrphan looks for the answer's messages by their marks.
	orphanClockSkew = 30 * time.Second
	// orphanReadPoll is how often an orphan's thread read looks for a spare read token: the read
	// budget (Tier 3) serves the answers in progress first.
	orphanReadPoll = 500 * time.Millisecond
)

// Closer closes the answers other replicas (or this one before a restart) left open when they
// died. It is a use case of its own beside the answers: it shares with them only the Slack budgets
// (Options.Budgets, the same pace values) and the fence, so its reads and writes queue behind the
// answers in progress and never for them.
type Closer struct {
	thread gateway.Thread
	paced  *gateway.Writer
	log    *zap.Logger
	opt    Options
}

// Options are the settings the answers that a Closer closes were written with.
type Options struct {
	// Budgets are the answers' Slack budgets (handlers.ReplyOptions.Budgets).
	Budgets gateway.Budgets
	// Fence, when set, holds back this replica's writes while other replicas could take it for dead.
	Fence gateway.Fence
	// BotUserID and BotID are who the bot is in Slack (auth.test): only its own messages are closed.
	BotUserID, BotID string
	// Buttons puts Regenerate on a closed orphan (handlers.ReplyOptions.Buttons).
	Buttons bool
	// Quiet is how long the messages of another replica's orphaned answer must have been unchanged
	// before it is closed: the shared state's liveness TTL with Redis, where an owner taken for dead
	// may be cut off rather than gone, and a write it had on its way when it was fenced must land
	// before the note, not after it. 0 (a local journal, whose owner was this process before a
	// restart): at once.
	Quiet time.Duration
	// HistoryLimit is how many messages of a top-level DM are read (the answers' own; default 20).
	HistoryLimit int
}

// New returns a Closer reading t and writing with m, under opt.
func New(t gateway.Thread, m gateway.Messenger, log *zap.Logger, opt Options) *Closer {
	if log == nil {
		log = zap.NewNop()
	}
	if opt.Fence != nil {
		m = gateway.FencedMessenger{Messenger: m, Fence: opt.Fence}
	}
	opt.HistoryLimit = cmp.Or(max(opt.HistoryLimit, 0), defaultHistoryLimit)
	return &Closer{thread: t, paced: &gateway.Writer{Budgets: opt.Budgets.WithDefaults(), Msgs: m}, log: log, opt: opt}
}

// goneForGood reports a Slack error after which an orphan cannot be closed however often it is
// tried: the bot left the channel, the channel or the message is gone, or the channel is archived.
func goneForGood(err error) bool {
	switch gateway.SlackErr(err) {
	case "channel_not_found", "not_in_channel", "message_not_found", "is_archived":
		return true
	}
	return false
}

// WatchOrphans closes the answers left open by replicas that died (a crash, an OOM kill, a lost
// node), now and every few seconds until ctx ends: a restarted process finds its own earlier
// answers at once. Each is adopted first, so exactly one replica closes it.
func (r *Closer) WatchOrphans(ctx context.Context, j Journal) {
	for {
		r.CloseOrphans(ctx, j)
		t := time.NewTimer(orphanSweep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// CloseOrphans closes, once, every answer in the journal whose replica is no longer alive: what
// Slack shows of it stays, marked as interrupted, with Regenerate; an answer that showed nothing
// yet gets a note saying so. Up to orphansAtOnce are closed at once: a replica that died with
// many answers open must not leave the last of them waiting minutes. Failures are logged: the
// asker is better served by the next answer than by a retry storm.
func (r *Closer) CloseOrphans(ctx context.Context, j Journal) {
	list, err := j.Orphans(ctx)
	if err != nil {
		r.log.Warn("orphaned answers: journal not read", zap.Error(err))
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	places := make(chan struct{}, orphansAtOnce) // a place per close in progress
	for _, o := range list {
		select {
		case places <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-places }()
			defer r.survive(ctx, j, o)
			r.closeOrphanOf(ctx, j, o)
		})
	}
}

// survive, deferred by the goroutine closing o, turns its panic (a message or a record whose bytes
// the closing code could not take) into one error line with the stack, and drops the record: a close
// that panicked would panic again at every sweep, and the bot goes on either way.
func (r *Closer) survive(ctx context.Context, j Journal, o state.Answer) {
	p := recover()
	if p == nil {
		return
	}
	r.log.Error("closing an orphaned answer panicked; its record is dropped",
		zap.String("panic", fmt.Sprint(p)), zap.ByteString("stack", debug.Stack()), zap.String("id", o.ID))
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalTimeout)
	defer cancel()
	if err := j.CloseAnswer(cctx, o.ID); err != nil {
		r.log.Warn("orphaned answer's record not dropped", zap.String("id", o.ID), zap.Error(err))
	}
}

// closeOrphanOf closes o. It reads what Slack shows of it first (with read budget nobody waits for,
// once its messages are quiet), and only then adopts it: an orphan that could not be read in time
// stays for a later sweep, here or on another replica, rather than being taken and dropped. It then
// writes the close, unless Slack shows the answer closed already, and removes the record. When ctx
// ends first (this replica is stopping), the record stays: once this replica is gone it is an orphan
// again, for another to close. A close that failed for a reason that may pass hands the record back.
func (r *Closer) closeOrphanOf(ctx context.Context, j Journal, o state.Answer) {
	log := r.log.With(zap.String("channel", o.Channel), zap.String("ts", o.TS), zap.String("owner_was", o.Owner))
	cctx, cancel := context.WithTimeout(ctx, orphanTimeout)
	defer cancel()
	shown, err := r.quietShownOf(cctx, o)
	if err != nil && !goneForGood(err) {
		if ctx.Err() == nil {
			log.Debug("orphaned answer not read yet; left for the next sweep", zap.Error(err))
		}
		return
	}
	a, ok, aerr := j.Adopt(ctx, o.ID)
	if aerr != nil || !ok {
		return // another replica took it, or it was closed meanwhile
	}
	whole := err == nil && convo.ShowsClosed(shown)
	if err == nil && !whole {
		// Its owner's closing write may have landed between the read and the adoption (a write already
		// on its way as its liveness ran out): read once more, and leave an answer shown done as it is.
		if again, rerr := r.shownOf(cctx, a); rerr == nil {
			shown, whole = again, convo.ShowsClosed(again)
		}
	}
	if err == nil && !whole {
		err = r.closeShown(cctx, a, shown)
	}
	switch {
	case ctx.Err() != nil:
		log.Info("orphaned answer left for another replica: this one is stopping")
		return
	case goneForGood(err):
		// One line, and the record goes: tried again, it would fail the same way at every sweep.
		log.Info("orphaned answer dropped: Slack no longer lets it be written", zap.String("reason", gateway.SlackErr(err)))
	case err != nil:
		// It may work in a moment (a Slack outage): handed back, it is adopted again at a later sweep,
		// here or on another replica. Kept, it would name a live replica, and nobody would try again.
		log.Warn("orphaned answer not closed; handed back for a later sweep", zap.Error(err))
		if err := j.Abandon(context.WithoutCancel(ctx), a.ID); err != nil {
			log.Warn("orphaned answer: not handed back", zap.Error(err))
		}
		return
	case whole:
		log.Info("orphaned answer was whole already: its replica had closed it in Slack")
	default:
		log.Info("orphaned answer closed: its replica had stopped")
	}
	if err := j.CloseAnswer(context.WithoutCancel(ctx), a.ID); err != nil {
		log.Warn("orphaned answer: journal record not removed", zap.Error(err))
	}
}

// closeShown closes the adopted answer o in Slack, which shows shown of it (none: it showed nothing).
func (r *Closer) closeShown(ctx context.Context, o state.Answer, shown []slack.Message) error {
	ref := route.ReplyRef{ThreadTS: o.ThreadTS, TS: o.TS}
	var buttons []gateway.Button
	if r.opt.Buttons {
		// The answers' own Regenerate: the same action, label and value, so its click is routed
		// and served as theirs.
		buttons = []gateway.Button{{ActionID: route.ActionRegenerate, Text: route.LabelRegenerate, Value: ref.Value()}}
	}
	if len(shown) == 0 {
		return r.postOrphanNote(ctx, o, buttons)
	}
	m := shown[len(shown)-1]
	mark, answer := convo.ClosingMark(shown, o.TS, TextOrphaned)
	if !answer {
		// Only the placeholder (or a stream that had not shown anything): it becomes the note.
		msg := gateway.Msg{Text: convo.NoteAlone(TextOrphanedNothing, slackmd.FormatMrkdwn), Buttons: buttons,
			Mark: convo.Mark{Kind: convo.MarkNotice, Note: TextOrphanedNothing, Done: true}}
		return r.updateOrphan(ctx, o.Channel, m.Timestamp, msg)
	}
	msg := gateway.Msg{Text: m.Text + convo.NoteSuffix(TextOrphaned, slackmd.FormatMrkdwn), Mark: mark, Buttons: buttons}
	return r.updateOrphan(ctx, o.Channel, m.Timestamp, msg)
}

// quietShownOf is shownOf once the messages have been left unchanged for quiet (Options.Quiet),
// unless they show the answer closed: a write the dead (or cut off) replica had on its way when it
// stopped has landed by then. Messages that changed again during the wait are waited for again: an
// answer still being written is no orphan to close (ctx bounds it; the next sweep tries again).
func (r *Closer) quietShownOf(ctx context.Context, o state.Answer) ([]slack.Message, error) {
	quiet := r.opt.Quiet
	for {
		shown, err := r.shownOf(ctx, o)
		if err != nil || convo.ShowsClosed(shown) {
			return shown, err
		}
		wait := min(time.Until(lastChange(shown).Add(quiet)), quiet) // Slack's clock may be ahead
		if wait <= 0 {
			return shown, nil
		}
		if err := watch.Sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("orphaned answer: %w", err)
		}
	}
}

// lastChange is when the newest of msgs was posted or last edited, by Slack's clock (zero: none).
func lastChange(msgs []slack.Message) time.Time {
	var last time.Time
	for _, m := range msgs {
		for _, ts := range []string{m.Timestamp, editedTS(m)} {
			if t := convo.TSTime(ts); t.After(last) {
				last = t
			}
		}
	}
	return last
}

func editedTS(m slack.Message) string {
	if m.Edited == nil {
		return ""
	}
	return m.Edited.Timestamp
}

// shownOf reads the messages of o that Slack still shows, oldest first: those the journal lists,
// and the bot's messages marked as answering o's question since o started (a crash between a post
// and its journal write leaves the message unlisted; its mark names the question all the same).
func (r *Closer) shownOf(ctx context.Context, o state.Answer) ([]slack.Message, error) {
	var (
		read []slack.Message
		err  error
	)
	err = r.spareRead(ctx, func(ctx context.Context) (err error) {
		if o.ThreadTS != "" {
			read, _, err = r.thread.Replies(ctx, o.Channel, o.ThreadTS)
		} else {
			read, err = r.thread.History(ctx, o.Channel, r.opt.HistoryLimit, "")
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("orphaned answer: %w", err)
	}
	since := "" // a record without a start time: every answer to the question is a candidate
	if !o.Started.IsZero() {
		since = convo.TS(o.Started.Add(-orphanClockSkew))
	}
	var shown []slack.Message
	for _, m := range read {
		listed := slices.Contains(o.Messages, m.Timestamp) && r.answerMessage(m)
		ours := r.own(m) && convo.QuestionOf(m) == o.TS && (since == "" || !convo.TSBefore(m.Timestamp, since))
		if listed || ours {
			shown = append(shown, m)
		}
	}
	return shown, nil
}

// answerMessage reports whether m may be a message an answer posted: the bot's own,
// and not a /summarize post (never an answer's). A journal record comes back from the shared store,
// which vouches for nothing: whatever messages a record lists, the adopter never edits another
// person's, nor a summary the bot posted.
func (r *Closer) answerMessage(m slack.Message) bool {
	return r.own(m) && !convo.IsSummary(m)
}

// own reports whether the bot posted m.
func (r *Closer) own(m slack.Message) bool {
	return convo.Bot{UserID: r.opt.BotUserID, BotID: r.opt.BotID}.Posted(m)
}

// spareRead makes the read f of an orphan with a read token nobody waits for (the answers in
// progress queue for theirs), looking again every orphanReadPoll until ctx ends: recovery never
// stands in front of people asking now.
func (r *Closer) spareRead(ctx context.Context, f func(context.Context) error) error {
	for {
		read, err := r.paced.ReadOnce(ctx, f)
		if read {
			return err
		}
		if err := watch.Sleep(ctx, orphanReadPoll); err != nil {
			return err
		}
	}
}

// updateOrphan edits ts to msg within the edit budget, after the first and final texts of the
// answers in progress (pace.Tidy): an orphan's note can wait a moment, a person asking now cannot.
func (r *Closer) updateOrphan(ctx context.Context, channel, ts string, msg gateway.Msg) error {
	lane := r.paced.EditLane()
	defer lane.Close()
	err := r.paced.Update(ctx, gateway.ClosingRetry, nil, r.paced.EditTurn(lane, pace.Tidy, time.Now()), channel, ts, msg)
	if err != nil {
		return fmt.Errorf("chat.update orphaned answer: %w", err)
	}
	return nil
}

// postOrphanNote posts the note of an answer that showed nothing before its replica died.
func (r *Closer) postOrphanNote(ctx context.Context, o state.Answer, buttons []gateway.Button) error {
	msg := gateway.Msg{Text: convo.NoteAlone(TextOrphanedNothing, slackmd.FormatMrkdwn), Buttons: buttons,
		Mark: convo.Mark{Kind: convo.MarkNotice, Note: TextOrphanedNothing, Done: true}}
	_, err := r.paced.Post(ctx, gateway.ClosingRetry, nil, r.paced.PostTurn(o.Channel), o.Channel, o.ThreadTS, msg)
	if err != nil {
		return fmt.Errorf("chat.postMessage orphaned answer note: %w", err)
	}
	return nil
}
