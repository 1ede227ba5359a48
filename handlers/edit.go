package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/watch"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/slackmd"
)

// maxInterimFailures is how many interim writes in a row may fail with an error that is not transient
// (not a 429, 5xx or network failure) before the writer stops trying; the final write still does.
const maxInterimFailures = 3

// editSink writes an answer by posting and editing messages (chat.postMessage + chat.update, mrkdwn): the
// placeholder becomes the first part, and each part the Pager seals continues in a new thread message.
type editSink struct {
	answer *answer
	lane   *pace.Lane
	pager  *slackmd.Pager
	ts     []string // one message per part; ts[0] is the placeholder, when one was posted
	shown  []string // the text last written to each message ("" for the placeholder)
	btn    []string // the buttons each message shows (buttonKey)
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

	parts      []string // the last rendering, of renderedMD
	renderedMD string
	doneMD     string // Slack shows everything of this answer text
	postDue    bool   // the next write is a post of a new part
	sealedDue  bool   // the next write finishes a sealed part

	interimFailures // broken: interim writes stopped; the final write still goes

	edits int
	posts int

	// closed: the final write's last part (the one with the note) landed.
	closed bool
	// lostPost: an interim post of the next part timed out, and Slack may have posted it: the final
	// write looks for it before it posts that part (adoptLost).
	lostPost bool
	// replaces maps a part posted anew (its message refused the final edit) to the message it
	// replaces (Mark.Replaces).
	replaces map[int]string
}

// next returns the next write the answer needs: an edit of message i, or a post of part i (post true);
// i < 0 when Slack already shows parts. A message also needs an edit when its buttons change: only
// the last part carries Stop, so a sealed part loses it.
func (e *editSink) next(parts []string) (i int, post bool) {
	for i := 0; i < len(e.ts) && i < len(parts); i++ {
		if parts[i] != "" && (parts[i] != e.shown[i] || e.btn[i] != buttonKey(e.buttons(i, len(parts), false))) {
			return i, false
		}
	}
	if n := len(e.ts); len(parts) > n && parts[n] != "" {
		return n, true
	}
	return -1, false
}

// buttons of the message of part i of n: the last part's (Stop while streaming, Regenerate once
// final), none on earlier parts.
func (e *editSink) buttons(i, n int, final bool) []gateway.Button {
	bs := e.answer.marks.buttons(final)
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

// visible is the part of the answer md the next interim write shows: all of it, or under load up to
// the last place where a part may be cut (the Pager's MayBreak), preferring the end of a block, then
// of a sentence, then of a word, among the last wholeBlocksSlack bytes (an answer that shows text
// keeps showing progress). The first text under load too: it may be all its message shows when the
// answer ends. With no such place, all of md; never less than was rendered before (the Pager takes
// growing text).
func (e *editSink) visible(md string) string {
	if !e.underLoad() {
		return md
	}
	lo := max(len(e.renderedMD), len(md)-wholeBlocksSlack)
	var sentence, word int
	for i := len(md); i > lo; i-- {
		if c := md[i-1]; c != ' ' && c != '\n' || !e.pager.MayBreak(md[:i]) {
			continue
		}
		switch {
		case strings.HasSuffix(md[:i], "\n\n"):
			return md[:i]
		case sentence == 0 && slackmd.SentenceEnd(md[:i]):
			sentence = i
		case word == 0:
			word = i
		}
	}
	if i := cmp.Or(sentence, word); i > 0 {
		return md[:i]
	}
	return md
}

// underLoad reports whether the answer's edits come wholeBlocksSpacing or more apart.
func (e *editSink) underLoad() bool {
	return e.answer.r.paced.EditSpacing() >= wholeBlocksSpacing
}

// continueByPost decides how a finished answer's last message gets its end, under load (out of
// load, a moment's wait, as for one answer after a 429, is better than an answer split in two
// messages: it always waits). When an edit turn is free at once, the final write takes it
// (slotHeld): the end shows in the message itself. Otherwise, without waiting (the end is the
// write people wait for, and the post it needs was kept for it: end), if what the message
// shows (from tailMD) ends where a part may be cut (slackmd.Pager.Break), it keeps that, sealed as
// it is, and the rest of the answer goes in new messages (the final write posts them). A bare
// placeholder takes an edit turn that comes within continueWait, else it is withdrawn when a
// chat.delete token is free and a post turn comes, the answer then posted on that turn
// (postHeld). Else the final write waits for its edit turn as usual.
func (e *editSink) continueByPost(ctx context.Context, md string, by time.Time) {
	k := len(e.ts) - 1
	if k < 0 || !by.IsZero() || e.slotHeld || !e.underLoad() {
		return // not under load: the last edit's turn comes soon enough
	}
	placeholder := e.shows() == showsPlaceholder && !e.inPlace
	if !placeholder && (e.shown[k] == "" || len(md) <= len(e.tailMD) || !strings.HasPrefix(md, e.tailMD)) {
		return
	}
	if placeholder {
		// Its withdrawal waits for a post turn, which may be far: an edit turn that comes soon is
		// taken first.
		if e.turnSoon(ctx, pace.Final, e.answer.unshown) {
			e.slotHeld = true
			return
		}
		e.postHeld = e.answer.r.paced.TryDelete() && e.withdrawOnPost(ctx)
		return
	}
	if e.lane.Try(pace.Final, e.answer.unshown) {
		e.slotHeld = true
		return
	}
	at := e.tailMD
	if c := md[len(at)]; c == ' ' || c == '\n' {
		at = md[:len(at)+1] // the shown text ends at a word: the cut may come after it
	}
	if ctx.Err() == nil && e.pager.Break(at, e.shown[k]) {
		e.answer.log.Debug("no edit turn soon: the rest of the answer goes in a new message")
	}
}

// render returns the parts of md, rendering only when md is new: rendering is the writer's main cost, so
// it happens about once per write (never before waiting for a slot, only after).
func (e *editSink) render(md string) []string {
	if e.parts == nil || md != e.renderedMD {
		e.parts, e.renderedMD = e.pager.Update(md, false), md
	}
	return e.parts
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

// firstTS is the ts of the answer's first message (the placeholder), "" before it is posted.
func (e *editSink) firstTS() string {
	if len(e.ts) == 0 {
		return ""
	}
	return e.ts[0]
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
	for !e.broken && snap.md != e.doneMD {
		post, err := e.waitTurn(ctx, wctx, e.postDue, &snap, mb)
		if err != nil {
			e.answer.noteUnshown(snap.since)
			return // the answer is complete (or cancelled): the final write takes over
		}
		snap = mb.latest(snap) // the freshest text goes out with this slot
		parts := e.render(e.visible(snap.md))
		i, needPost := e.next(parts)
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
	parts := e.render(e.visible(md))
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

// landed records that Slack shows msg as message ts, the answer's part i: a post of the next part
// (i == len(e.ts)), an edit of part i, or part i posted anew. Every write of the answer's text that
// lands, interim or final, passes here: the one place that knows what the thread shows of this
// answer.
func (e *editSink) landed(i int, ts string, msg gateway.Msg) {
	if i == len(e.ts) {
		e.ts, e.shown, e.btn = append(e.ts, ts), append(e.shown, msg.Text), append(e.btn, buttonKey(msg.Buttons))
		return
	}
	e.ts[i], e.shown[i], e.btn[i] = ts, msg.Text, buttonKey(msg.Buttons)
}

// wrote records that part i of parts, rendered from md, landed, and what the next write is.
func (e *editSink) wrote(parts []string, i int, md string) {
	e.succeeded()
	if i == len(parts)-1 {
		e.tailMD = e.renderedMD
	}
	j, nextPost := e.next(parts)
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
		e.broken, e.lostPost, e.placeholderDue = true, true, time.Time{}
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
	if pause := e.failed(err); pause > 0 && watch.Sleep(wctx, pause) != nil {
		a.noteUnshown(since)
		return false
	}
	return true
}

// interimFailures counts an interim writer's failures in a row (429s are not failures: they pause
// the budget).
type interimFailures struct {
	fails  int  // not transient: at maxInterimFailures the writer stops (broken)
	outage int  // transient (5xx, network): each backs off longer, none stops the writer
	broken bool // the writer has stopped; the final write still goes
}

// succeeded clears the counts after a write went through.
func (f *interimFailures) succeeded() { f.fails, f.outage = 0, 0 }

// failed records a failed interim write and returns how long to wait before the next: while Slack
// is having trouble (5xx, network) longer after each failure in a row, so the writer goes on with
// the freshest text once Slack is back; 0 after an error that is not transient.
func (f *interimFailures) failed(err error) time.Duration {
	if !gateway.Transient(err) {
		if f.fails++; f.fails >= maxInterimFailures {
			f.broken = true
		}
		return 0
	}
	f.outage++
	return interimBackoff(f.outage)
}

// interimBackoff is the pause before an interim write after n transient failures in a row.
func interimBackoff(n int) time.Duration {
	d := gateway.FirstBackoff
	for ; n > 1 && d < gateway.MaxBackoff; n-- {
		d *= 2
	}
	return min(d, gateway.MaxBackoff)
}

// final writes the whole answer md with its note and mark kind into the answer's messages: each
// part's final edit, a post for each part not shown yet, and last the edits of parts whose buttons
// only change.
func (e *editSink) final(ctx context.Context, c closing) error {
	parts := e.finalParts(ctx, c.md, c.note, c.turnBy)
	var errs []error
	// Parts whose text is shown and whose buttons only change (an earlier part losing Stop) are
	// edited once the rest landed, after every other answer's text (pace.Tidy).
	var later []int
	for i := range parts {
		deferred, stop, err := e.finalPart(ctx, parts, i, c)
		if deferred {
			later = append(later, i)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if stop {
			break
		}
	}
	if e.closed {
		e.answer.writes.closedInJournal() // the tidy edits below need no record: a crash now leaves the answer whole
	}
	for _, i := range later {
		msg := gateway.Msg{Text: parts[i], Mark: e.finalMark(c.kind, c.note, i, len(parts)), Buttons: e.buttons(i, len(parts), true)}
		if err := e.finalEdit(ctx, i, msg, pace.Tidy, c.turnBy); err != nil {
			if !e.closed {
				errs = append(errs, fmt.Errorf("chat.update part %d: %w", i+1, err))
				break
			}
			// The answer shows whole: a stale Stop button (it answers "ended" when pressed) is no
			// reason to close the answer again, nor, at shutdown, to post a note under it.
			e.answer.log.Debug("a finished part keeps its Stop button", zap.Int("part", i+1), zap.Error(err))
			break
		}
	}
	return errors.Join(errs...)
}

// finalParts is the whole answer md in parts, the note after the last. A part a timed-out post may
// have posted is found first (adoptLost), and the last message may be sealed as it shows for the rest
// to be posted below it (continueByPost).
func (e *editSink) finalParts(ctx context.Context, md, note string, by time.Time) []string {
	if e.lostPost {
		e.lostPost = false
		e.adoptLost(ctx)
	}
	var parts []string
	if strings.TrimSpace(md) != "" {
		e.continueByPost(ctx, md, by)
		parts = e.pager.Update(md, true)
	}
	return withNote(parts, note)
}

// withNote is an answer's parts (mrkdwn) with note after the last, or the note alone when there are
// none; with neither, the note that the answer is empty: never an empty message (or the placeholder).
func withNote(parts []string, note string) []string {
	suffix := convo.NoteSuffix(note, slackmd.FormatMrkdwn)
	if len(parts) == 0 {
		parts = []string{strings.TrimPrefix(suffix, "\n\n")}
	} else {
		parts[len(parts)-1] += suffix
	}
	if parts[0] == "" {
		parts[0] = convo.NoteAlone(textEmpty, slackmd.FormatMrkdwn)
	}
	return parts
}

// finalPart writes part i of the final parts: a post of a message not shown yet, an edit of its
// message, or nothing now when only its buttons change (deferred: edited once the rest landed). It
// returns the write's error, and stop when the final write stops there.
func (e *editSink) finalPart(ctx context.Context, parts []string, i int, c closing) (deferred, stop bool, err error) {
	msg := gateway.Msg{Text: parts[i], Mark: e.finalMark(c.kind, c.note, i, len(parts)), Buttons: e.buttons(i, len(parts), true)}
	switch {
	case i >= len(e.ts):
		err = e.postFinal(ctx, i, msg)
		stop = err != nil // later parts would come out of order
	case msg.Text == e.shown[i] && c.kind == convo.MarkAnswer && msg.Mark.Note == "" && !msg.Mark.Done:
		return e.btn[i] != buttonKey(msg.Buttons), false, nil // already shown, with the same mark
	default:
		stop, err = e.editFinal(ctx, i, msg, c.turnBy)
	}
	if !stop {
		e.closed = i == len(parts)-1
	}
	return false, stop, err
}

// postFinal posts msg as the message of part i, the next after those shown.
func (e *editSink) postFinal(ctx context.Context, i int, msg gateway.Msg) error {
	a := e.answer
	posts := a.r.paced.PostTurn(a.req.Channel).Held(&e.postHeld) // held: taken by continueByPost
	ts, err := a.r.paced.Post(ctx, gateway.ClosingRetry, &a.writes.outage, posts, a.req.Channel, a.threadTS, msg)
	if err != nil {
		return fmt.Errorf("chat.postMessage part %d: %w", i+1, err)
	}
	a.writes.posted(ts)
	e.landed(len(e.ts), ts, msg)
	e.posts++
	return nil
}

// editFinal writes msg into the message of part i. When the answer's last message refuses the edit,
// its part is posted anew in its place (repost); the edit's error is returned even then, and stop
// when the final write cannot go on.
func (e *editSink) editFinal(ctx context.Context, i int, msg gateway.Msg, by time.Time) (stop bool, err error) {
	if err = e.finalEdit(ctx, i, msg, pace.Final, by); err == nil {
		return false, nil
	}
	err = fmt.Errorf("chat.update part %d: %w", i+1, err)
	if !repostRefused(i == len(e.ts)-1, gateway.SlackErr(err) == "message_not_found", ctx.Err() == nil, !by.IsZero()) {
		return true, err
	}
	if perr := e.repost(ctx, i, msg); perr != nil {
		return true, errors.Join(err, perr)
	}
	return false, err
}

// repost posts part i anew, for its message (the last) refused the final edit (cant_update_message,
// or Slack kept refusing beyond gateway.FinalOutage): its text goes in a new message below it, which then
// takes its place (it is deleted; if it cannot be, its text shows twice rather than not at all), the
// later parts after that. The post has a short outage window of its own (gateway.ReplaceRetry): the answer's
// may have run out on the edits, and a Slack that is down must not hold the thread's turn twice as
// long.
func (e *editSink) repost(ctx context.Context, i int, msg gateway.Msg) error {
	a := e.answer
	old := e.ts[i]
	msg.Mark.Replaces = old // if old stays (its delete fails), Build skips it
	ts, err := a.writes.postRetry(ctx, gateway.ReplaceRetry, nil, msg)
	if err != nil {
		return fmt.Errorf("chat.postMessage part %d anew: %w", i+1, err)
	}
	a.writes.outage.End() // Slack took a post: a later failure starts a new outage
	if err := a.writes.deleteMessage(ctx, gateway.ReplaceRetry, time.Time{}, old); err != nil {
		a.log.Warn("a message that refused its final edit could not be deleted; its text shows twice", zap.Error(err))
	}
	e.landed(i, ts, msg)
	if e.replaces == nil {
		e.replaces = map[int]string{}
	}
	e.replaces[i] = old // later edits of the part keep the mark
	e.posts++
	return nil
}

// finalMark is the mark of part i of n in the final write: the note, and that the answer is done, go
// on the last part. So the last part is always written by the final write, even when its text shows
// already: its mark is what tells a replica closing this one's answers after a crash that it is whole.
func (e *editSink) finalMark(kind convo.MarkKind, note string, i, n int) convo.Mark {
	mark := e.answer.marks.mark(kind, "", i, e.firstTS())
	if i == n-1 {
		mark.Note, mark.Done = note, true
	}
	mark.Replaces = e.replaces[i]
	return mark
}

// finalEdit writes msg into part i's message, waiting its turn in the edit budget at prio (until by
// at shutdown; at once when a turn is held, see continueByPost) and retrying under gateway.ClosingRetry.
func (e *editSink) finalEdit(ctx context.Context, i int, msg gateway.Msg, prio pace.Priority, by time.Time) error {
	a := e.answer
	ts := e.ts[i]
	edits := a.r.paced.EditTurn(e.lane, prio, a.unshown).By(by).Held(&e.slotHeld) // held: taken by continueByPost
	err := a.r.paced.Update(ctx, gateway.ClosingRetry, &a.writes.outage, edits, a.req.Channel, ts, msg)
	if err == nil {
		e.landed(i, ts, msg)
		e.edits++
	}
	return err
}

// adoptLost looks in the thread (or the DM) for the part a timed-out interim post may have posted: a
// message of this answer (marked with its question and first message) after the last one known. Found,
// it becomes that part, which the final write then edits instead of posting it again.
func (e *editSink) adoptLost(ctx context.Context) {
	strays, _ := e.answer.strayParts(ctx, e.firstTS(), e.ts)
	if len(e.ts) == 0 {
		// The first part's post was lost: the newest first part of an answer to this question is it.
		if n := len(strays); n > 0 {
			e.ts, e.shown, e.btn = append(e.ts, strays[n-1]), append(e.shown, ""), append(e.btn, "?")
		}
		return
	}
	last := e.ts[len(e.ts)-1]
	for _, ts := range strays {
		if convo.TSBefore(last, ts) {
			e.ts, e.shown, e.btn = append(e.ts, ts), append(e.shown, ""), append(e.btn, "?")
			return
		}
	}
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

func (e *editSink) shows() showing {
	switch {
	case len(e.ts) == 0:
		return showsNothing
	case len(e.ts) == 1 && e.shown[0] == "":
		return showsPlaceholder
	}
	return showsText
}

func (e *editSink) placeholderTS() string { return e.firstTS() }

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
	err := e.final(ctx, c)
	return e.closed, err
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
