package handlers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slackmd"
)

func (a *answer) noteUnshown(since time.Time) {
	if a.unshown.IsZero() || since.Before(a.unshown) {
		a.unshown = since
	}
}

// sink is where an answer is written: post-and-edit (editSink) or Slack's native streaming (streamSink).
type sink interface {
	// interim writes progress; called only by the writer goroutine. Slack calls use ctx (the answer's);
	// waits for a slot use wctx, which ends when the answer is complete.
	interim(ctx, wctx context.Context, snap snapshot, mb *mailbox)
	// mode is how the sink writes the answer.
	mode() ReplyMode
	// shows is what Slack shows of the answer now.
	shows() showing
	// placeholderTS is the message stepWithdraw deletes: the bare placeholder or the empty stream.
	placeholderTS() string
	// progress shows a step of the answer as a task card, where the sink can (progress.go).
	progress(ctx context.Context, tasks ...gateway.Task)
	// stoppedByUser says the person stopped the answer in Slack (a session's Stop), which also
	// halted the stream: nothing more is appended, the answer closes with its note.
	stoppedByUser()
	// closeStep carries out one of the sink's own ways of closing the answer c (see planClose), on ctx
	// (detached from cancellation and time-boxed). Called after the writer goroutine has ended.
	closeStep(ctx context.Context, step closeStep, c closing) (closed bool, err error)
	// idleDue is when the writer, still without text, calls idle (zero: never).
	idleDue() time.Time
	// idle shows life while the model has sent no text yet; called by the writer goroutine, or
	// before it starts while the answer is prepared (idleDuring).
	idle(ctx context.Context)
	// close releases the sink's lane.
	close()
	fields() []zap.Field
	// writes is the number of interim and final Slack writes made (chat.update / chat.appendStream).
	writes() int
}

// open shows life at once: for a Regenerate the old answer's first message turned placeholder (old,
// see openInPlace), else a native stream when allowed (falling back by itself when Slack refuses it),
// else a placeholder message.
func (a *answer) open(ctx context.Context, old []string) (sink, error) {
	if len(old) > 0 {
		s, err := a.openInPlace(ctx, old)
		if err == nil || ctx.Err() != nil {
			return s, err
		}
		a.replacesAbove = gateway.SlackErr(err) != "message_not_found"
		a.log.Info("regenerate: the old answer cannot be edited; answering in a new message", zap.Error(err))
	}
	if a.threadTS != "" && a.r.streams(a.req) {
		if !a.r.paced.TryStream() {
			a.log.Debug("native streaming budget used up; answering by editing")
			return a.openEdit(ctx)
		}
		s, err := a.openStream(ctx)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("chat.startStream: %w", err)
		}
		switch ra, limited := gateway.RateLimited(err); {
		case limited:
			a.r.paced.StreamTurn().Throttled(ra)
			a.log.Info("native streaming rate limited; answering by editing", zap.Error(err))
		case gateway.RefusesStreaming(err):
			a.r.streaming.Refuse(a.r.opt.StreamRefusal)
			a.log.Warn("native streaming refused; answering by editing", zap.Error(err),
				zap.Duration("for", a.r.opt.StreamRefusal))
		default:
			a.log.Info("native streaming failed; answering by editing", zap.Error(err))
		}
	}
	return a.openEdit(ctx)
}

// placeholder is the message an answer in edit mode starts as.
func (a *answer) placeholder() gateway.Msg {
	return gateway.Msg{Text: textThinking, Mark: convo.Mark{Kind: convo.MarkPlaceholder}, Buttons: a.buttons(false)}
}

// openEdit opens an answer in edit mode: with PlaceholderAfter, nothing is posted yet (the first
// text will be, or the placeholder once PlaceholderAfter has passed without text); else the
// placeholder is posted now.
func (a *answer) openEdit(ctx context.Context) (*editSink, error) {
	if after := a.r.opt.PlaceholderAfter; after > 0 {
		e := a.editSink(a.r.paced.EditLane(), "")
		e.placeholderDue = a.start.Add(after)
		return e, nil
	}
	ts, err := a.postRetry(ctx, gateway.InterimRetry, nil, a.placeholder())
	if err != nil {
		return nil, fmt.Errorf("post placeholder: %w", err)
	}
	e := a.editSink(a.r.paced.EditLane(), ts)
	e.posts = 1
	return e, nil
}

// editSink writes the answer into the placeholder ts ("": none posted yet) and the messages it
// continues in.
func (a *answer) editSink(lane *pace.Lane, ts string) *editSink {
	limit := slackmd.MrkdwnLimit
	if a.r.opt.Buttons {
		limit = buttonPartLimit
	}
	e := &editSink{
		answer: a,
		lane:   lane,
		pager:  slackmd.NewPager(slackmd.FormatMrkdwn, limit),
		end:    a.r.paced.ClaimEnd(a.req.Channel),
	}
	if ts == "" {
		e.postDue = true // the first write posts the first part
		return e
	}
	e.ts, e.shown, e.btn = []string{ts}, []string{""}, []string{buttonKey(a.buttons(false))}
	return e
}

// openInPlace starts a Regenerate where the old answer stands (old: its messages, first first), so
// the thread ends with one answer: the first message becomes the placeholder (an edit, like the
// answer's first text, at that priority) and the others are deleted; the new answer continues in
// new messages when it is longer. Returned errors are the edit's: the caller then answers in a new
// message. An old part that cannot be deleted stays (logged).
func (a *answer) openInPlace(ctx context.Context, old []string) (*editSink, error) {
	lane := a.r.paced.EditLane()
	err := a.r.paced.Update(ctx, gateway.InterimRetry, nil, a.r.paced.EditTurn(lane, pace.First, time.Now()), a.req.Channel, old[0], a.placeholder())
	if err != nil {
		lane.Close()
		return nil, fmt.Errorf("chat.update old answer: %w", err)
	}
	for _, ts := range old[1:] {
		if err := a.deleteMessage(ctx, gateway.ReplaceRetry, time.Time{}, ts); err != nil {
			a.log.Warn("regenerate: a part of the old answer could not be deleted", zap.Error(err))
		}
	}
	e := a.editSink(lane, old[0])
	e.inPlace = true
	return e, nil
}

// oldAnswer is the messages of the answer a Regenerate was pressed on (route.ReplyRequest.Replace), oldest
// first: the pressed message and the other parts of its answer (those that name the same first
// part, Mark.First). nil when the pressed message is not one of the bot's in the thread.
func (a *answer) oldAnswer(thread []slack.Message) []string {
	return convo.AnswerParts(thread, a.req.Replace, a.r.own)
}

func (a *answer) openStream(ctx context.Context) (*streamSink, error) {
	if err := a.r.paced.PostWait(ctx, a.req.Channel); err != nil {
		return nil, err
	}
	ts, err := a.r.streamer.StartStream(ctx, a.streamStart(""))
	if err != nil {
		return nil, err
	}
	a.posted(ts)
	now := time.Now()
	return &streamSink{answer: a, lane: a.r.paced.AppendLane(), ms: slackmd.NewMarkdownStream(), ts: ts, firstTS: ts,
		streamed: []string{ts}, starts: 1, opened: now, wrote: now}, nil
}

func (a *answer) streamStart(md string) gateway.StreamStart {
	team := a.req.Team
	if team == "" {
		team = a.r.opt.TeamID
	}
	return gateway.StreamStart{Channel: a.req.Channel, ThreadTS: a.threadTS, RecipientUserID: a.req.User,
		RecipientTeamID: team, Markdown: md}
}

// buttons are what the answer's last message carries: Stop while it is written, Regenerate once
// it is final (unless noRegen). nil when buttons are off; an empty slice when there are none.
func (a *answer) buttons(final bool) []gateway.Button {
	switch {
	case !a.r.opt.Buttons:
		return nil
	case !final:
		return []gateway.Button{stopButton(a.ref())}
	case a.noRegen:
		return []gateway.Button{}
	case a.r.opt.Feedback:
		return []gateway.Button{regenerateButton(a.ref()), feedbackButton(a.ref())}
	}
	return []gateway.Button{regenerateButton(a.ref())}
}

// ref names this answer for its buttons.
func (a *answer) ref() route.ReplyRef {
	return route.ReplyRef{ThreadTS: a.req.ThreadTS, TS: a.req.TS, Task: a.req.Task}
}

// startsThread reports whether the mention starts a new thread (a top-level channel message answered
// in its own thread), so nothing but the mention itself can be read there. A Regenerate reads the
// thread all the same: the question is taken from Slack, not from the request; so does a task,
// which works on the whole thread.
func (a *answer) startsThread() bool {
	return a.threadTS != "" && a.threadTS == a.req.TS && !a.req.Regenerate && a.req.Task == ""
}

// readContext reads the thread (or, for a top-level DM, the recent history), and notes how many
// of the thread's older messages the read left out (answer.leftOut).
func (a *answer) readContext(ctx context.Context) ([]slack.Message, error) {
	if a.threadTS == "" {
		return a.r.reads.History(ctx, a.req.Channel, a.r.opt.HistoryLimit, "")
	}
	msgs, leftOut, err := a.r.reads.Replies(ctx, a.req.Channel, a.threadTS)
	if err != nil {
		return nil, err
	}
	a.leftOut = leftOut
	if a.req.ChannelType == "im" && len(msgs) > 0 && msgs[0].Timestamp == a.threadTS && a.r.own(msgs[0]) {
		if first, ok := convo.FirstPart(msgs[0]); ok {
			msgs = a.withAnswerContext(ctx, msgs, first)
		}
	}
	return msgs, nil
}

// dmAnswerSpan is how long after an answer's first message (its placeholder) in a DM its later parts
// may come, a reasoning model's thinking included: the DM history read for a thread under it ends
// that long after it.
const dmAnswerSpan = 15 * time.Minute

// withAnswerContext adds to a DM thread under one of the bot's answers or errors (it answers there
// at the top level) what the thread lacks: the DM's messages before it (the question) and the
// answer's other parts, top-level messages that name its first part, first (Mark.First). One read
// of the history that ends dmAnswerSpan after the thread's parent, and a second that ends at it
// when the DM went on so much meanwhile that the first did not reach back to it; when a read
// fails, the thread goes with what there is.
func (a *answer) withAnswerContext(ctx context.Context, thread []slack.Message, first string) []slack.Message {
	history := func(latest string) ([]slack.Message, error) {
		hist, err := a.r.reads.History(ctx, a.req.Channel, a.r.opt.HistoryLimit, latest)
		if err != nil {
			a.log.Debug("conversations.history around a DM thread's answer; going on without it", zap.Error(err))
		}
		return hist, err
	}
	hist, err := history(tsPlus(a.threadTS, dmAnswerSpan))
	if err != nil {
		return thread
	}
	if len(hist) >= a.r.opt.HistoryLimit && !convo.TSBefore(hist[0].Timestamp, first) { // HistoryLimit >= 1
		// The read did not reach back before the answer's first part (the question is before it): one
		// more, up to the thread's parent, for the parts between them and what came before.
		if before, err := history(a.threadTS); err == nil {
			n := 0 // the reads overlap: only what the first did not reach
			for n < len(before) && convo.TSBefore(before[n].Timestamp, hist[0].Timestamp) {
				n++
			}
			hist = append(before[:n:n], hist...)
		}
	}
	out := make([]slack.Message, 0, len(hist)+len(thread))
	for _, m := range hist {
		if m.Timestamp == a.threadTS {
			continue // the thread's parent, which the thread holds
		}
		if convo.TSBefore(m.Timestamp, a.threadTS) || convo.LaterPartOf(m, first) {
			out = append(out, m)
		}
	}
	out = append(out, thread...)
	slices.SortStableFunc(out, func(a, b slack.Message) int { return convo.CompareTS(a.Timestamp, b.Timestamp) })
	return out
}

// tsPlus is Slack timestamp ts moved d later ("" when ts is not one).
func tsPlus(ts string, d time.Duration) string {
	sec, frac, _ := strings.Cut(ts, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return ""
	}
	if frac == "" {
		frac = "000000"
	}
	return strconv.FormatInt(n+int64(d/time.Second), 10) + "." + frac
}

// trigger returns the triggering message from the thread (found), or builds it from the request when
// the thread read does not include it yet. A deleted message is not found: Slack keeps a deleted
// thread parent as a tombstone ("This message was deleted.") at its ts, which is no question.
func (a *answer) trigger(thread []slack.Message) (m slack.Message, found bool) {
	for _, m := range thread {
		if m.Timestamp == a.req.TS {
			if m.SubType == msgSubTypeTombstone {
				break
			}
			return m, true
		}
	}
	m.User, m.Text, m.Timestamp, m.ThreadTimestamp = a.req.User, a.req.Text, a.req.TS, a.req.ThreadTS
	m.Files, m.Attachments = a.req.Files, a.req.Attachments
	return m, false
}

// taskTrigger is the message that stands in for the question of a task: its instruction, from
// the person who asked, with no ts (so it comes after the whole thread).
func (a *answer) taskTrigger(instruction string) slack.Message {
	var m slack.Message
	m.User, m.Text = a.req.User, instruction
	return m
}

// taskQuestion is what a task's answer names as its question (Mark.Question). Not the message the
// task was asked on: an answer to that message (a mention's) would then be taken for the same
// question's older answer and left out when the thread is replayed. The moment the task was asked
// instead comes where the request stands in the thread. A Regenerate keeps the question of the
// answer it replaces (old: its messages, first first), so that should the new one come below the
// old, the thread replays only the new.
func (a *answer) taskQuestion(thread []slack.Message, old []string) string {
	if len(old) > 0 {
		for _, m := range thread {
			if q := convo.QuestionOf(m); m.Timestamp == old[0] && q != "" {
				return q
			}
		}
	}
	return slackTS(a.start)
}

// questionTS is the question the answer's marks name (Mark.Question).
func (a *answer) questionTS() string { return cmp.Or(a.question, a.req.TS) }

// slackTS is t as a Slack message timestamp.
func slackTS(t time.Time) string {
	us := t.UnixMicro()
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

// streamRound pulls the model's answer to one round (tools.go; an answer without tools has one) in
// this goroutine and hands snapshots (after the round's prefix) to the writer goroutine, which it
// starts and waits for before returning. It returns the round's text, its finish reason, its tool
// calls and the stream's error.
func (a *answer) streamRound(ctx context.Context, rd round, s sink) roundResult {
	if rd.prefix == "" { // the first round: the later ones follow their tools' tasks
		s.progress(ctx, a.readTasks()...)
	}
	sctx, scancel := context.WithCancelCause(llm.WithRetries(ctx, retried(s, ctx)))
	defer scancel(nil)
	stall := a.r.opt.StallTimeout
	watchdog := time.AfterFunc(stall, func() { scancel(notes.ErrStalled) })
	defer watchdog.Stop()

	mb := newMailbox()
	defer a.startWriter(ctx, s, mb, func() { scancel(errWriterFailed) })()

	policy := a.policy(s)
	var b strings.Builder       // the model's content so far
	var think convo.ThinkFilter // finds the answer in it: b without reasoning left in it
	var answer string           // the answer so far
	var finishReason string
	var streamErr error
	var calls []llm.ToolCall
	var capped bool // the answer reached maxAnswerBytes: the rest of the stream is not read
	sinceLast := 0
	begin := time.Now()
	req := llm.ChatRequest{Model: a.model, Messages: rd.msgs, Tools: rd.tools,
		KeepImages: a.vision() == VisionOn, ImagesDropped: func() { a.imagesUnseen = true }, ToolsDropped: func() { a.toolsUnavailable = true }}
	for c, err := range a.r.chat.Stream(sctx, req) {
		watchdog.Reset(stall)
		if err != nil {
			streamErr = err
			break
		}
		a.chunks++
		if c.FinishReason != "" {
			finishReason = c.FinishReason
		}
		calls = append(calls, c.ToolCalls...)
		text := c.Content + c.Refusal
		if text == "" {
			continue // reasoning, usage: the placeholder keeps saying "Thinking…"
		}
		b.WriteString(text)
		shown := len(answer)
		if answer = think.Answer(b.String()); len(answer) == shown {
			continue // reasoning in the content, or whitespace after it: still "Thinking…"
		}
		if answer, capped = capAnswer(rd.prefix, answer); capped {
			finishReason, calls = finishCapped, nil
			mb.put(snapshot{md: rd.prefix + answer, since: time.Now()})
			break // closes the model's stream: nothing more of it is shown
		}
		now := time.Now()
		if shown == 0 && a.ttft == 0 {
			a.ttft = now.Sub(begin)
		}
		sinceLast++
		if policy.Publish(sinceLast) {
			mb.put(snapshot{md: rd.prefix + answer, since: now})
			sinceLast = 0
		}
	}
	md := think.Final(b.String())
	if capped {
		md = answer
	}
	res := roundResult{md: md, finish: finishReason, calls: calls, err: stalled(ctx, sctx, streamErr, finishReason)}
	if lastRound(ctx, rd, res) {
		a.modelDone() // at once, not after the writer's last interim write
	}
	return res
}

// startWriter starts the writer: one goroutine owns the Slack message(s) while the answer streams.
// It is fed through mb, a size-1 mailbox holding only the latest snapshot. wait ends it and waits
// for it; a panic of the writer's calls failed (to end the model's stream) and is raised again by
// wait in the answer's goroutine, whose recover closes the answer with a note (run).
func (a *answer) startWriter(ctx context.Context, s sink, mb *mailbox, failed func()) (wait func()) {
	wctx, wcancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	var wpanic error
	wg.Go(func() {
		defer caught(&wpanic, failed)
		for {
			snap, ok := mb.takeBy(wctx, s.idleDue())
			switch {
			case ok:
				s.interim(ctx, wctx, snap, mb)
			case wctx.Err() != nil:
				return
			default:
				s.idle(ctx) // no text yet by idleDue
			}
		}
	})
	return func() {
		wcancel(errWriteDone)
		wg.Wait()
		if wpanic != nil {
			panic(wpanic)
		}
		if n, ok := mb.poll(); ok { // text the writer never took
			a.noteUnshown(n.since)
		}
	}
}

// stalled is the error of a round's stream that ended with err and finishReason: notes.ErrStalled when
// the watchdog ended it (sctx's cause), whatever error that produced.
func stalled(ctx, sctx context.Context, err error, finishReason string) error {
	if (err != nil || finishReason == "") && ctx.Err() == nil && errors.Is(context.Cause(sctx), notes.ErrStalled) {
		return notes.ErrStalled
	}
	return err
}

// lastRound reports whether no model round follows rd, which ended with res (generate's test).
func lastRound(ctx context.Context, rd round, res roundResult) bool {
	return len(res.calls) == 0 || rd.tools == nil || res.err != nil || ctx.Err() != nil
}

// scheduler is the budget s writes from.
func (a *answer) scheduler(s sink) *pace.Scheduler {
	_, stream := s.(*streamSink)
	return a.r.paced.Scheduler(stream)
}

func (a *answer) policy(s sink) pace.Policy { return a.scheduler(s).Policy() }

// mark is the Mark of message part (0 for the first) of this answer: kind and note, the
// question it answers, and on a later part the ts of the first (convo.Build replays an answer by
// them wherever its messages sit in the thread).
func (a *answer) mark(kind convo.MarkKind, note string, part int, first string) convo.Mark {
	m := convo.Mark{Kind: kind, Note: note, Question: a.questionTS()}
	if part > 0 {
		m.First = first
	}
	return m
}

// askerName is the asker's display name for a stop note: resolve's cache, else one look-up of at
// most stopNameTimeout (a thread one person started needs no names, so the asker may not be cached).
// ctx is the answer's own, already cancelled by the stop.
func (a *answer) askerName(ctx context.Context) (string, bool) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopNameTimeout)
	defer cancel()
	return a.r.names.Resolve(lctx, a.log, []string{a.req.User}).Name(a.req.User)
}

// outcome decides the status note and mark kind of a finished stream, and the error Reply returns.
func (a *answer) outcome(ctx context.Context, md, finishReason string, streamErr error) (string, convo.MarkKind, error) {
	empty := strings.TrimSpace(md) == ""
	kind := convo.MarkAnswer
	var note string
	var err error
	switch {
	case streamErr == nil && (finishReason != "" || ctx.Err() == nil):
		note = finishNote(finishReason, empty)
	case ctx.Err() != nil: // shutdown, stop button, or the caller's own cancellation
		cause := context.Cause(ctx)
		if note = stopNote(cause); note == "" {
			note = "Interrupted."
		}
		if errors.Is(cause, ErrStopped) {
			if n, ok := a.askerName(ctx); ok {
				note = "Stopped by " + n + "." // only the asker may stop an answer
			}
		}
		if empty {
			kind = convo.MarkNotice
		}
		return note, kind, fmt.Errorf("answer: %w", cause)
	case errors.Is(streamErr, notes.ErrStalled):
		note, err = notes.Stalled, fmt.Errorf("chat stream: no data for %s: %w", a.r.opt.StallTimeout, streamErr)
	default:
		note, err = notes.Model(streamErr, !empty), fmt.Errorf("chat stream: %w", streamErr)
	}
	if empty && note != "" {
		kind = convo.MarkError
	}
	return note, kind, err
}

// msgSubTypeTombstone is the subtype of what Slack keeps of a deleted thread parent.
const msgSubTypeTombstone = "tombstone"

// snapshot is the answer so far: the whole text and when its oldest part not yet taken by the writer
// arrived.
type snapshot struct {
	md    string
	since time.Time
}

// mailbox hands the latest snapshot from the reader (one goroutine) to the writer (one goroutine):
// size 1, and put overwrites an untaken snapshot instead of queueing it.
type mailbox struct{ ch chan snapshot }

func newMailbox() *mailbox { return &mailbox{ch: make(chan snapshot, 1)} }

// put replaces any untaken snapshot with s (keeping the older since). Only one goroutine may put, so
// the send after the drain never blocks.
func (m *mailbox) put(s snapshot) {
	select {
	case old := <-m.ch:
		if old.since.Before(s.since) {
			s.since = old.since
		}
	default:
	}
	m.ch <- s
}

// takeBy waits for a snapshot; false when ctx ends first, or when by (unless zero) comes first.
func (m *mailbox) takeBy(ctx context.Context, by time.Time) (snapshot, bool) {
	var due <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(time.Until(by))
		defer t.Stop()
		due = t.C
	}
	select {
	case s := <-m.ch:
		return s, true
	case <-ctx.Done():
	case <-due:
	}
	return snapshot{}, false
}

// poll returns the waiting snapshot, if any.
func (m *mailbox) poll() (snapshot, bool) {
	select {
	case s := <-m.ch:
		return s, true
	default:
		return snapshot{}, false
	}
}

// latest returns a fresher snapshot than s if one is waiting, else s.
func (m *mailbox) latest(s snapshot) snapshot {
	select {
	case n := <-m.ch:
		if s.since.Before(n.since) {
			n.since = s.since
		}
		return n
	default:
		return s
	}
}
