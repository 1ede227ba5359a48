package handlers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llmbot/llmbot/route"
)

// Thread messages without a mention that cannot be for the bot never run (they would take a place
// in the bot's queue only to be ignored); one in a thread the bot is known to take part in is told
// when it cannot run, any other is quiet.
func TestReplyHandlerTriage(t *testing.T) {
	followUp := func(thread, text string) route.ReplyRequest {
		return route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", TS: "1700000000.000009",
			ThreadTS: thread, Text: text, FollowUp: true}
	}
	const bots, others, unknown = "1700000000.000001", "1700000000.000002", "1700000000.000003"
	for _, tc := range []struct {
		name string
		req  route.ReplyRequest
		want route.Decision
	}{
		{"a mention", route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", TS: bots, ThreadTS: bots, Text: "<@UBOT> hi"},
			route.Decision{Run: true}},
		{"a follow-up in the bot's thread", followUp(bots, "and then?"), route.Decision{Run: true}},
		{"a follow-up in a thread not yet known", followUp(unknown, "and then?"), route.Decision{Run: true, Quiet: true}},
		{"a follow-up in a thread known to be none of the bot's", followUp(others, "and then?"), route.Decision{Quiet: true}},
		{"thanks in the bot's thread", followUp(bots, "thanks!"), route.Decision{Quiet: true}},
		{"addressed to someone else", followUp(bots, "<@U2> what do you think?"), route.Decision{Quiet: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := newReplyTest(t, nil, testOptions())
			rt.r.botThreads.Put(testCh+"/"+bots, true)
			rt.r.botThreads.Put(testCh+"/"+others, false)
			req := tc.req
			if got := rt.r.Handler().Accept(&route.Request{Kind: route.Message, Reply: &req}); got != tc.want {
				t.Errorf("Accept = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// marks is a hand-written set of shared flags (the state package's marks in Redis).
type marks struct {
	mu  sync.Mutex
	set map[string]bool
}

func (m *marks) Mark(_ context.Context, key string, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set[key] = true
	return nil
}

func (m *marks) Marked(_ context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.set[key], nil
}

// TestFollowUpInAThreadAnotherReplicaAnswered: a replica that remembers a thread as none of the
// bot's runs a follow-up there once another replica has answered in it (the shared marks).
func TestFollowUpInAThreadAnotherReplicaAnswered(t *testing.T) {
	shared := &marks{set: map[string]bool{}}
	opt := testOptions()
	opt.Threads = shared
	answering, other := newReplyTest(t, nil, opt), newReplyTest(t, nil, opt)
	const thread = "1700000000.000002"
	other.r.botThreads.Put(testCh+"/"+thread, false)
	followUp := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", TS: "1700000000.000009",
		ThreadTS: thread, Text: "and then?", FollowUp: true}
	if d := other.r.Handler().Accept(&route.Request{Kind: route.Message, Reply: &followUp}); d.Run {
		t.Fatal("a follow-up in a thread known to be none of the bot's runs")
	}
	answering.r.joined(t.Context(), testCh+"/"+thread) // what Reply does when it answers there
	if d := other.r.Handler().Accept(&route.Request{Kind: route.Message, Reply: &followUp}); !d.Run {
		t.Error("a follow-up in a thread another replica answers in does not run")
	}
}
