package followup

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/llmbot/llmbot/route"
)

const testCh = "C1"

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
	opt := Options{On: true, BotUserID: "UBOT", BotID: "BBOT", Marks: shared}
	answering, other := New(opt), New(opt)
	const thread = "1700000000.000002"
	other.threads.Put(testCh+"/"+thread, false)
	followUp := route.ReplyRequest{Channel: testCh, ChannelType: "channel", User: "U1", TS: "1700000000.000009",
		ThreadTS: thread, Text: "and then?", FollowUp: true}
	if run, _ := other.Triage(followUp); run {
		t.Fatal("a follow-up in a thread known to be none of the bot's runs")
	}
	answering.Joined(t.Context(), testCh, thread) // what Reply does when it answers there
	if run, _ := other.Triage(followUp); !run {
		t.Error("a follow-up in a thread another replica answers in does not run")
	}
}
