package bot

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slacksocket"
)

// mentionFrame is an app_mention envelope of message ts in channel C1 as the socket hands it to
// the loop, not acked (the loop acks it). read is now.
func mentionFrame(t *testing.T, envelopeID, ts string) slacksocket.Frame {
	t.Helper()
	env := fmt.Sprintf(`{"envelope_id":%q,"type":"events_api","payload":{"team_id":"T1","type":"event_callback","event_id":"Ev%s","event_time":1,`+
		`"event":{"type":"app_mention","user":"U1","text":"<@UBOT> hi","ts":%q,"channel":"C1","event_ts":%q}}}`, envelopeID, envelopeID, ts, ts)
	if _, err := parseEnvelope([]byte(env)); err != nil {
		t.Fatal(err)
	}
	return slacksocket.Frame{Data: []byte(env), EnvelopeID: envelopeID, Type: "events_api", Read: time.Now()}
}

// injected stands between the loop and the socket: the loop reads the frames a test sends on in,
// not the socket's; acks and the rest go to the socket.
type injected struct {
	socket
	in chan slacksocket.Frame
}

func (s injected) Frames() <-chan slacksocket.Frame { return s.in }

// injectFrames makes the bot made with opt read its frames from the channel returned.
func injectFrames(opt *Options) chan<- slacksocket.Frame {
	in := make(chan slacksocket.Frame, 1024) // as large as the socket's queue: a whole burst waits in it
	opt.wrapSocket = func(s socket) socket { return injected{s, in} }
	return in
}

// orderLog records acks and reply starts in the order they happen.
type orderLog struct {
	mu     sync.Mutex
	events []string
}

func (o *orderLog) add(s string) {
	o.mu.Lock()
	o.events = append(o.events, s)
	o.mu.Unlock()
}

func (o *orderLog) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.events...)
}

// A burst of envelopes is acked before any of its answers starts: the answers' work (HTTP
// connections, Slack and model calls) would otherwise compete with the acks still to come. The
// hold's upper bound is raised to a minute here, so that a slow machine (30 acks under -race
// with other tests running) cannot reach it: the order is what is tested, not the bound.
func TestBurstAckedBeforeItsWorkStarts(t *testing.T) {
	const n = 30 // within the queue (injectFrames), so the whole burst waits there at once
	fs := newFakeSlack(t, fakeslack.Config{})
	var log orderLog
	pushed := make(chan struct{})
	var once sync.Once
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		log.add("reply " + req.TS)
		return nil
	}}
	opt := Options{burstHold: time.Minute, Hooks: Hooks{Acked: func(string, time.Duration) {
		log.add("ack")
		once.Do(func() { <-pushed }) // the loop waits in the first ack until the burst is queued
	}}}
	in := injectFrames(&opt)
	h := startBot(t, fs, r, nil, opt)

	for i := range n {
		in <- mentionFrame(t, fmt.Sprintf("burst%d", i), fmt.Sprintf("100.%06d", i))
	}
	close(pushed)
	h.waitFor(t, "every answer started", func() bool { return len(r.requests()) == n })

	got := log.get()
	acks := 0
	for i, e := range got {
		if e != "ack" {
			if acks != n {
				t.Fatalf("answer started after %d of %d acks (event %d of %v)", acks, n, i, got)
			}
			continue
		}
		acks++
	}
	if acks != n {
		t.Fatalf("%d acks, want %d", acks, n)
	}
}

// Envelopes that keep coming hold nothing back for long: work waits at most burstHold, not
// until the stream of envelopes pauses.
func TestLongBurstStartsWorkWithinTheHold(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	started := make(chan string, 1)
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		select {
		case started <- req.TS:
		default:
		}
		return nil
	}}
	opt := Options{}
	in := injectFrames(&opt)
	startBot(t, fs, r, nil, opt)

	// One envelope a millisecond (under burstGap apart) for up to waitTimeout: the first answer
	// must start while they still come.
	deadline := time.Now().Add(waitTimeout)
	for i := 0; ; i++ {
		select {
		case ts := <-started:
			if i < 2 {
				t.Logf("first answer (%s) started after %d envelopes", ts, i)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer started during %d envelopes sent 1 ms apart for %v", i, waitTimeout)
		}
		in <- mentionFrame(t, fmt.Sprintf("long%d", i), fmt.Sprintf("200.%06d", i))
		time.Sleep(time.Millisecond)
	}
}
