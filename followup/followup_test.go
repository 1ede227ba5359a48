package followup

import (
	"testing"

	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

const testCh = "C1"

// TestFollowUpInAThreadAnotherReplicaAnswered: a replica that remembers a thread as none of the
// bot's runs a follow-up there once another replica has answered in it (the shared marks).
func TestFollowUpInAThreadAnotherReplicaAnswered(t *testing.T) {
	mem, err := state.NewMemory("r1", "", nil) // the replicas' marks, as the state package keeps them
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{On: true, BotUserID: "UBOT", BotID: "BBOT", Marks: mem.Keys()}
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
