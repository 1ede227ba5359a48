package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/watch"
	"github.com/llmbot/llmbot/pace"
)

// editPhase is where the writes of an answer written by editing are; the transitions are drawn in
// lifecycle.go. What Slack shows (nothing, the placeholder, text) is its messages' (editMessages.shows).
type editPhase int

const (
	editWriting editPhase = iota // generating: the writer's interim writes go on
	editBroken                   // interim writes stopped after failures: the final write takes over
	editLost                     // an interim post timed out and may have landed: the final write looks for it (adoptLost)
	editClosing                  // the final write has written a part, not yet the last
	editClosed                   // the final write's last part, the one with the note, landed
)

// maxInterimFailures is how many interim writes in a row may fail with an error that is not transient
// (not a 429, 5xx or network failure) before the writer stops trying; the final write still does.
const maxInterimFailures = 3

// editSink writes an answer by posting and editing messages (chat.postMessage + chat.update, mrkdwn): the
// placeholder becomes the first part, and each part the Pager seals continues in a new thread message.
type editSink struct {
	answer *answer
	lane   *pace.Lane
	editMessages
	editRendering
	// placeholderDue is when the placeholder is posted if no text has come (ReplyOptions.PlaceholderAfter);
	// zero once it is, or once a message is.
	placeholderDue time.Time
	// tailMD is the answer text the last message was last written from (see continueByPost).
	tailMD string
	// slotHeld: the final write holds a chat.update turn already (taken by continueByPost); postHeld:
	// it holds a post turn (the placeholder was withdrawn for it).
	slotHeld, postHeld bool
	// inPlace: the placeholder is an old answer's first message (a Regenerate written in its place),
	// whose place in the thread is kept: it is never withdrawn (withdrawPlaceholder).
	inPlace bool
	// end is the post this answer's end claims while it is live (gateway.Writer.ClaimEnd): its progress
	// posts leave the claimed ones (see continueByPost).
	end *gateway.EndClaim

	doneMD    string // Slack shows everything of this answer text
	postDue   bool   // the next write is a post of a new part
	sealedDue bool   // the next write finishes a sealed part

	interimFailures

	edits int
	posts int

	// phase is where the answer's writes are (editPhase).
	phase editPhase
}

// buttons of the message of part i of n: the last part's (Stop while streaming, Regenerate once
// final), none on earlier parts.
func (e *editSink) buttons(i, n int, final bool) []gateway.Button {
	return partButtons(e.answer.marks.buttons(final), i, n)
}

// partButtons are the buttons of part i of n of an answer whose last message carries bs: none on
// earlier parts.
func partButtons(bs []gateway.Button, i, n int) []gateway.Button {
	if i < n-1 && bs != nil {
		return []gateway.Button{}
	}
	return bs
}

// Under load an answer's message is edited seconds apart, and its last edit may wait long for its
// turn once the answer is complete. Then the message shows whole blocks or sentences of the answer,
// so that when the answer ends and no edit turn is free at once, the message can keep what it
// shows and the rest of the answer be posted below it at once, from the channel's post budget
// (continueByPost): one more message for that answer, instead of a wait of up to a minute for the
// end. The posts are planned over the whole answer for that: while an answer is live it claims a
// post for its end (end), and the posts that only show progress (an answer's next part) leave the
// claimed ones in the budget (gateway.EndClaim.SpareWait); first texts and ends take them.
const (
	wholeBlocksSpacing = 3 * time.Second // an answer's edits this far apart: whole blocks only
	wholeBlocksSlack   = 400             // bytes of a block still being written that may wait for its end
	// continueWait is how long, under load, a bare placeholder's first text may wait for an edit
	// turn before the placeholder is withdrawn and the text posted (waitTurn).
	continueWait = time.Second
)

// underLoad reports whether the answer's edits come wholeBlocksSpacing or more apart.
func (e *editSink) underLoad() bool {
	return e.answer.r.paced.EditSpacing() >= wholeBlocksSpacing
}

// priority of the next edit, known before rendering the latest text: the final version of a sealed part,
// the first text replacing the placeholder, or pending text.
func (e *editSink) priority() pace.Priority {
	switch {
	case e.sealedDue:
		return pace.Final
	case len(e.shown) == 0 || e.shown[0] == "":
		return pace.First
	}
	return pace.Pending
}

func (e *editSink) idleDue() time.Time {
	if len(e.ts) > 0 {
		return time.Time{}
	}
	return e.placeholderDue
}

// idle posts the placeholder: the model has sent no text within PlaceholderAfter.
func (e *editSink) idle(ctx context.Context) { e.idleBy(ctx, time.Time{}) }

// idleBy posts the placeholder, its wait for a post turn ended at by (zero: never; the placeholder
// then stays due). A placeholder that cannot be posted otherwise is not tried again: the answer's
// first text will be. Under load an answer whose thread shows its "is thinking…" status posts none
// while the status lasts: the status is sign of life enough, and a placeholder would clear it and
// then wait long for the edit that gives it text.
func (e *editSink) idleBy(ctx context.Context, by time.Time) {
	a := e.answer
	due := e.placeholderDue
	e.placeholderDue = time.Time{}
	if len(e.ts) > 0 {
		return
	}
	if since := a.thinkingSince; !since.IsZero() && e.underLoad() && time.Since(since) < thinkingLasts {
		e.placeholderDue = since.Add(thinkingLasts) // then the placeholder, if still no text
		return
	}
	cctx, cancel := a.writes.callCtx(ctx)
	defer cancel()
	posts := a.r.paced.PostTurn(a.req.Channel).By(by)
	noTurn := false
	t := gateway.Turn{Wait: func(ctx context.Context) error {
		err := posts.Wait(ctx)
		noTurn = err != nil
		return err
	}, Throttled: posts.Throttled}
	ts, err := a.r.paced.Post(cctx, gateway.InterimRetry, nil, t, a.req.Channel, a.threadTS, a.marks.placeholder())
	if noTurn && !by.IsZero() && cctx.Err() == nil {
		e.placeholderDue = due // no post turn by then: still due, for the writer
		return
	}
	if err != nil {
		a.log.Debug("placeholder not posted; the first text will be", zap.Error(err))
		return
	}
	a.writes.posted(ts)
	e.ts, e.shown, e.btn = []string{ts}, []string{""}, []string{buttonKey(e.answer.marks.buttons(false))}
	e.postDue = false
	e.posts++
}

func (e *editSink) interim(ctx, wctx context.Context, snap snapshot, mb *mailbox) {
	for e.phase == editWriting && snap.md != e.doneMD {
		post, err := e.waitTurn(ctx, wctx, e.postDue, &snap, mb)
		if err != nil {
			e.answer.noteUnshown(snap.since)
			return // the answer is complete (or cancelled): the final write takes over
		}
		snap = mb.latest(snap) // the freshest text goes out with this slot
		parts := e.render(e.visible(snap.md, e.underLoad()))
		i, needPost := e.next(parts, e.answer.marks.buttons(false))
		if i < 0 {
			e.doneMD = snap.md
			continue
		}
		if needPost != post {
			e.postDue = needPost // the other kind of slot is needed (once per part at most)
			continue
		}
		cut, err := e.writePart(ctx, parts, i, post)
		if err == nil {
			e.wrote(parts, i, snap.md)
			continue
		}
		if !e.goOnAfter(ctx, wctx, err, post, cut, i, snap.since) {
			return
		}
	}
}

// waitTurn waits for the slot of the next interim write: the channel's post budget for a post, else
// the answer's lane of the edit budget. The post of the answer's first text keeps its place in the
// channel's line after the answer is complete (ctx, not wctx): given up, its slot would stay unused
// behind the posts queued after it (a bucket hands out a place once), and the final write would queue
// again at the back; kept, it posts the whole answer when its turn comes. The post of a next part only
// shows progress: it leaves the posts claimed for the ends of the answers live in the channel
// (gateway.EndClaim.SpareWait), holds no place in line, and stops waiting when the answer is complete (wctx),
// the final write then posting the part as the end it has become. Under load the first text for a bare
// placeholder waits continueWait for an edit turn; with none, and a chat.delete token at once, it
// waits for a post turn, and then the placeholder is withdrawn and the text posted
// (withdrawPlaceholder): the placeholder goes only when the post can follow at once. Text that shows
// nothing yet ("**") waits for more, a second at a time. post reports which slot was taken.
func (e *editSink) waitTurn(ctx, wctx context.Context, post bool, snap *snapshot, mb *mailbox) (bool, error) {
	since := snap.since
	for !post && e.shows() == showsPlaceholder && !e.inPlace && e.underLoad() {
		if e.turnSoon(wctx, pace.First, since) {
			return false, nil
		}
		if wctx.Err() != nil {
			return false, context.Cause(wctx)
		}
		if *snap = mb.latest(*snap); !e.hasFirstText(snap.md) || !e.answer.r.paced.TryDelete() {
			continue // nothing to show yet, or no chat.delete token now: an edit turn again, or the next try
		}
		if e.withdrawOnPost(ctx) {
			return true, nil
		}
		break // not deleted (the token is spent): the text waits for an edit as usual
	}
	if post && len(e.ts) > 0 {
		return true, e.end.SpareWait(wctx)
	}
	if post {
		return true, e.answer.r.paced.PostWait(ctx, e.answer.req.Channel)
	}
	return false, e.lane.Wait(wctx, e.priority(), since)
}

// hasFirstText reports whether md, shown now, has text for the answer's first message (a lone "**" or
// "> " renders to nothing: no reason to withdraw the placeholder for it).
func (e *editSink) hasFirstText(md string) bool {
	parts := e.render(e.visible(md, e.underLoad()))
	return len(parts) > 0 && parts[0] != ""
}

// withdrawOnPost withdraws the bare placeholder, its chat.delete token taken, once a post turn
// comes, and reports whether it did: the post turn is then held for the answer's text. The post
// turn comes first, so the placeholder goes only when the text can follow (under load a post turn
// in the channel comes sooner than an edit turn in the workspace).
func (e *editSink) withdrawOnPost(ctx context.Context) bool {
	a := e.answer
	return a.r.paced.PostWait(ctx, a.req.Channel) == nil && e.withdrawPlaceholder(ctx)
}

// withdrawPlaceholder deletes the bare placeholder, its chat.delete turn taken already, so that the
// answer's text is posted instead of waiting long for an edit: the answer is then as if it had
// posted nothing yet (its next write posts its first part). It reports whether the placeholder is
// gone. The delete comes before the post: a post that fails after it leaves nothing to clean up,
// only an answer not shown yet, which every closing path knows.
func (e *editSink) withdrawPlaceholder(ctx context.Context) bool {
	a := e.answer
	if !a.r.paced.DeleteHeld(ctx, a.writes.callCtx, a.req.Channel, e.ts[0]) {
		return false
	}
	a.log.Debug("no edit turn soon: the placeholder is withdrawn and the text posted")
	e.ts, e.shown, e.btn, e.postDue = nil, nil, nil, true
	return true
}

// turnSoon reports whether an edit turn at prio came within continueWait; the turn is then taken.
func (e *editSink) turnSoon(ctx context.Context, prio pace.Priority, since time.Time) bool {
	ctx, cancel := context.WithTimeout(ctx, continueWait)
	defer cancel()
	return e.lane.Wait(ctx, prio, since) == nil
}

// writePart writes part i of parts as it is now: a post of its message (post) or an edit. cut: the
// call's own context ended, so a post may have landed all the same.
func (e *editSink) writePart(ctx context.Context, parts []string, i int, post bool) (cut bool, err error) {
	a := e.answer
	msg := gateway.Msg{Text: parts[i], Mark: a.marks.mark(convo.MarkAnswer, "", i, e.firstTS()), Buttons: e.buttons(i, len(parts), false)}
	cctx, cancel := a.writes.callCtx(ctx)
	defer cancel()
	if post {
		err = e.postPart(cctx, msg)
	} else {
		err = e.editPart(cctx, i, msg)
	}
	return cctx.Err() != nil, err
}

// postPart posts msg as the answer's next message.
func (e *editSink) postPart(ctx context.Context, msg gateway.Msg) error {
	a := e.answer
	ts, err := a.r.msgs.Post(ctx, a.req.Channel, a.threadTS, msg)
	if err != nil {
		return err
	}
	a.writes.posted(ts)
	if len(e.ts) == 0 {
		a.firstText = time.Since(a.start)
	}
	e.landed(len(e.ts), ts, msg)
	e.posts++
	return nil
}

// editPart writes msg into the message of part i.
func (e *editSink) editPart(ctx context.Context, i int, msg gateway.Msg) error {
	a := e.answer
	if err := gateway.Idempotent(a.r.msgs.Update(ctx, a.req.Channel, e.ts[i], msg)); err != nil {
		return err
	}
	if i == 0 && e.shown[0] == "" {
		a.firstText = time.Since(a.start)
	}
	e.landed(i, e.ts[i], msg)
	e.edits++
	return nil
}

// wrote records that part i of parts, rendered from md, landed, and what the next write is.
func (e *editSink) wrote(parts []string, i int, md string) {
	e.succeeded()
	if i == len(parts)-1 {
		e.tailMD = e.renderedMD
	}
	j, nextPost := e.next(parts, e.answer.marks.buttons(false))
	if j < 0 {
		e.doneMD = md
	}
	e.postDue, e.sealedDue = nextPost, j >= 0 && j < len(parts)-1
}

// goOnAfter handles the failed interim write of part i (a post when post; cut: its call's context
// ended) and reports whether the writer goes on. since is when the text not shown yet arrived.
func (e *editSink) goOnAfter(ctx, wctx context.Context, err error, post, cut bool, i int, since time.Time) bool {
	a := e.answer
	if post && (cut || errors.Is(err, context.DeadlineExceeded)) {
		// Slack may have posted it: another post could show the part twice. The final write takes
		// over, and looks for it first; no placeholder follows a first text that may show.
		e.phase, e.placeholderDue = editLost, time.Time{}
		a.noteUnshown(since)
		return false
	}
	if ctx.Err() != nil {
		return false
	}
	if ra, ok := gateway.RateLimited(err); ok {
		if post {
			a.r.paced.PostThrottled(a.req.Channel, ra)
		} else {
			e.lane.Throttled(ra)
		}
		return true
	}
	a.log.Debug("interim write", zap.Bool("post", post), zap.Int("part", i+1), zap.Error(err))
	pause, broken := e.failed(err)
	if broken {
		e.phase = editBroken // the loop ends: the final write takes over
	}
	if pause > 0 && watch.Sleep(wctx, pause) != nil {
		a.noteUnshown(since)
		return false
	}
	return true
}

// interimFailures counts an interim writer's failures in a row (429s are not failures: they pause
// the budget).
type interimFailures struct {
	fails  int // not transient: at maxInterimFailures the writer stops
	outage int // transient (5xx, network): each backs off longer, none stops the writer
}

// succeeded clears the counts after a write went through.
func (f *interimFailures) succeeded() { f.fails, f.outage = 0, 0 }

// failed records a failed interim write and returns how long to wait before the next: while Slack
// is having trouble (5xx, network) longer after each failure in a row, so the writer goes on with
// the freshest text once Slack is back; 0 after an error that is not transient. broken: that was
// the maxInterimFailures-th such error in a row, and the writer stops (the final write still goes).
func (f *interimFailures) failed(err error) (pause time.Duration, broken bool) {
	if !gateway.Transient(err) {
		f.fails++
		return 0, f.fails >= maxInterimFailures
	}
	f.outage++
	return interimBackoff(f.outage), false
}

// interimBackoff is the pause before an interim write after n transient failures in a row.
func interimBackoff(n int) time.Duration {
	d := gateway.FirstBackoff
	for ; n > 1 && d < gateway.MaxBackoff; n-- {
		d *= 2
	}
	return min(d, gateway.MaxBackoff)
}

// strayParts returns, oldest first, the messages of this answer (marked with its question, and with
// first as their first message) other than known: parts whose post failed with a timeout or was cut,
// which Slack may have posted all the same. The look is optional: it takes a read token only if one is
// free and makes one try of at most adoptReadTimeout; ok is false when it could not look.
func (a *answer) strayParts(ctx context.Context, first string, known []string) (strays []string, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, adoptReadTimeout)
	defer cancel()
	var msgs []slack.Message
	read, err := a.r.paced.ReadOnce(ctx, func(ctx context.Context) (err error) {
		if a.threadTS != "" {
			msgs, _, err = a.r.reads.Thread.Replies(ctx, a.req.Channel, a.threadTS)
		} else {
			msgs, err = a.r.reads.Thread.History(ctx, a.req.Channel, a.r.opt.HistoryLimit, "")
		}
		return err
	})
	if !read {
		a.log.Debug("no read budget to look for parts whose post may have landed")
		return nil, false
	}
	if err != nil {
		a.log.Debug("looking for parts whose post may have landed", zap.Error(err))
		return nil, false
	}
	return convo.StrayParts(msgs, a.marks.questionTS(), first, known), true
}

const adoptReadTimeout = time.Second

// thinkingLasts is how long a thread's "is thinking…" status is counted on as the answer's sign of
// life: Slack drops a status after two minutes without a message, and the placeholder that takes
// over must be posted before that.
const thinkingLasts = 100 * time.Second

func (e *editSink) mode() ReplyMode { return ModeEdit }

// progress: an edited answer's placeholder says "Thinking…"; it shows no steps.
func (e *editSink) progress(context.Context, ...gateway.Task) {}

// stoppedByUser: an edited answer stopped by our Stop button closes like any other, with its text.
func (e *editSink) stoppedByUser() {}

// closeStep carries out stepFinal and stepFinalInTime; edit mode has no other steps of its own.
// The final write has closed the answer once its last part, the one with the note, has landed.
func (e *editSink) closeStep(ctx context.Context, step closeStep, c closing) (bool, error) {
	if step == stepFinal {
		c.turnBy = time.Time{} // the whole final write: no note follows it
	}
	err := editFinal{e}.final(ctx, c)
	return e.phase == editClosed, err
}

func (e *editSink) close() {
	e.lane.Close()
	e.end.Release()
}

func (e *editSink) writes() int { return e.edits }

func (e *editSink) fields() []zap.Field {
	return []zap.Field{zap.String("mode", string(ModeEdit)), zap.Int("edits", e.edits),
		zap.Int("posts", e.posts), zap.Int("parts", len(e.ts))}
}
