package slacksocket

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// A hello from another app than the bot token's ends Run with an error that says so: no
// reconnect fixes tokens taken from two apps. The bot token's own app connects as usual.
func TestHelloOfAnotherAppEndsRun(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{AppID: "A1"})
	c := New(slackAPI(fs), zaptest.NewLogger(t), Options{AppID: "A2"})
	errc := make(chan error, 1)
	go func() { errc <- c.Run(t.Context()) }()
	err := waitChan(t, "Run to return", errc)
	if !errors.As(err, new(errWrongApp)) {
		t.Fatalf("Run: %v, want the tokens' apps named", err)
	}
	if n := fs.CallCount("apps.connections.open"); n != 1 {
		t.Errorf("apps.connections.open called %d times, want once", n)
	}

	a := startApp(t, fs, nil, Options{AppID: "A1"})
	fs.PostUserMessage("D1", "U1", "", "hello")
	eventually(t, "the message read", func() bool { return len(a.received()) == 1 })
}

// A frame that is not a JSON object is skipped; the frames after it are read and acked.
func TestFrameNotAnObjectIsSkipped(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	a := startApp(t, fs, nil, Options{})
	fs.SendRaw([]byte(`not json`))
	fs.PostUserMessage("D1", "U1", "", "hello")
	eventually(t, "the message read and acked", func() bool { return len(a.received()) == 1 && len(fs.Acks()) == 1 })
	if f := a.received()[0]; f.Type != "events_api" || !f.Acked {
		t.Errorf("frame %+v, want the message, acked", f)
	}
}

// A consumer that falls behind by more than the frames queue holds the reader back: the frame
// that does not fit is neither handed over nor acked until the consumer takes one (Slack sends it
// again if the bot goes down meanwhile), and at shutdown it is left unacked.
func TestConsumerBehindHoldsTheReader(t *testing.T) {
	t.Parallel()
	fs := newFakeSlack(t, fakeslack.Config{})
	c := New(slackAPI(fs), zaptest.NewLogger(t), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	defer c.Close()
	eventually(t, "connected", func() bool { return fs.Connections().Current == 1 })

	for i := range framesQueue + 2 {
		fs.SendRaw(fmt.Appendf(nil, `{"envelope_id":"e%d","type":"events_api","payload":{}}`, i))
	}
	eventually(t, "the queue full and acked", func() bool { return len(fs.Acks()) == framesQueue })
	time.Sleep(100 * time.Millisecond)
	if n := len(fs.Acks()); n != framesQueue {
		t.Fatalf("%d acks while the queue is full, want %d: frames the consumer has not taken were acked", n, framesQueue)
	}
	if f := waitChan(t, "a frame", c.Frames()); f.EnvelopeID != "e0" {
		t.Errorf("first frame %q, want e0", f.EnvelopeID)
	}
	eventually(t, "the frame held back handed over and acked", func() bool { return len(fs.Acks()) == framesQueue+1 })

	cancel()
	if err := waitChan(t, "Run to return", errc); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want canceled", err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(fs.Acks()); n != framesQueue+1 {
		t.Errorf("%d acks after shutdown, want %d: the frame waiting for the consumer was acked", n, framesQueue+1)
	}
}
