// Package gatewaytest is an in-memory Slack behind the gateway's interfaces, for the tests of the use
// cases: it records every call, keeps the bot's messages (so a thread read sees them, with their
// metadata), answers with the errors a test's hooks inject, and can hold chat.update to a token
// bucket of its own, as Slack's rate limits do. It speaks no wire protocol (internal/fakeslack does,
// for the tests of the adapter and of the whole bot); its fields are the test's to read and script,
// under Mu while calls may run.
package gatewaytest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
)

// Compile-time checks: the fake implements the gateway's interfaces.
var (
	_ gateway.Thread    = (*Slack)(nil)
	_ gateway.Messenger = (*Slack)(nil)
	_ gateway.Streamer  = (*Slack)(nil)
	_ gateway.Users     = (*Slack)(nil)
	_ gateway.Uploader  = (*Slack)(nil)
	_ gateway.Responder = (*Slack)(nil)
)

// Call is one recorded Slack call.
type Call struct {
	Method  string // "post", "update", "Ephemeral", "startStream", "appendStream", "stopStream", "replies", ...
	At      time.Time
	TS      string // message ts (the one created, for post/startStream)
	Thread  string
	Text    string
	Mark    convo.Mark
	Buttons []gateway.Button // nil: none sent (blocks untouched)
	User    string           // the recipient of an Ephemeral
	Err     error            // what the fake answered
	Start   gateway.StreamStart
	Upload  gateway.Upload
	Tasks   []gateway.Task // appendTasks
}

// Message is a message of the bot's that the fake holds.
type Message struct {
	Channel, Thread, TS string
	Text                string
	Mark                convo.Mark
	Streaming           bool
	Buttons             []gateway.Button // shown under the text
}

// Slack is an in-memory Slack: it records every call, keeps the bot's messages (so a thread read
// sees them, with their metadata) and answers with injected errors when a hook returns one. Build
// it with NewSlack.
type Slack struct {
	Mu       sync.Mutex // guards every field below
	Calls    []Call
	Threads  map[string][]slack.Message // channel/thread_ts -> messages other people wrote
	TopLevel map[string][]slack.Message // channel -> top-level messages
	Msgs     []*Message
	Names    map[string]string
	NextTS   int

	// Hooks: n is the 1-based count of calls of that method so far, c the call. A non-nil error is
	// returned instead of performing the call.
	PostErr    Hook
	UpdateErr  Hook
	RepliesErr Hook
	LeftOut    int  // what Replies says its read left out of the thread
	NamesErr   Hook // users.info
	StartErr   Hook
	AppendErr  Hook
	StopErr    Hook
	UploadErr  Hook
	DeleteErr  Hook
	EphErr     Hook

	// Limit, when set, is a workspace token bucket for chat.update: calls beyond it get a 429 with
	// Retry-After, as Slack does.
	Limit *Limiter
}

// Limiter is the fake's own token bucket (independent of package pace): Tokens left, and how
// many calls it Throttled.
type Limiter struct {
	perSec, burst, Tokens float64
	last                  time.Time
	Throttled             int
}

// NewLimiter returns a full bucket of burst tokens refilled at perMinute.
func NewLimiter(perMinute, burst float64) *Limiter {
	return &Limiter{perSec: perMinute / 60, burst: burst, Tokens: burst, last: time.Now()}
}

// Allow takes a token, or returns how long until one is there.
func (l *Limiter) Allow() (bool, time.Duration) {
	now := time.Now()
	l.Tokens = min(l.burst, l.Tokens+now.Sub(l.last).Seconds()*l.perSec)
	l.last = now
	if l.Tokens >= 1 {
		l.Tokens--
		return true, 0
	}
	l.Throttled++
	return false, time.Duration((1 - l.Tokens) / l.perSec * float64(time.Second))
}

// NewSlack returns an empty Slack that knows the names of U1 (Alice) and U2 (Bob).
func NewSlack() *Slack {
	return &Slack{Threads: map[string][]slack.Message{}, TopLevel: map[string][]slack.Message{},
		Names: map[string]string{"U1": "Alice", "U2": "Bob"}, NextTS: 100}
}

// Count returns how many calls of method were made; it takes no lock (hold Mu while calls may run).
func (f *Slack) Count(method string) int {
	n := 0
	for _, c := range f.Calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

// Hook decides the answer of the n-th call of a method: nil performs it.
type Hook func(n int, c Call) error

func (f *Slack) record(c Call, h Hook) error {
	c.At = time.Now()
	n := f.Count(c.Method) + 1
	if h != nil {
		c.Err = h(n, c)
	}
	f.Calls = append(f.Calls, c)
	return c.Err
}

func (f *Slack) newTS() string {
	f.NextTS++
	return fmt.Sprintf("1700000000.%06d", f.NextTS)
}

func (f *Slack) find(ts string) *Message {
	for _, m := range f.Msgs {
		if m.TS == ts {
			return m
		}
	}
	return nil
}

func (f *Slack) Replies(ctx context.Context, channel, threadTS string) ([]slack.Message, int, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.record(Call{Method: "replies", Thread: threadTS}, f.RepliesErr); err != nil {
		return nil, 0, err
	}
	out := append([]slack.Message(nil), f.Threads[channel+"/"+threadTS]...)
	for _, m := range f.Msgs {
		if m.Channel == channel && m.Thread == threadTS {
			out = append(out, f.asMessage(m))
		}
	}
	return out, f.LeftOut, nil
}

func (f *Slack) History(ctx context.Context, channel string, limit int, latest string) ([]slack.Message, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.record(Call{Method: "history", TS: latest}, nil); err != nil {
		return nil, err
	}
	var out []slack.Message
	for _, m := range f.TopLevel[channel] {
		if latest == "" || !convo.TSBefore(latest, m.Timestamp) {
			out = append(out, m)
		}
	}
	for _, m := range f.Msgs {
		if m.Channel == channel && m.Thread == "" && (latest == "" || !convo.TSBefore(latest, m.TS)) {
			out = append(out, f.asMessage(m))
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

func (f *Slack) asMessage(m *Message) slack.Message {
	var sm slack.Message
	sm.User, sm.BotID, sm.Text, sm.Timestamp, sm.ThreadTimestamp = "UBOT", "BBOT", m.Text, m.TS, m.Thread
	sm.Metadata = m.Mark.Metadata()
	return sm
}

func (f *Slack) Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (string, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	c := Call{Method: "post", Thread: threadTS, Text: m.Text, Mark: m.Mark, Buttons: m.Buttons}
	if err := f.record(c, f.PostErr); err != nil {
		return "", err
	}
	ts := f.newTS()
	f.Calls[len(f.Calls)-1].TS = ts
	f.Msgs = append(f.Msgs, &Message{Channel: channel, Thread: threadTS, TS: ts, Text: m.Text, Mark: m.Mark, Buttons: m.Buttons})
	return ts, nil
}

func (f *Slack) Update(ctx context.Context, channel, ts string, m gateway.Msg) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if f.Limit != nil {
		if ok, wait := f.Limit.Allow(); !ok {
			secs := time.Duration(math.Ceil(wait.Seconds())) * time.Second // Slack sends whole seconds
			err := &slack.RateLimitedError{RetryAfter: secs}
			f.record(Call{Method: "update", TS: ts, Text: m.Text, Mark: m.Mark, Buttons: m.Buttons}, func(int, Call) error { return err })
			return err
		}
	}
	if err := f.record(Call{Method: "update", TS: ts, Text: m.Text, Mark: m.Mark, Buttons: m.Buttons}, f.UpdateErr); err != nil {
		return err
	}
	msg := f.find(ts)
	if msg == nil {
		return slack.SlackErrorResponse{Err: "message_not_found"}
	}
	if utf8.RuneCountInString(m.Text) > 4000 { // Slack counts characters, not bytes
		return slack.SlackErrorResponse{Err: "msg_too_long"}
	}
	msg.Text, msg.Mark = m.Text, m.Mark
	if m.Buttons != nil {
		msg.Buttons = m.Buttons
	}
	return nil
}

func (f *Slack) Ephemeral(ctx context.Context, channel, user, threadTS, text string) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return f.record(Call{Method: "ephemeral", Thread: threadTS, Text: text, User: user}, f.EphErr)
}

func (f *Slack) Delete(ctx context.Context, channel, ts string) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := f.record(Call{Method: "delete", TS: ts}, f.DeleteErr); err != nil {
		return err
	}
	for i, m := range f.Msgs {
		if m.Channel == channel && m.TS == ts {
			f.Msgs = append(f.Msgs[:i], f.Msgs[i+1:]...)
			return nil
		}
	}
	return slack.SlackErrorResponse{Err: "message_not_found"}
}

func (f *Slack) StartStream(ctx context.Context, s gateway.StreamStart) (string, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.record(Call{Method: "startStream", Thread: s.ThreadTS, Text: s.Markdown, Start: s}, f.StartErr); err != nil {
		return "", err
	}
	ts := f.newTS()
	f.Calls[len(f.Calls)-1].TS = ts
	f.Msgs = append(f.Msgs, &Message{Channel: s.Channel, Thread: s.ThreadTS, TS: ts, Text: s.Markdown, Streaming: true})
	return ts, nil
}

func (f *Slack) AppendStream(ctx context.Context, channel, ts, markdown string) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := f.record(Call{Method: "appendStream", TS: ts, Text: markdown}, f.AppendErr); err != nil {
		return err
	}
	msg := f.find(ts)
	if msg == nil || !msg.Streaming {
		return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
	}
	msg.Text += markdown
	return nil
}

func (f *Slack) StopStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []gateway.Button) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := f.record(Call{Method: "stopStream", TS: ts, Text: markdown, Mark: mark, Buttons: buttons}, f.StopErr); err != nil {
		return err
	}
	msg := f.find(ts)
	if msg == nil || !msg.Streaming {
		return slack.SlackErrorResponse{Err: "message_not_in_streaming_state"}
	}
	msg.Text += markdown
	msg.Mark = mark
	msg.Streaming = false
	msg.Buttons = buttons
	return nil
}

func (f *Slack) AppendTasks(ctx context.Context, channel, ts string, tasks []gateway.Task) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.record(Call{Method: "appendTasks", TS: ts, Tasks: tasks}, nil)
}

func (f *Slack) FinishStream(ctx context.Context, channel, ts, markdown string, mark convo.Mark, buttons []gateway.Button) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := f.record(Call{Method: "finishStream", TS: ts, Text: markdown, Mark: mark, Buttons: buttons}, f.UpdateErr); err != nil {
		return err
	}
	msg := f.find(ts)
	if msg == nil {
		return slack.SlackErrorResponse{Err: "message_not_found"}
	}
	if msg.Streaming {
		return slack.SlackErrorResponse{Err: "streaming_state_conflict"}
	}
	msg.Text, msg.Mark, msg.Buttons = markdown, mark, buttons
	return nil
}

func (f *Slack) Name(ctx context.Context, userID string) (string, error) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if err := f.record(Call{Method: "users.info", Text: userID}, f.NamesErr); err != nil {
		return "", err
	}
	if n, ok := f.Names[userID]; ok {
		return n, nil
	}
	return "", slack.SlackErrorResponse{Err: "user_not_found"}
}

func (f *Slack) UploadImage(ctx context.Context, u gateway.Upload) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	return f.record(Call{Method: "upload", Upload: u}, f.UploadErr)
}

func (f *Slack) Respond(ctx context.Context, responseURL, text string) error {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return f.record(Call{Method: "respond", Thread: responseURL, Text: text}, nil)
}

// CallsOf returns the recorded calls of a method.
func (f *Slack) CallsOf(method string) []Call {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []Call
	for _, c := range f.Calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// BotMessages returns the bot's messages in a thread, oldest first.
func (f *Slack) BotMessages(thread string) []Message {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out []Message
	for _, m := range f.Msgs {
		if m.Thread == thread {
			out = append(out, *m)
		}
	}
	return out
}
