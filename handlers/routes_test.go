package handlers

import (
	"testing"

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
			rt.r.followUps.Joined(t.Context(), testCh, bots)
			if _, _, _, err := rt.r.followUps.Read(t.Context(), rt.r.reads, testCh, others); err != nil {
				t.Fatal(err) // the fake's thread is empty: none of the bot's
			}
			req := tc.req
			if got := rt.r.Handler().Accept(&route.Request{Kind: route.Message, Reply: &req}); got != tc.want {
				t.Errorf("Accept = %+v, want %+v", got, tc.want)
			}
		})
	}
}
