package handlers

// Generating, the answer's state after reading (lifecycle.go): the model's answer is streamed round
// by round (tools.go; an answer without tools has one), while one writer goroutine writes it into
// Slack through the sink as it grows.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/notes"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/toolinfo"
)

// generation asks the model for one answer and has the sink show it as it comes.
type generation struct {
	*answerBase
	host roundHost
	// model is the channel's (ReplyOptions.ChannelSettings) or the default.
	model string
	// keepImages: the channel's vision is on (the model must see the pictures; see attach.Vision).
	keepImages bool
	// firstTasks are the progress the first round shows (progress.go's readTasks).
	firstTasks []gateway.Task
	// imagesUnseen: the model refused the pictures and answered without them (VISION=auto); the
	// answer says so.
	imagesUnseen bool
	// toolsUnavailable: the model's server refused the tools, learned by this answer (said once
	// per model: later answers simply go without them).
	toolsUnavailable bool

	ttft   time.Duration
	chunks int
}

// roundSink is the sink as the model's rounds write into it.
type roundSink interface {
	// interim writes progress; called only by the writer goroutine. Slack calls use ctx (the answer's);
	// waits for a slot use wctx, which ends when the answer is complete.
	interim(ctx, wctx context.Context, snap snapshot, mb *mailbox)
	// idleDue is when the writer, still without text, calls idle (zero: never).
	idleDue() time.Time
	// idle shows life while the model has sent no text yet; called by the writer goroutine, or
	// before it starts while the answer is prepared (idleDuring).
	idle(ctx context.Context)
	// progress shows a step of the answer as a task card, where the sink can (progress.go).
	progress(ctx context.Context, tasks ...gateway.Task)
	// mode is how the sink writes the answer.
	mode() ReplyMode
}

// roundHost is the answer as its model rounds need it.
type roundHost interface {
	// modelDone tells the bot, once, that the answer asks the model no more.
	modelDone()
	// noteUnshown records when the oldest text Slack does not show yet arrived.
	noteUnshown(since time.Time)
	// approve asks the asker about tool calls that need a click (approver.go).
	approve(ctx context.Context, calls []*toolCall, foreign string) toolinfo.Verdict
}

// streamRound pulls the model's answer to one round (tools.go; an answer without tools has one) in
// this goroutine and hands snapshots (after the round's prefix) to the writer goroutine, which it
// starts and waits for before returning. It returns the round's text, its finish reason, its tool
// calls and the stream's error.
func (a *generation) streamRound(ctx context.Context, rd round, s roundSink) roundResult {
	if rd.prefix == "" { // the first round: the later ones follow their tools' tasks
		s.progress(ctx, a.firstTasks...)
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
		KeepImages: a.keepImages, ImagesDropped: func() { a.imagesUnseen = true }, ToolsDropped: func() { a.toolsUnavailable = true }}
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
		a.host.modelDone() // at once, not after the writer's last interim write
	}
	return res
}

// startWriter starts the writer: one goroutine owns the Slack message(s) while the answer streams.
// It is fed through mb, a size-1 mailbox holding only the latest snapshot. wait ends it and waits
// for it; a panic of the writer's calls failed (to end the model's stream) and is raised again by
// wait in the answer's goroutine, whose recover closes the answer with a note (run).
func (a *generation) startWriter(ctx context.Context, s roundSink, mb *mailbox, failed func()) (wait func()) {
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
			a.host.noteUnshown(n.since)
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
func (a *generation) scheduler(s roundSink) *pace.Scheduler {
	return a.r.paced.Scheduler(s.mode() == ModeStream)
}

func (a *generation) policy(s roundSink) pace.Policy { return a.scheduler(s).Policy() }

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
