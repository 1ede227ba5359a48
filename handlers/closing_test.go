package handlers

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/pace"
)

// Slack answers chat.update with 429 (Retry-After: 1) for 45 s while a short answer streams: the
// final edit waits out every Retry-After (finalRateLimited) and the answer stands, not "Thinking…".
func TestFinalEditOutlastsALongRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newReplyTest(t, deltas([]string{"The ", "whole ", "answer."}, 100*time.Millisecond), testOptions())
		t0 := time.Now()
		rt.slack.updateErr = func(n int, c call) error {
			if time.Since(t0) < 45*time.Second {
				return &slack.RateLimitedError{RetryAfter: time.Second}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply returned after %v: %v (%d chat.update calls)", time.Since(t0), err, len(rt.slack.callsOf("update")))
		if got := rt.texts(); len(got) != 1 || got[0] != "The whole answer." {
			t.Errorf("thread shows %q once Slack stopped rate limiting at +45s, want the answer %q", got, "The whole answer.")
		}
	})
}

// longTwoPartAnswer returns an answer of two paragraphs, A and B, where A alone fits a message
// and A+B does not: B is the part that continues in a second message.
func longTwoPartAnswer() (a, b string) {
	var sa, sb strings.Builder
	for i := 0; sa.Len() < 2000; i++ {
		fmt.Fprintf(&sa, "Alpha sentence %d of the first paragraph. ", i)
	}
	for i := 0; sb.Len() < 2500; i++ {
		fmt.Fprintf(&sb, "Bravo sentence %d of the second paragraph. ", i)
	}
	return strings.TrimSpace(sa.String()), strings.TrimSpace(sb.String())
}

// An answer outgrows its first message just before a shutdown, while the edit budget is spent: the
// first message keeps the text it had (paragraph A and the start of B), and the final write does
// not post a second part that repeats the start of B; the interrupted note goes below instead.
func TestShutdownMultiPartShowsNoTextTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		opt := testOptions()
		opt.Edits = pace.NewScheduler(6, 1) // spent: one edit every ~10 s
		steps := []step{
			{wait: 100 * time.Millisecond, chunk: llm.Chunk{Content: a + "\n\n" + b[:1000]}},
			{wait: 100 * time.Millisecond, chunk: llm.Chunk{Content: b[1000:]}},
			{wait: time.Minute, chunk: llm.Chunk{Content: " The end."}},
			{chunk: llm.Chunk{FinishReason: "stop"}},
		}
		rt := newReplyTest(t, steps, opt)
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(ErrShutdown) })
		err := rt.r.Reply(ctx, rt.req)
		t.Logf("Reply = %v", err)
		got := rt.texts()
		for i, m := range got {
			t.Logf("message %d (%d chars): %q ... %q", i, len(m), m[:min(60, len(m))], m[max(0, len(m)-80):])
		}
		all := strings.Join(got, "\n")
		if n := strings.Count(all, "Bravo sentence 0 of"); n != 1 {
			t.Errorf("the second paragraph's first sentence shows %d times in the thread, want once", n)
		}
	})
}

// A two-part answer while chat.update is rate limited (429, Retry-After: 1) for 45 s, chat.postMessage
// working: the thread ends with the answer's parts in order, the first one included.
func TestMultiPartFinalKeepsItsFirstPart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		md := a + "\n\n" + b
		rt := newReplyTest(t, deltas(words(md, 200), 100*time.Millisecond), testOptions())
		t0 := time.Now()
		rt.slack.updateErr = func(n int, c call) error {
			if time.Since(t0) < 45*time.Second {
				return &slack.RateLimitedError{RetryAfter: time.Second}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		want := convo.Split(md, convo.FormatMrkdwn, convo.MrkdwnLimit)
		got := rt.texts()
		for i, m := range got {
			t.Logf("message %d (%d chars): %q ...", i, len(m), m[:min(60, len(m))])
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("thread shows %d messages starting %q, want the %d parts of the answer", len(got), firstChars(got), len(want))
		}
	})
}

func firstChars(ms []string) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m[:min(30, len(m))])
	}
	return out
}

// longStreamAnswer is an answer of about 1.5 native-streaming messages, one numbered line each.
func longStreamAnswer() []string {
	var ws []string
	for i := 0; len(joined(ws)) < convo.MarkdownLimit*3/2; i++ {
		ws = append(ws, fmt.Sprintf("Line %d: %s\n", i, strings.Repeat("abc ", 20)))
	}
	return ws
}

// checkEachLineOnce fails when a line of the answer shows other than once in the thread's bot
// messages.
func checkEachLineOnce(t *testing.T, fs *fakeSlack, ws []string) {
	t.Helper()
	ms := fs.botMessages(testTS)
	var all strings.Builder
	for i, m := range ms {
		t.Logf("message %d: %d bytes, streaming %v, mark %+v", i, len(m.text), m.streaming, m.mark)
		all.WriteString(m.text)
		all.WriteString("\n")
	}
	twice := 0
	for _, w := range ws {
		key := strings.SplitN(w, ":", 2)[0] + ":" // "Line 7:"
		if n := strings.Count(all.String(), key); n != 1 {
			if twice++; twice <= 3 {
				t.Errorf("%q shows %d times in the thread, want once", key, n)
			}
		}
	}
	if twice > 3 {
		t.Errorf("... %d lines in all show other than once", twice)
	}
}

// A long answer streams into two native messages; the first is stopped when full, the second cannot
// be stopped (message_not_in_streaming_state). The rescue posts the answer in place of the streamed
// messages, which it deletes: every line of the answer shows once.
func TestStreamRescueRepeatsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := longStreamAnswer()
		rt := newReplyTest(t, deltas(ws, 20*time.Millisecond), streamOptions())
		rt.slack.stopErr = func(n int, _ call) error {
			if n >= 2 { // the first stop (the full first message) goes; the last cannot
				return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v; starts %d, stops %d, rescue posts %d", err, len(rt.slack.callsOf("startStream")),
			len(rt.slack.callsOf("stopStream")), len(rt.slack.callsOf("post")))
		checkEachLineOnce(t, rt.slack, ws)
	})
}

// chat.appendStream refuses three appends in a row (not transiently), so interim appends stop. The
// final write rescues the answer: no message is left streaming, and each line shows once.
func TestStreamBrokenAppendsStopTheStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ws := lines(40)
		rt := newReplyTest(t, deltas(ws, 200*time.Millisecond), streamOptions())
		rt.slack.appendErr = func(n int, _ call) error {
			if n >= 3 && n <= 5 {
				return slack.SlackErrorResponse{Err: "invalid_arguments"}
			}
			return nil
		}
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v; appends %d, stops %d, rescue posts %d", err, len(rt.slack.callsOf("appendStream")),
			len(rt.slack.callsOf("stopStream")), len(rt.slack.callsOf("post")))
		ms := rt.slack.botMessages(testTS)
		for i, m := range ms {
			if m.streaming {
				t.Errorf("message %d left streaming: %q", i, m.text)
			}
		}
		var all strings.Builder
		for _, m := range ms {
			all.WriteString(m.text + "\n")
		}
		for _, w := range ws[:2] {
			if n := strings.Count(all.String(), strings.TrimSpace(w)); n != 1 {
				t.Errorf("%q shows %d times, want once", strings.TrimSpace(w), n)
			}
		}
	})
}

// Someone deletes the bot's reply (its first message) while a two-part answer streams: the final
// write does not post the second half alone, without its beginning.
func TestDeletedFirstPartIsNotContinued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := longTwoPartAnswer()
		md := a + "\n\n" + b
		rt := newReplyTest(t, deltas(words(md, 100), 100*time.Millisecond), testOptions())
		time.AfterFunc(500*time.Millisecond, func() {
			fs := rt.slack
			fs.mu.Lock()
			defer fs.mu.Unlock()
			fs.msgs = fs.msgs[1:] // the reply (placeholder, now the first part) is deleted
		})
		err := rt.r.Reply(t.Context(), rt.req)
		t.Logf("Reply = %v", err)
		got := rt.texts()
		for i, m := range got {
			t.Logf("message %d (%d chars): %q ...", i, len(m), m[:min(60, len(m))])
		}
		all := strings.Join(got, "\n")
		if strings.Contains(all, "Bravo sentence 0 of") && !strings.Contains(all, "Alpha sentence 0 of") {
			t.Errorf("the thread shows the answer's second part without its first")
		}
	})
}

// hangingUpdater is a Slack whose chat.update does not answer between from and to (a network
// partition or an overloaded Slack): the call ends only when its context does, with the context's
// error, as an HTTP client's does.
type hangingUpdater struct {
	*fakeSlack
	from, to time.Time
}

func (h hangingUpdater) Update(ctx context.Context, channel, ts string, m Msg) error {
	if now := time.Now(); !now.Before(h.from) && now.Before(h.to) {
		<-ctx.Done()
		return fmt.Errorf("Post \"https://slack.com/api/chat.update\": %w", ctx.Err())
	}
	return h.fakeSlack.Update(ctx, channel, ts, m)
}

// chat.update hangs for 35 s (each interim call gives up after writeCallTimeout, 10 s) early in a
// 100 s answer: the timeouts are transient, so the writer backs off and edits again once Slack
// answers, and the message does not freeze for the rest of the answer.
func TestInterimEditsResumeAfterSlackHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		chat := &fakeChat{steps: deltas(numbered(100), time.Second)}
		t0 := time.Now()
		r := NewReplies(fs, hangingUpdater{fs, t0.Add(2 * time.Second), t0.Add(37 * time.Second)}, fs, fs, chat, nil, testOptions())
		req := testRequest()
		mustNoErr(t, r.Reply(t.Context(), req))
		var after int
		for _, u := range fs.callsOf("update") {
			if d := u.at.Sub(t0); d >= 40*time.Second && d < 99*time.Second {
				after++
			}
		}
		if after == 0 {
			t.Errorf("no edit between +40s (Slack answering again) and +99s while the answer streamed until +100s: the message froze")
		}
		if ms := fs.botMessages(testTS); len(ms) != 1 || !strings.HasSuffix(ms[0].text, "word99") {
			t.Errorf("final = %+v, want the whole answer", ms)
		}
	})
}

// headerTimeout is net/http's error when a server sends no response headers in time
// (Transport.ResponseHeaderTimeout, 30 s in the bot's Slack client): like net/http's own, it
// matches context.DeadlineExceeded.
type headerTimeout struct{}

func (headerTimeout) Error() string        { return "net/http: timeout awaiting response headers" }
func (headerTimeout) Timeout() bool        { return true }
func (headerTimeout) Is(target error) bool { return target == context.DeadlineExceeded }

// slowSlackUpdater is a Slack whose chat.update sends no response headers between from and to: the
// HTTP client gives up after 30 s (ResponseHeaderTimeout) with net/http's timeout error.
type slowSlackUpdater struct {
	*fakeSlack
	from, to time.Time
}

func (s slowSlackUpdater) Update(ctx context.Context, channel, ts string, m Msg) error {
	if now := time.Now(); !now.Before(s.from) && now.Before(s.to) {
		t := time.NewTimer(30 * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return fmt.Errorf("chat.update: %w", &url.Error{Op: "Post", URL: "https://slack.com/api/chat.update", Err: headerTimeout{}})
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return s.fakeSlack.Update(ctx, channel, ts, m)
}

// Slack stops answering chat.update for 40 s just as an answer ends (requests time out rather than
// get a 5xx): net/http's header timeout is transient, so the final edit retries and the answer
// stands once Slack answers again.
func TestFinalEditRidesOutSlackTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		chat := &fakeChat{steps: deltas([]string{"The ", "whole ", "answer."}, 100*time.Millisecond)}
		t0 := time.Now()
		r := NewReplies(fs, slowSlackUpdater{fs, t0.Add(150 * time.Millisecond), t0.Add(40 * time.Second)}, fs, fs, chat, nil, testOptions())
		req := testRequest()
		err := r.Reply(t.Context(), req)
		t.Logf("Reply = %v after %v", err, time.Since(t0))
		if ms := fs.botMessages(testTS); len(ms) != 1 || ms[0].text != "The whole answer." {
			t.Errorf("thread shows %+v after Slack answered again at +40s, want the answer %q", ms, "The whole answer.")
		}
	})
}

// The model has finished and the reply's final edit waits for a chat.update slot (the shared budget
// is spent, as under load) when the bot shuts down: the wait gets half the closing time and the
// shutdown rule the rest (the placeholder withdrawn and the asker told, or the note posted below),
// so the thread is not left "Thinking…".
func TestShutdownDuringTheFinalWriteClosesTheReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opt := testOptions()
		opt.Edits = pace.NewScheduler(6, 1) // one edit every ~10 s
		other := opt.Edits.Lane()           // another reply takes the slot there is
		mustNoErr(t, other.Wait(t.Context(), pace.Final, time.Time{}))
		defer other.Close()
		rt := newReplyTest(t, deltas([]string{"The ", "whole ", "answer."}, 100*time.Millisecond), opt)
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(time.Second, func() { cancel(ErrShutdown) }) // the answer ended at +0.3 s
		err := rt.r.Reply(ctx, rt.req)
		t.Logf("Reply = %v", err)
		ms := rt.slack.botMessages(testTS)
		eph := rt.slack.callsOf("ephemeral")
		t.Logf("messages %+v; ephemerals %d", ms, len(eph))
		switch {
		case len(ms) == 0 && len(eph) == 1:
			// withdrawn, asker told
		case len(ms) >= 1 && !strings.Contains(ms[0].text, "Thinking"):
			// the answer (or a note) landed
		default:
			t.Errorf("thread shows %q and the asker got %d private notes: left as a bare placeholder", rt.texts(), len(eph))
		}
	})
}
