package fakeslack_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// BenchmarkChatUpdate measures the fake's cost per chat.update made by slack-go (the load
// benchmark's most frequent call), with one message per goroutine.
func BenchmarkChatUpdate(b *testing.B) {
	srv := fakeslack.New(fakeslack.Config{})
	defer srv.Close()
	api := slack.New("xoxb-test", slack.OptionAPIURL(srv.URL()))
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("start", false))
		if err != nil {
			b.Error(err)
			return
		}
		i := 0
		for pb.Next() {
			i++
			if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("text "+strconv.Itoa(i), false)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkEnvelopeAck measures queueing an event, delivering it over the WebSocket to
// slack-go's socketmode client and reading its ack.
func BenchmarkEnvelopeAck(b *testing.B) {
	srv := fakeslack.New(fakeslack.Config{Subscriptions: []string{"message.im"}})
	defer srv.Close()
	sm := startSM(b, srv)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		srv.PostUserMessage("D1", "U1", "", "hello")
		evt := <-sm.Events
		for evt.Request == nil || evt.Request.EnvelopeID == "" {
			evt = <-sm.Events
		}
		if err := sm.AckCtx(ctx, evt.Request.EnvelopeID, nil); err != nil {
			b.Fatal(err)
		}
		if err := srv.WaitFor(ctx, func() bool { return len(srv.AcksSince(i)) > 0 }); err != nil {
			b.Fatal(err)
		}
	}
}
