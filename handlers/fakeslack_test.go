package handlers

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
)

// Compile-time checks: the fake implements the gateway's interfaces.
var (
	_ Thread    = (*fakeSlack)(nil)
	_ Messenger = (*fakeSlack)(nil)
	_ Streamer  = (*fakeSlack)(nil)
	_ Users     = (*fakeSlack)(nil)
	_ Uploader  = (*fakeSlack)(nil)
	_ Responder = (*fakeSlack)(nil)
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
