package handlers

// Closing an answer written by editing (closing.go plans the steps): its final write.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/slackmd"
)

// editFinal is the final write of an answer written by editing: every part's final text with the
// note and the done mark after the last, its turns held or waited for. One per closing step.
type editFinal struct{ *editSink }

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
func (e editFinal) continueByPost(ctx context.Context, md string, by time.Time) {
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

// final writes the whole answer md with its note and mark kind into the answer's messages: each
// part's final edit, a post for each part not shown yet, and last the edits of parts whose buttons
// only change.
func (e editFinal) final(ctx context.Context, c closing) error {
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
	if e.phase == editClosed {
		e.answer.writes.closedInJournal() // the tidy edits below need no record: a crash now leaves the answer whole
	}
	for _, i := range later {
		msg := gateway.Msg{Text: parts[i], Mark: e.finalMark(c.kind, c.note, i, len(parts)), Buttons: e.buttons(i, len(parts), true), Markdown: c.md}
		if err := e.finalEdit(ctx, i, msg, pace.Tidy, c.turnBy); err != nil {
			if e.phase != editClosed {
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
func (e editFinal) finalParts(ctx context.Context, md, note string, by time.Time) []string {
	if e.phase == editLost {
		e.adoptLost(ctx)
		e.phase = editBroken // looked for: the writes go on from what is known
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
func (e editFinal) finalPart(ctx context.Context, parts []string, i int, c closing) (deferred, stop bool, err error) {
	msg := gateway.Msg{Text: parts[i], Mark: e.finalMark(c.kind, c.note, i, len(parts)), Buttons: e.buttons(i, len(parts), true), Markdown: c.md}
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
		e.phase = editClosing
		if i == len(parts)-1 {
			e.phase = editClosed
		}
	}
	return false, stop, err
}

// postFinal posts msg as the message of part i, the next after those shown.
func (e editFinal) postFinal(ctx context.Context, i int, msg gateway.Msg) error {
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
func (e editFinal) editFinal(ctx context.Context, i int, msg gateway.Msg, by time.Time) (stop bool, err error) {
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
func (e editFinal) repost(ctx context.Context, i int, msg gateway.Msg) error {
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
func (e editFinal) finalMark(kind convo.MarkKind, note string, i, n int) convo.Mark {
	mark := e.answer.marks.mark(kind, "", i, e.firstTS())
	if i == n-1 {
		mark.Note, mark.Done = note, true
	}
	mark.Replaces = e.replaces[i]
	return mark
}

// finalEdit writes msg into part i's message, waiting its turn in the edit budget at prio (until by
// at shutdown; at once when a turn is held, see continueByPost) and retrying under gateway.ClosingRetry.
func (e editFinal) finalEdit(ctx context.Context, i int, msg gateway.Msg, prio pace.Priority, by time.Time) error {
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
func (e editFinal) adoptLost(ctx context.Context) {
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
