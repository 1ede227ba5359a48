package threads

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/llmbot/llmbot/state"
)

const (
	botUser = "UBOT"
	channel = "C1"
	dm      = "D1"
	parent  = "1700000000.000100"
)

// slackThread is a thread as the fake read of these tests returns it, counting its reads.
type slackThread struct {
	msgs  []slack.Message
	left  int
	reads int
	// during runs inside a read, after Slack answered: what happens while the read is on its way.
	during func()
}

func (s *slackThread) read(context.Context) ([]slack.Message, int, error) {
	s.reads++
	out := append([]slack.Message(nil), s.msgs...)
	if s.during != nil {
		s.during()
	}
	return out, s.left, nil
}

func (s *slackThread) history(ctx context.Context) ([]slack.Message, error) {
	m, _, err := s.read(ctx)
	return m, err
}

func message(ts, thread, user, text string) slack.Message {
	return slack.Message{Msg: slack.Msg{Type: "message", Channel: channel, User: user, Text: text, Timestamp: ts, ThreadTimestamp: thread}}
}

func newTestCache(t *testing.T) (*Cache, map[string]int) {
	t.Helper()
	store, err := state.NewMemoryThreads(state.ThreadLimits{TTL: time.Hour, Bytes: 1 << 20, Entries: 100})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	return New(Options{Store: store, BotUserID: botUser, BotID: "BBOT", Key: []byte("test key"), Hooks: Hooks{
		Hit:  func(kind string) { counts["hit "+kind]++ },
		Miss: func(kind, reason string) { counts["miss "+kind+" "+reason]++ },
	}}), counts
}

// texts is a thread's messages as "ts:text[mark kind]".
func texts(msgs []slack.Message) string {
	var parts []string
	for _, m := range msgs {
		s := m.Timestamp[len(m.Timestamp)-3:] + ":" + m.Text
		if m.Metadata.EventType != "" {
			s += fmt.Sprintf("[%v]", m.Metadata.EventPayload["kind"])
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func replies(t *testing.T, c *Cache, s *slackThread) string {
	t.Helper()
	msgs, _, err := c.Replies(t.Context(), channel, parent, s.read)
	if err != nil {
		t.Fatal(err)
	}
	return texts(msgs)
}

func event(sub string, m slack.Message) *slackevents.MessageEvent {
	ev := &slackevents.MessageEvent{Channel: m.Channel, SubType: sub, TimeStamp: m.Timestamp, ThreadTimeStamp: m.ThreadTimestamp}
	msg := m.Msg
	ev.Message = &msg
	return ev
}

func deleted(ts, thread string) *slackevents.MessageEvent {
	return &slackevents.MessageEvent{Channel: channel, SubType: "message_deleted", DeletedTimeStamp: ts,
		PreviousMessage: &slack.Msg{Timestamp: ts, ThreadTimestamp: thread}}
}

func mark(kind string) slack.SlackMetadata {
	return slack.SlackMetadata{EventType: "llmbot_message", EventPayload: map[string]any{"kind": kind}}
}

func TestRepliesReadOnceThenFromEvents(t *testing.T) {
	c, counts := newTestCache(t)
	ctx := t.Context()
	s := &slackThread{msgs: []slack.Message{message(parent, parent, "U1", "question")}}
	if got, want := replies(t, c, s), "100:question"; got != want {
		t.Fatalf("first read %q, want %q", got, want)
	}
	// The bot answers, a person follows up, edits the question and deletes nothing yet.
	c.Posted(ctx, channel, parent, "1700000000.000200", "_Thinking…_", slack.SlackMetadata{})
	c.Updated(ctx, channel, "1700000000.000200", "the answer", mark("answer"))
	c.Message(ctx, event("", message("1700000000.000300", parent, "U1", "follow-up")))
	c.Message(ctx, event("message_changed", message(parent, parent, "U1", "question, edited")))
	// The bot's own message as its event shows it: no mark, which must not take the write's away.
	own := message("1700000000.000200", parent, botUser, "the answer")
	c.Message(ctx, event("message_changed", own))
	want := "100:question, edited 200:the answer[answer] 300:follow-up"
	if got := replies(t, c, s); got != want {
		t.Fatalf("from the cache %q, want %q", got, want)
	}
	c.Message(ctx, deleted("1700000000.000300", parent))
	if got, want := replies(t, c, s), "100:question, edited 200:the answer[answer]"; got != want {
		t.Fatalf("after a deletion %q, want %q", got, want)
	}
	if s.reads != 1 {
		t.Fatalf("%d reads of Slack, want 1", s.reads)
	}
	if counts["hit replies"] != 2 || counts["miss replies absent"] != 1 {
		t.Fatalf("hooks counted %v", counts)
	}
}

func TestGapMakesEntriesStale(t *testing.T) {
	c, counts := newTestCache(t)
	s := &slackThread{msgs: []slack.Message{message(parent, parent, "U1", "question")}}
	replies(t, c, s)
	if err := c.Gap(t.Context()); err != nil {
		t.Fatal(err)
	}
	// An edit made while the connection was down reached nobody: only a read shows it.
	s.msgs[0].Text = "edited while away"
	if got := replies(t, c, s); got != "100:edited while away" || s.reads != 2 {
		t.Fatalf("after a gap %q with %d reads; want the edit read again", got, s.reads)
	}
	if counts["miss replies stale"] != 1 {
		t.Fatalf("hooks counted %v", counts)
	}
	replies(t, c, s)
	if s.reads != 2 {
		t.Fatalf("%d reads after the entry was read again, want 2", s.reads)
	}
}

// TestChangeDuringReadWins: an edit whose event comes while the read is on its way is held, though
// the read shows the message as it was.
func TestChangeDuringReadWins(t *testing.T) {
	c, _ := newTestCache(t)
	ctx := t.Context()
	s := &slackThread{msgs: []slack.Message{message(parent, parent, "U1", "question"), message("1700000000.000200", parent, "U2", "before")}}
	s.during = func() {
		c.Message(ctx, event("message_changed", message("1700000000.000200", parent, "U2", "after")))
		c.Message(ctx, event("", message("1700000000.000300", parent, "U1", "new")))
	}
	replies(t, c, s)
	s.during = nil
	if got, want := replies(t, c, s), "100:question 200:after 300:new"; got != want || s.reads != 1 {
		t.Fatalf("%q after %d reads, want %q after 1", got, s.reads, want)
	}
}

func TestThreadNotHeldIsLeftAlone(t *testing.T) {
	c, _ := newTestCache(t)
	ctx := t.Context()
	c.Message(ctx, event("", message("1700000000.000300", parent, "U1", "follow-up")))
	c.Posted(ctx, channel, parent, "1700000000.000200", "answer", mark("answer"))
	s := &slackThread{msgs: []slack.Message{message(parent, parent, "U1", "question")}}
	if got := replies(t, c, s); got != "100:question" || s.reads != 1 {
		t.Fatalf("%q after %d reads; want Slack's thread, read once", got, s.reads)
	}
}

// TestNewThreadNeedsNoRead: a top-level mention, and a top-level DM message (in the agent pane each
// starts a thread), are whole threads from their events; the event delivered again (another replica
// that got Slack's retry) leaves the thread as it is.
func TestNewThreadNeedsNoRead(t *testing.T) {
	c, _ := newTestCache(t)
	ctx := t.Context()
	mention := &slackevents.AppMentionEvent{Channel: channel, User: "U1", Text: "<@UBOT> hi", TimeStamp: parent}
	c.Mention(ctx, mention)
	c.Posted(ctx, channel, parent, "1700000000.000200", "hello", mark("answer"))
	c.Mention(ctx, mention)
	s := &slackThread{}
	if got, want := replies(t, c, s), "100:<@UBOT> hi 200:hello[answer]"; got != want || s.reads != 0 {
		t.Fatalf("%q after %d reads, want %q after none", got, s.reads, want)
	}
	dmMsg := message(parent, "", "U1", "question")
	dmMsg.Channel = dm
	c.Message(ctx, event("", dmMsg))
	msgs, _, err := c.Replies(ctx, dm, parent, s.read)
	if err != nil || texts(msgs) != "100:question" || s.reads != 0 {
		t.Fatalf("DM thread %q, %v after %d reads; want the question, no read", texts(msgs), err, s.reads)
	}
	// A reply in a thread starts none, and neither does the bot's own message.
	c.Message(ctx, event("", message("1700000000.000500", "1700000000.000400", "U1", "a reply")))
	own := message("1700000000.000600", "", botUser, "own")
	own.Channel = dm
	c.Message(ctx, event("", own))
	for _, th := range []struct{ channel, ts string }{{channel, "1700000000.000400"}, {channel, "1700000000.000500"}, {dm, "1700000000.000600"}} {
		before := s.reads
		if _, _, err := c.Replies(ctx, th.channel, th.ts, s.read); err != nil || s.reads != before+1 {
			t.Fatalf("thread %s/%s: %v, %d reads; want one read (no entry)", th.channel, th.ts, err, s.reads-before)
		}
	}
}

func TestDMHistory(t *testing.T) {
	c, counts := newTestCache(t)
	ctx := t.Context()
	dmMsg := func(ts, thread, user, text string) slack.Message {
		m := message(ts, thread, user, text)
		m.Channel = dm
		return m
	}
	s := &slackThread{msgs: []slack.Message{dmMsg("1700000000.000100", "", "U1", "one"), dmMsg("1700000000.000200", "", botUser, "two")}}
	history := func() string {
		msgs, err := c.History(ctx, dm, 2, s.history)
		if err != nil {
			t.Fatal(err)
		}
		return texts(msgs)
	}
	history()
	c.Message(ctx, event("", dmMsg("1700000000.000300", "", "U1", "three")))
	// A reply in a thread of the DM is no top-level message.
	c.Message(ctx, event("", dmMsg("1700000000.000400", "1700000000.000100", "U1", "in a thread")))
	if got, want := history(), "200:two 300:three"; got != want || s.reads != 1 {
		t.Fatalf("%q after %d reads, want %q after 1", got, s.reads, want)
	}
	// A channel's history is never cached.
	if _, err := c.History(ctx, channel, 2, s.history); err != nil || s.reads != 2 {
		t.Fatalf("channel history: %v, %d reads; want read", err, s.reads)
	}
	if counts["hit history"] != 1 {
		t.Fatalf("hooks counted %v", counts)
	}
}

func TestNilCacheReads(t *testing.T) {
	var c *Cache
	ctx := t.Context()
	s := &slackThread{msgs: []slack.Message{message(parent, parent, "U1", "question")}}
	c.Message(ctx, event("", message("1700000000.000300", parent, "U1", "follow-up")))
	c.Posted(ctx, channel, parent, "1700000000.000200", "answer", mark("answer"))
	for range 2 {
		if got := replies(t, c, s); got != "100:question" {
			t.Fatalf("nil cache: %q", got)
		}
	}
	if s.reads != 2 {
		t.Fatalf("nil cache: %d reads, want 2", s.reads)
	}
}

// forger is a store whose entries someone else wrote to (a Redis writer without the bot's key):
// change is applied to every entry loaded.
type forger struct {
	Store
	change func(*state.ThreadEntry)
}

func (f forger) Load(ctx context.Context, key string) (state.ThreadEntry, bool, error) {
	e, ok, err := f.Store.Load(ctx, key)
	if ok && f.change != nil {
		f.change(&e)
	}
	return e, ok, err
}

// TestForgedEntriesAreRead: a message or mark the bot did not sign, or signed for another message or
// thread, is never taken for the thread: the thread is read from Slack.
func TestForgedEntriesAreRead(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*state.ThreadEntry)
	}{
		{"a body changed", func(e *state.ThreadEntry) { e.Messages[0].Body[len(e.Messages[0].Body)-2] ^= 1 }},
		{"a body unsigned", func(e *state.ThreadEntry) { e.Messages[0].Body = []byte(`{"text":"forged","ts":"1700000000.000100"}`) }},
		{"a mark added", func(e *state.ThreadEntry) {
			e.Messages[0].Mark = []byte(`{"event_type":"llmbot_message","event_payload":{"kind":"answer"}}`)
		}},
		{"a message moved to another ts", func(e *state.ThreadEntry) { e.Messages[1].Body = e.Messages[0].Body }},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, err := state.NewMemoryThreads(state.ThreadLimits{TTL: time.Hour, Bytes: 1 << 20, Entries: 100})
			if err != nil {
				t.Fatal(err)
			}
			f := &forger{Store: store}
			cache := New(Options{Store: f, BotUserID: botUser, Key: []byte("test key")})
			s := &slackThread{msgs: []slack.Message{message(parent, parent, "U1", "question"), message("1700000000.000200", parent, "U2", "reply")}}
			replies(t, cache, s)
			replies(t, cache, s)
			if s.reads != 1 {
				t.Fatalf("%d reads before the forgery, want 1", s.reads)
			}
			f.change = c.change
			if got := replies(t, cache, s); got != "100:question 200:reply" || s.reads != 2 {
				t.Fatalf("a forged entry: %q after %d reads; want Slack's thread, read again", got, s.reads)
			}
		})
	}
}
