package handlers

import (
	"context"
	"fmt"
	"iter"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/llm"
)

// Compile-time checks: the fakes implement the handlers' interfaces.
var (
	_ Thread    = (*fakeSlack)(nil)
	_ Messenger = (*fakeSlack)(nil)
	_ Streamer  = (*fakeSlack)(nil)
	_ Users     = (*fakeSlack)(nil)
	_ Uploader  = (*fakeSlack)(nil)
	_ Responder = (*fakeSlack)(nil)
	_ Chat      = (*fakeChat)(nil)
	_ Imager    = (*fakeImager)(nil)
)

// call is one recorded Slack call.
type call struct {
	method  string // "post", "update", "ephemeral", "startStream", "appendStream", "stopStream", "replies", ...
	at      time.Time
	ts      string // message ts (the one created, for post/startStream)
	thread  string
	text    string
	mark    convo.Mark
	buttons []Button // nil: none sent (blocks untouched)
	user    string   // the recipient of an ephemeral
	err     error    // what the fake answered
	start   StreamStart
	upload  Upload
	tasks   []Task // appendTasks
}

// fakeMsg is a message the fake holds.
type fakeMsg struct {
	channel, thread, ts string
	text                string
	mark                convo.Mark
	streaming           bool
	buttons             []Button // shown under the text
}

// fakeSlack is an in-memory Slack: it records every call, keeps the bot's messages (so a thread read
// sees them, with their metadata) and answers with injected errors when a hook returns one.
type fakeSlack struct {
	mu      sync.Mutex
	calls   []call
	threads map[string][]slack.Message // channel/thread_ts -> messages other people wrote
	history map[string][]slack.Message // channel -> top-level messages
	msgs    []*fakeMsg
	names   map[string]string
	nextTS  int

	// Hooks: n is the 1-based count of calls of that method so far, c the call. A non-nil error is
	// returned instead of performing the call.
	postErr    hook
	updateErr  hook
	repliesErr hook
	leftOut    int  // what Replies says its read left out of the thread
	namesErr   hook // users.info
	startErr   hook
	appendErr  hook
	stopErr    hook
	uploadErr  hook
	deleteErr  hook
	ephErr     hook

	// limit, when set, is a workspace token bucket for chat.update: calls beyond it get a 429 with
	// Retry-After, as Slack does.
	limit *limiter
}

// limiter is the fake's own token bucket (independent of package pace).
type limiter struct {
	perSec, burst, tokens float64
	last                  time.Time
	throttled             int
}

func newLimiter(perMinute, burst float64) *limiter {
	return &limiter{perSec: perMinute / 60, burst: burst, tokens: burst, last: time.Now()}
}

// allow takes a token, or returns how long until one is there.
func (l *limiter) allow() (bool, time.Duration) {
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.perSec)
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true, 0
	}
	l.throttled++
	return false, time.Duration((1 - l.tokens) / l.perSec * float64(time.Second))
}

func newFakeSlack() *fakeSlack {
	return &fakeSlack{threads: map[string][]slack.Message{}, history: map[string][]slack.Message{},
		names: map[string]string{"U1": "Alice", "U2": "Bob"}, nextTS: 100}
}

func (f *fakeSlack) count(method string) int {
	n := 0
	for _, c := range f.calls {
		if c.method == method {
			n++
		}
	}
	return n
}

// hook decides the answer of the n-th call of a method: nil performs it.
type hook func(n int, c call) error

func (f *fakeSlack) record(c call, h hook) error {
	c.at = time.Now()
	n := f.count(c.method) + 1
	if h != nil {
		c.err = h(n, c)
	}
	f.calls = append(f.calls, c)
	return c.err
}

func (f *fakeSlack) newTS() string {
	f.nextTS++
	return fmt.Sprintf("1700000000.%06d", f.nextTS)
}

func (f *fakeSlack) find(ts string) *fakeMsg {
	for _, m := range f.msgs {
		if m.ts == ts {
			return m
		}
	}
	return nil
}

func (f *fakeSlack) Replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(call{method: "replies", thread: threadTS}, f.repliesErr); err != nil {
		return nil, 0, err
	}
	out := append([]slack.Message(nil), f.threads[channel+"/"+threadTS]...)
	for _, m := range f.msgs {
		if m.channel == channel && m.thread == threadTS {
			out = append(out, f.asMessage(m))
		}
	}
	return out, f.leftOut, nil
}

func (f *fakeSlack) History(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(call{method: "history", ts: latest}, nil); err != nil {
		return nil, err
	}
	var out []slack.Message
	for _, m := range f.history[channel] {
		if latest == "" || !convo.TSBefore(latest, m.Timestamp) {
			out = append(out, m)
		}
	}
	for _, m := range f.msgs {
		if m.channel == channel && m.thread == "" && (latest == "" || !convo.TSBefore(latest, m.ts)) {
			out = append(out, f.asMessage(m))
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

func (f *fakeSlack) asMessage(m *fakeMsg) slack.Message {
	var sm slack.Message
	sm.User, sm.BotID, sm.Text, sm.Timestamp, sm.ThreadTimestamp = "UBOT", "BBOT", m.text, m.ts, m.thread
	sm.Metadata = m.mark.Metadata()
	return sm
}

func (f *fakeSlack) Post(ctx context.Context, channel, threadTS string, m Msg) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	c := call{method: "post", thread: threadTS, text: m.Text, mark: m.Mark, buttons: m.Buttons}
	if err := f.record(c, f.postErr); err != nil {
		return "", err
	}
	ts := f.newTS()
	f.calls[len(f.calls)-1].ts = ts
	f.msgs = append(f.msgs, &fakeMsg{channel: channel, thread: threadTS, ts: ts, text: m.Text, mark: m.Mark, buttons: m.Buttons})
	return ts, nil
}

func (f *fakeSlack) Update(ctx context.Context, channel, ts string, m Msg) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if f.limit != nil {
		if ok, wait := f.limit.allow(); !ok {
			secs := time.Duration(math.Ceil(wait.Seconds())) * time.Second // Slack sends whole seconds
			err := &slack.RateLimitedError{RetryAfter: secs}
			f.record(call{method: "update", ts: ts, text: m.Text, mark: m.Mark, buttons: m.Buttons}, func(int, call) error { return err })
			return err
		}
	}
	if err := f.record(call{method: "update", ts: ts, text: m.Text, mark: m.Mark, buttons: m.Buttons}, f.updateErr); err != nil {
		return err
	}
	msg := f.find(ts)
	if msg == nil {
		return slack.SlackErrorResponse{Err: "message_not_found"}
	}
	if utf8.RuneCountInString(m.Text) > 4000 { // Slack counts characters, not bytes
		return slack.SlackErrorResponse{Err: "msg_too_long"}
	}
	msg.text, msg.mark = m.Text, m.Mark
	if m.Buttons != nil {
		msg.buttons = m.Buttons
	}
	return nil
}

func (f *fakeSlack) Ephemeral(ctx context.Context, channel, user, threadTS, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return f.record(call{method: "ephemeral", thread: threadTS, text: text, user: user}, f.ephErr)
}

func (f *fakeSlack) Delete(ctx context.Context, channel, ts string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := f.record(call{method: "delete", ts: ts}, f.deleteErr); err != nil {
		return err
	}
	for i, m := range f.msgs {
		if m.channel == channel && m.ts == ts {
			f.msgs = append(f.msgs[:i], f.msgs[i+1:]...)
			return nil
		}
	}
	return slack.SlackErrorResponse{Err: "message_not_found"}
}

func (f *fakeSlack) StartStream(ctx context.Context, s StreamStart) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(call{method: "startStream", thread: s.ThreadTS, text: s.Markdown, start: s}, f.startErr); err != nil {
		return "", err
	}
	ts := f.newTS()
	f.calls[len(f.calls)-1].ts = ts
	f.msgs = append(f.msgs, &fakeMsg{channel: s.Channel, thread: s.ThreadTS, ts: ts, text: s.Markdown, streaming: true})
	return ts, nil
}

func (f *fakeSlack) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := f.record(call{method: "appendStream", ts: ts, text: markdown}, f.appendErr); err != nil {
		return err
	}
	msg := f.find(ts)
	if msg == nil || !msg.streaming {
		return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
	}
	msg.text += markdown
	return nil
}

func (f *fakeSlack) StopStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := f.record(call{method: "stopStream", ts: ts, text: markdown, mark: mark, buttons: buttons}, f.stopErr); err != nil {
		return err
	}
	msg := f.find(ts)
	if msg == nil || !msg.streaming {
		return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
	}
	msg.text += markdown
	msg.mark = mark
	msg.streaming = false
	msg.buttons = buttons
	return nil
}

func (f *fakeSlack) AppendTasks(ctx context.Context, channel, ts string, tasks []Task) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record(call{method: "appendTasks", ts: ts, tasks: tasks}, nil)
}

func (f *fakeSlack) FinishStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []Button) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := f.record(call{method: "finishStream", ts: ts, text: markdown, mark: mark, buttons: buttons}, f.updateErr); err != nil {
		return err
	}
	msg := f.find(ts)
	if msg == nil {
		return slack.SlackErrorResponse{Err: "message_not_found"}
	}
	if msg.streaming {
		return slack.SlackErrorResponse{Err: "streaming_state_conflict"}
	}
	msg.text, msg.mark, msg.buttons = markdown, mark, buttons
	return nil
}

func (f *fakeSlack) Name(ctx context.Context, userID string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(call{method: "users.info", text: userID}, f.namesErr); err != nil {
		return "", err
	}
	if n, ok := f.names[userID]; ok {
		return n, nil
	}
	return "", slack.SlackErrorResponse{Err: "user_not_found"}
}

func (f *fakeSlack) UploadImage(ctx context.Context, u Upload) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record(call{method: "upload", upload: u}, f.uploadErr)
}

func (f *fakeSlack) Respond(ctx context.Context, responseURL, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return f.record(call{method: "respond", thread: responseURL, text: text}, nil)
}

// callsOf returns the recorded calls of a method.
func (f *fakeSlack) callsOf(method string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

// botMessages returns the bot's messages in a thread, oldest first.
func (f *fakeSlack) botMessages(thread string) []fakeMsg {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeMsg
	for _, m := range f.msgs {
		if m.thread == thread {
			out = append(out, *m)
		}
	}
	return out
}

// step is one scripted event of a fake model stream: wait, then yield a chunk or an error.
type step struct {
	wait  time.Duration
	chunk llm.Chunk
	err   error
	panic any // a stream reader meeting bytes it cannot take
}

// fakeChat streams scripted steps, sleeping (fake time under synctest) between them. A cancelled context
// ends the stream with an *llm.Error of KindCanceled, as llm.Client does.
type fakeChat struct {
	mu       sync.Mutex
	steps    []step
	requests []llm.ChatRequest
	ctxErr   error // context.Cause seen when the stream was cancelled
	yielded  int   // chunks the caller took
}

func (c *fakeChat) Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error] {
	c.mu.Lock()
	c.requests = append(c.requests, req)
	steps := c.steps
	c.mu.Unlock()
	return func(yield func(llm.Chunk, error) bool) {
		for _, s := range steps {
			if s.wait > 0 {
				t := time.NewTimer(s.wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					c.mu.Lock()
					c.ctxErr = context.Cause(ctx)
					c.mu.Unlock()
					yield(llm.Chunk{}, &llm.Error{Kind: llm.KindCanceled, Message: "request canceled", Err: ctx.Err()})
					return
				}
			}
			if s.err != nil {
				yield(llm.Chunk{}, s.err)
				return
			}
			if s.panic != nil {
				panic(s.panic)
			}
			c.mu.Lock()
			c.yielded++
			c.mu.Unlock()
			if !yield(s.chunk, nil) {
				return
			}
		}
	}
}

func (c *fakeChat) calls() []llm.ChatRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]llm.ChatRequest(nil), c.requests...)
}

// deltas scripts an answer: each word arrives every interval, then a "stop" finish.
func deltas(words []string, every time.Duration) []step {
	var steps []step
	for _, w := range words {
		steps = append(steps, step{wait: every, chunk: llm.Chunk{Content: w}})
	}
	return append(steps, step{chunk: llm.Chunk{FinishReason: "stop"}})
}

// words splits s into deltas of about n bytes.
func words(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func joined(ws []string) string { return strings.Join(ws, "") }

// fakeImager returns a scripted image or error after a wait.
type fakeImager struct {
	mu       sync.Mutex
	wait     time.Duration
	img      *llm.Image
	err      error
	requests []llm.ImageRequest
}

func (f *fakeImager) Image(ctx context.Context, req llm.ImageRequest) (*llm.Image, error) {
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	if f.wait > 0 {
		t := time.NewTimer(f.wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, &llm.Error{Kind: llm.KindTimeout, Message: "image request timed out", Err: ctx.Err()}
		}
	}
	return f.img, f.err
}

// helpers shared by the tests

func mention(text string) slack.Message {
	var m slack.Message
	m.User, m.Text, m.Timestamp = "U1", text, "1700000000.000001"
	return m
}

func testOptions() ReplyOptions {
	return ReplyOptions{BotUserID: "UBOT", BotID: "BBOT", BotName: "llmbot", TeamID: "T1", FollowUps: true, Rand: sameBytes(0x5a)}
}

func mustNoErr(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// timedOut is the error of a Slack call (method, as "chat.postMessage") that got no answer in time, as
// net/http's client gives it: it wraps context.DeadlineExceeded.
func timedOut(method string) error {
	return fmt.Errorf("Post \"https://slack.com/api/%s\": %w", method, context.DeadlineExceeded)
}

// nthTimesOut is a hook under which the nth call of its method (from 1) times out, as timedOut says
// of method, and every other goes through.
func nthTimesOut(nth int, method string) hook {
	return func(n int, _ call) error {
		if n == nth {
			return timedOut(method)
		}
		return nil
	}
}

func errTruncated() error { return &llm.Error{Kind: llm.KindTruncated, Message: "stream ended early"} }

// helpers shared by the tests of how an answer's last writes land: the final write, re-posts, lost
// posts, stream rescue and shutdown

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

// askAgain asks a second question in the test thread (all Slack hooks cleared) and returns the
// messages the model is sent for it.
func askAgain(t *testing.T, rt *replyTest) []llm.Message {
	t.Helper()
	fs := rt.slack
	fs.mu.Lock()
	fs.updateErr, fs.postErr, fs.startErr, fs.appendErr, fs.stopErr = nil, nil, nil, nil, nil
	var q2 slack.Message
	q2.User, q2.Text, q2.Timestamp, q2.ThreadTimestamp = "U1", "<@UBOT> and then?", "1700000000.900000", testTS
	key := testCh + "/" + testTS
	fs.threads[key] = append(fs.threads[key], q2)
	fs.mu.Unlock()
	rt.chat.mu.Lock()
	rt.chat.steps = deltas([]string{"ok"}, time.Millisecond)
	rt.chat.mu.Unlock()
	req2 := rt.req
	req2.TS, req2.Text = q2.Timestamp, q2.Text
	if err := rt.r.Reply(t.Context(), req2); err != nil {
		t.Logf("second reply: %v", err)
	}
	reqs := rt.chat.calls()
	return reqs[len(reqs)-1].Messages
}

func assistantMessages(msgs []llm.Message) []string {
	var out []string
	for _, m := range msgs {
		if m.Role == llm.RoleAssistant {
			out = append(out, m.Content)
		}
	}
	return out
}

// logCalls logs every Slack call since t0, its text cut short.
func logCalls(t *testing.T, fs *fakeSlack, t0 time.Time) {
	t.Helper()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for _, c := range fs.calls {
		t.Logf("+%v %s ts=%s text=%.50q err=%v", c.at.Sub(t0), c.method, c.ts, c.text, c.err)
	}
}

// slowStreaming is Replies on fs (messages written through msgs) whose chat.appendStream is slow for
// a minute from 2 s on: appends land but answer after 12 s (slowStreamer).
func slowStreaming(fs *fakeSlack, msgs Messenger, chat *fakeChat, opt ReplyOptions) *Replies {
	now := time.Now()
	return NewReplies(fs, msgs, slowStreamer{fs, now.Add(2 * time.Second), now.Add(62 * time.Second)}, fs, chat, nil, opt)
}

// slowStreamer is a Slack whose chat.appendStream, between from and to, carries out the append but
// answers only after 12 s: a caller that gives up sooner (writeCallTimeout, 10 s) gets its context's
// error although the text was appended.
type slowStreamer struct {
	*fakeSlack
	from, to time.Time
}

func (s slowStreamer) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	if err := s.fakeSlack.AppendStream(ctx, channel, ts, markdown); err != nil {
		return err
	}
	if now := time.Now(); !now.Before(s.from) && now.Before(s.to) {
		t := time.NewTimer(12 * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("Post \"https://slack.com/api/chat.appendStream\": %w", ctx.Err())
		}
	}
	return nil
}

// landedTimeoutPoster is a Slack whose n-th chat.postMessage posts the message but answers with
// net/http's timeout, as a slow Slack does.
type landedTimeoutPoster struct {
	*fakeSlack
	n     int
	posts *int
}

func (s landedTimeoutPoster) Post(ctx context.Context, channel, threadTS string, m Msg) (string, error) {
	ts, err := s.fakeSlack.Post(ctx, channel, threadTS, m)
	if *s.posts++; *s.posts == s.n && err == nil {
		return "", timedOut("chat.postMessage")
	}
	return ts, err
}

// sameBytes is a source of "randomness" that always gives the same byte: every request's fence
// boundary in the tests is testBoundary, so two requests can be compared.
type sameBytes byte

func (b sameBytes) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// testBoundary is the boundary testOptions' fences draw.
const testBoundary = "5a5a5a5a5a5a5a5a"

// fenced is text as a request fences data from source in the tests.
func fenced(source, text string) string {
	return "<<<" + testBoundary + " data from " + source + ">>>\n" + text + "\n<<<" + testBoundary + " end>>>"
}
