package bot

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/imagine"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/waittest"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slacksocket"
)

// waitTimeout bounds every wait in these tests.
const waitTimeout = 10 * time.Second

// fakeReplier records the requests it gets and runs fn (nil: return nil at once). known says which
// follow-ups it knows to be for the bot (nil: none).
type fakeReplier struct {
	fn    func(ctx context.Context, req route.ReplyRequest) error
	known func(route.ReplyRequest) bool

	mu    sync.Mutex
	calls []route.ReplyRequest
}

// runsUntilCancelled is a Replier whose answers run until they are cancelled (a shutdown), each
// reporting report(request) on started as it starts (buffered for the two that may start).
func runsUntilCancelled(report func(route.ReplyRequest) string) (r *fakeReplier, started chan string) {
	started = make(chan string, 2)
	r = &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- report(req)
		<-ctx.Done()
		return context.Cause(ctx)
	}}
	return r, started
}

func (f *fakeReplier) Reply(ctx context.Context, req route.ReplyRequest) error {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	f.mu.Unlock()
	if f.fn == nil {
		return nil
	}
	return f.fn(ctx, req)
}

// triage is the fake's Replies.Triage: every message runs; a follow-up is quiet unless known.
func (f *fakeReplier) triage(req route.ReplyRequest) (run, quiet bool) {
	return true, req.FollowUp && (f.known == nil || !f.known(req))
}

func (f *fakeReplier) requests() []route.ReplyRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]route.ReplyRequest(nil), f.calls...)
}

// fakeImaginer accepts with text and records runs.
type fakeImaginer struct {
	text  string
	start bool
	run   func(ctx context.Context, req imagine.Request) error
}

func (f *fakeImaginer) Accept(imagine.Request) (string, bool) { return f.text, f.start }
func (f *fakeImaginer) Run(ctx context.Context, req imagine.Request) error {
	if f.run == nil {
		return nil
	}
	return f.run(ctx, req)
}

// harness is a Bot running against a fake Slack.
type harness struct {
	fs   *fakeslack.Server
	bot  *Bot
	api  *SlackAPI
	stop context.CancelFunc
	errc chan error
}

func newFakeSlack(t testing.TB, cfg fakeslack.Config) *fakeslack.Server {
	t.Helper()
	fs := fakeslack.New(cfg)
	t.Cleanup(fs.Close)
	return fs
}

func newClient(fs *fakeslack.Server) *slack.Client {
	return slack.New("xoxb-test", slack.OptionAPIURL(fs.URL()), slack.OptionAppLevelToken("xapp-test"))
}

// testRoutes is the wiring's table with fakes: messages and Regenerate answered by r, /imagine and
// "Another one" run by im (nil: no /imagine), more routes added by the caller.
func testRoutes(r *fakeReplier, im imagine.Jobs, more ...route.Route) *route.Table {
	routes := route.NewTable()
	add := []route.Route{
		{Kind: route.Message, Name: route.MessageRoute, Handler: handlers.ReplyHandler(r, r.triage)},
		{Kind: route.Action, Name: route.ActionRegenerate, Handler: handlers.RegenerateHandler(r)},
	}
	if im != nil {
		add = append(add,
			route.Route{Kind: route.Command, Name: "/imagine", Handler: imagine.JobsHandler(im)},
			route.Route{Kind: route.Action, Name: imagine.ActionImagineAgain, Feature: "imagine", Handler: imagine.JobsHandler(im)})
	}
	if err := routes.Add(append(add, more...)...); err != nil {
		panic(err)
	}
	return routes
}

// newBot is New with testRoutes and the Stop button's route.
func newBot(open slacksocket.Opener, id Identity, r *fakeReplier, im imagine.Jobs, notify Notifier, log *zap.Logger, opt Options, more ...route.Route) *Bot {
	routes := testRoutes(r, im, more...)
	b := New(open, id, routes, notify, log, opt)
	if err := routes.Add(route.Route{Kind: route.Action, Name: route.ActionStop, Handler: b.StopHandler()}); err != nil {
		panic(err)
	}
	return b
}

// startBot runs a Bot until the test ends (or h.shutdown), and waits for it to connect.
func startBot(t testing.TB, fs *fakeslack.Server, r *fakeReplier, im imagine.Jobs, opt Options, more ...route.Route) *harness {
	t.Helper()
	client := newClient(fs)
	api := NewSlackAPI(client, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	id, err := api.Identify(ctx)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	log := zap.NewNop() // benchmarks: no logging cost
	if _, ok := t.(*testing.T); ok {
		log = zaptest.NewLogger(t)
	}
	b := newBot(client, id, r, im, gateway.NewNotices(api, gateway.Budgets{}), log, opt, more...)
	runCtx, stop := context.WithCancel(context.Background())
	h := &harness{fs: fs, bot: b, api: api, stop: stop, errc: make(chan error, 1)}
	go func() { h.errc <- b.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		select {
		case <-h.errc:
		case <-time.After(waitTimeout + opt.Grace):
			t.Error("Run did not return after cancel")
		}
	})
	h.waitFor(t, "connected", func() bool { return b.State().Connected && fs.Connections().Current == 1 })
	return h
}

// shutdown cancels Run and returns its result.
func (h *harness) shutdown(t *testing.T) error {
	t.Helper()
	h.stop()
	select {
	case err := <-h.errc:
		h.errc <- err // for the cleanup
		return err
	case <-time.After(waitTimeout + h.bot.opt.Grace):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

func (h *harness) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	eventually(t, what, cond)
}

// eventually polls cond until it holds, failing the test after waitTimeout.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waittest.Eventually(t, waitTimeout, what, cond)
}

// waitChan waits for a value from c.
func waitChan[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	return waittest.Receive(t, waitTimeout, what, c)
}

// acked reports whether envelope id was acked.
func acked(fs *fakeslack.Server, id string) bool {
	for _, a := range fs.Acks() {
		if a.EnvelopeID == id {
			return true
		}
	}
	return false
}

func TestAcksDoNotWaitForWork(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	release := make(chan struct{})
	started := make(chan struct{}, 3) // one per mention below
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- struct{}{}
		<-release
		return nil
	}}
	h := startBot(t, fs, r, nil, Options{})
	defer close(release)

	for range 3 {
		fs.PostUserMessage("C1", "U1", "", "<@UBOT> hi")
	}
	for range 3 {
		waitChan(t, "reply started", started)
	}
	// Every envelope (app_mention and message.channels for each message) is acked while all
	// three replies are still blocked.
	h.waitFor(t, "acks", func() bool {
		for _, e := range fs.Envelopes() {
			if e.Acked.IsZero() {
				return false
			}
		}
		return true
	})
	// The replies are still blocked, so no ack waited for them; Slack's own bound is 3 s (it then
	// redelivers). A tighter bound here would time the machine, not the bot.
	for _, e := range fs.Envelopes() {
		if lat := e.Acked.Sub(e.Sent); lat > 3*time.Second {
			t.Errorf("envelope %s acked after %v, past Slack's 3 s", e.ID, lat)
		}
	}
	got := r.requests()
	if len(got) != 3 {
		t.Fatalf("Reply called %d times, want 3", len(got))
	}
	for _, req := range got {
		if req.FollowUp || req.ThreadTS != req.TS || req.Channel != "C1" || req.User != "U1" {
			t.Errorf("request %+v: want a mention answered in its own thread", req)
		}
	}
}

func TestBadMessageIsAcked(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r := &fakeReplier{}
	h := startBot(t, fs, r, nil, Options{})

	// An inner event slack-go cannot parse: it reaches us as ErrorBadMessage, without a Request.
	id := fs.SendRaw([]byte(`{"envelope_id":"bad-1","type":"events_api","accepts_response_payload":false,` +
		`"payload":{"type":"event_callback","team_id":"T1","event_id":"EvBad","event":{"type":"no_such_event_type"}}}`))
	h.waitFor(t, "ack of the bad envelope", func() bool { return acked(fs, id) })
	if id != "bad-1" {
		t.Errorf("SendRaw returned %q, want bad-1", id)
	}
	if n := len(r.requests()); n != 0 {
		t.Errorf("Reply called %d times for a bad message", n)
	}
}

func TestHelloIsNotAcked(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	h := startBot(t, fs, &fakeReplier{}, nil, Options{})
	fs.PostUserMessage("D1", "U1", "", "hello")
	h.waitFor(t, "ack", func() bool { return len(fs.Acks()) == 1 })
	for _, a := range fs.Acks() {
		if !a.Known || a.EnvelopeID == "" {
			t.Errorf("unexpected ack %+v (hello must not be acked)", a)
		}
	}
}

func TestDuplicatesAnsweredOnce(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	done := make(chan string, 10) // more than the replies expected
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		done <- req.TS
		return nil
	}}
	h := startBot(t, fs, r, nil, Options{})

	// 1. The same envelope twice (same envelope_id; sent below).
	ts1 := fs.PostUserMessage("D1", "U1", "", "first")
	waitChan(t, "first reply", done)
	first := fs.Envelopes()[0]
	frame, err := json.Marshal(map[string]any{
		"envelope_id": first.ID, "type": "events_api", "accepts_response_payload": false,
		"payload": map[string]any{"type": "event_callback", "team_id": "T1", "event_id": "EvOther",
			"event": fs.EventOf("D1", ts1, "message")},
	})
	if err != nil {
		t.Fatal(err)
	}
	// 2. Slack's retry of an event: a new envelope id, the same event_id.
	retry := fs.Redeliver(first.ID)
	fs.SendRaw(frame)
	// 3. app_mention and message.im for the same DM message.
	ts2 := fs.PostUserMessage("D1", "U1", "", "<@UBOT> second")
	mention := fs.SendEvent(fs.EventOf("D1", ts2, "app_mention"))
	h.waitFor(t, "acks", func() bool { return acked(fs, retry) && acked(fs, mention) && len(fs.Acks()) >= 5 })
	if retry == "" {
		t.Fatal("Redeliver did not know the first envelope")
	}
	waitChan(t, "second reply", done)

	// A marker message proves the loop has handled everything before it.
	fs.PostUserMessage("D1", "U1", "", "marker")
	waitChan(t, "marker reply", done)
	got := r.requests()
	if len(got) != 3 {
		t.Fatalf("Reply called %d times, want 3 (first, second, marker): %+v", len(got), got)
	}
	if got[0].TS != ts1 || got[1].TS != ts2 {
		t.Errorf("replies for %s, %s; want %s, %s", got[0].TS, got[1].TS, ts1, ts2)
	}
	if got[1].ChannelType != "im" || got[1].ThreadTS != "" {
		t.Errorf("DM request %+v: want channel type im, top level", got[1])
	}
}

func TestLoopPrevention(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{EchoBotMessages: true})
	done := make(chan route.ReplyRequest, 10) // more than the replies expected
	var api *SlackAPI
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		// Answer like the real handler: post, then edit (both echo back as events).
		ts, err := api.Post(ctx, req.Channel, req.ThreadTS, gateway.Msg{Text: "…", Mark: convo.Mark{Kind: convo.MarkPlaceholder}})
		if err == nil {
			err = api.Update(ctx, req.Channel, ts, gateway.Msg{Text: "answer", Mark: convo.Mark{Kind: convo.MarkAnswer}})
		}
		done <- req
		return err
	}}
	h := startBot(t, fs, r, nil, Options{FollowUps: true})
	api = h.api

	fs.PostUserMessage("D1", "U1", "", "hi in a DM")
	waitChan(t, "DM reply", done)
	parent := fs.PostUserMessage("C1", "U1", "", "<@UBOT> hi in a channel")
	waitChan(t, "mention reply", done)
	// Another bot in the thread, and an edited mention.
	other := fs.EventOf("C1", parent, "message")
	other["bot_id"], other["user"], other["ts"], other["thread_ts"], other["text"] = "BOTHER", "UOTHER", "1700000000.000001", parent, "beep"
	fs.SendEvent(other)
	edited := fs.EventOf("C1", parent, "app_mention")
	edited["edited"] = map[string]any{"user": "U1", "ts": "1700000000.000002"}
	fs.SendEvent(edited)
	h.waitFor(t, "echoes handled", func() bool {
		for _, e := range fs.Envelopes() {
			if e.Acked.IsZero() {
				return false
			}
		}
		return len(fs.Envelopes()) >= 8
	})
	fs.PostUserMessage("D1", "U1", "", "marker")
	waitChan(t, "marker reply", done)
	if n := len(r.requests()); n != 3 {
		t.Errorf("Reply called %d times, want 3 (DM, mention, marker): %+v", n, r.requests())
	}
}

func TestFollowUps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		followUps bool
		want      int  // replies: the mention, the follow-up when on, the mention in the thread
		answered  bool // the follow-up, which does not mention the bot
	}{
		{"on", true, 3, true},
		{"off", false, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFakeSlack(t, fakeslack.Config{})
			done := make(chan route.ReplyRequest, 10) // more than the replies expected
			r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error { done <- req; return nil }}
			h := startBot(t, fs, r, nil, Options{FollowUps: tc.followUps})
			parent := fs.PostUserMessage("C1", "U1", "", "<@UBOT> question")
			waitChan(t, "mention reply", done)
			fs.PostUserMessage("C1", "U2", parent, "and a follow-up")
			fs.PostUserMessage("C1", "U2", "", "top-level chatter")
			fs.PostUserMessage("C1", "U2", parent, "<@UBOT> mention in the thread")
			h.waitFor(t, "acks", func() bool { return len(fs.Acks()) == len(fs.Envelopes()) && len(fs.Envelopes()) == 6 })
			fs.PostUserMessage("D1", "U1", "", "marker")
			for range tc.want { // the rest and the marker
				waitChan(t, "reply", done)
			}
			got := r.requests()
			if len(got) != tc.want+1 {
				t.Fatalf("Reply called %d times, want %d: %+v", len(got), tc.want+1, got)
			}
			// Replies in different threads start in no set order (a burst's work is started
			// together once it is acked): find each request by its text.
			byText := map[string]route.ReplyRequest{}
			for _, req := range got {
				byText[req.Text] = req
			}
			if req := byText["<@UBOT> question"]; req.FollowUp {
				t.Errorf("mention marked as follow-up: %+v", req)
			}
			follow, ok := byText["and a follow-up"]
			if ok != tc.answered {
				t.Errorf("follow-up answered: %t with follow-ups %s, want %t: %+v", ok, tc.name, tc.answered, follow)
			}
			if ok && (!follow.FollowUp || follow.ThreadTS != parent) {
				t.Errorf("follow-up request %+v: want FollowUp in thread %s", follow, parent)
			}
			if req, ok := byText["<@UBOT> mention in the thread"]; !ok || req.FollowUp || req.ThreadTS != parent {
				t.Errorf("mention in the thread: %+v (found %t), want a mention (not a follow-up) in thread %s", req, ok, parent)
			}
		})
	}
}

func TestBusyReply(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	release := make(chan struct{})
	started := make(chan struct{}, 2) // at most two replies start
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- struct{}{}
		<-release
		return nil
	}}
	var busy, finished atomic.Int32
	h := startBot(t, fs, r, nil, Options{MaxConcurrent: 1, Hooks: Hooks{
		Busy: func() { busy.Add(1) },
		Done: func(string, error, time.Duration) { finished.Add(1) },
	}})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	fs.PostUserMessage("D2", "U2", "", "two")
	h.waitFor(t, "busy notice", func() bool { return len(fs.Ephemerals()) == 1 })
	e := fs.Ephemerals()[0]
	if e.User != "U2" || e.Channel != "D2" || e.Text != BusyText {
		t.Errorf("busy notice %+v: want %q to U2 in D2", e, BusyText)
	}
	close(release)
	eventually(t, "first reply done", func() bool { return finished.Load() == 1 })
	// Capacity is back: the next message is answered.
	fs.PostUserMessage("D2", "U2", "", "three")
	waitChan(t, "third reply", started)
	if n := len(r.requests()); n != 2 {
		t.Errorf("Reply called %d times, want 2", n)
	}
	if n := busy.Load(); n != 1 {
		t.Errorf("Busy hook called %d times, want 1", n)
	}
}

// TestBusyFollowUp: when the bot is full, a follow-up in a thread it is known to take part in gets
// the busy note, as a mention does; one in any other thread (perhaps not for the bot at all) is
// dropped silently.
func TestBusyFollowUp(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 1) // one reply starts
	const known, other = "1700000001.000000", "1700000002.000000"
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- struct{}{}
		<-release
		return nil
	}, known: func(req route.ReplyRequest) bool { return req.ThreadTS == known }}
	var busy atomic.Int32
	startBot(t, fs, r, nil, Options{MaxConcurrent: 1, FollowUps: true,
		Hooks: Hooks{Busy: func() { busy.Add(1) }},
	})
	fs.PostUserMessage("D1", "U1", "", "one")
	waitChan(t, "first reply", started)
	fs.PostUserMessage("C1", "U2", other, "chatting in another thread")
	fs.PostUserMessage("C1", "U3", known, "and a follow-up to the bot")
	eventually(t, "busy note", func() bool { return len(fs.Ephemerals()) >= 1 })
	es := fs.Ephemerals()
	if len(es) != 1 || es[0].User != "U3" || es[0].ThreadTS != known || es[0].Text != BusyText {
		t.Errorf("busy notes %+v: want one, %q to U3 in thread %s", es, BusyText, known)
	}
	if n := busy.Load(); n != 2 {
		t.Errorf("Busy hook called %d times, want 2", n)
	}
}

func TestOneAnswerAtATimePerThread(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	type ev struct {
		ts    string
		start bool
	}
	events := make(chan ev, 10)           // start/end of the replies below
	release := map[string]chan struct{}{} // by thread
	var mu sync.Mutex
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		events <- ev{req.TS, true}
		mu.Lock()
		c := release[req.ThreadTS]
		mu.Unlock()
		<-c
		events <- ev{req.TS, false}
		return nil
	}}
	startBot(t, fs, r, nil, Options{})
	p1 := "1700000001.000000"
	mu.Lock()
	release[p1] = make(chan struct{})
	mu.Unlock()
	// Two mentions in the same thread, one in another thread.
	fs.SendEvent(map[string]any{"type": "app_mention", "user": "U1", "text": "<@UBOT> a", "ts": p1, "channel": "C1", "event_ts": p1})
	first := waitChan(t, "first start", events)
	b := "1700000001.000100"
	fs.SendEvent(map[string]any{"type": "app_mention", "user": "U2", "text": "<@UBOT> b", "ts": b, "thread_ts": p1, "channel": "C1", "event_ts": b})
	p2 := "1700000002.000000"
	mu.Lock()
	release[p2] = make(chan struct{})
	mu.Unlock()
	fs.SendEvent(map[string]any{"type": "app_mention", "user": "U3", "text": "<@UBOT> c", "ts": p2, "channel": "C1", "event_ts": p2})
	other := waitChan(t, "other thread start", events)
	if first != (ev{p1, true}) || other != (ev{p2, true}) {
		t.Fatalf("got %v then %v; want %s and %s started, %s waiting", first, other, p1, p2, b)
	}
	close(release[p2])
	if got := waitChan(t, "other thread end", events); got != (ev{p2, false}) {
		t.Fatalf("got %v, want the other thread to finish while the second mention waits", got)
	}
	close(release[p1])
	for _, want := range []ev{{p1, false}, {b, true}, {b, false}} {
		if got := waitChan(t, "thread order", events); got != want {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestReconnectMidReply(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	release := make(chan struct{})
	done := make(chan error, 3) // one per reply
	var api *SlackAPI
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		if req.Text == "slow" {
			<-release
		}
		_, err := api.Post(ctx, req.Channel, req.ThreadTS, gateway.Msg{Text: "answer to " + req.Text})
		done <- err
		return err
	}}
	h := startBot(t, fs, r, nil, Options{})
	api = h.api
	fs.PostUserMessage("D1", "U1", "", "slow")
	h.waitFor(t, "reply started", func() bool { return len(r.requests()) == 1 })

	fs.Disconnect("refresh_requested")
	h.waitFor(t, "reconnected", func() bool {
		return fs.Connections().Total == 2 && fs.Connections().Current == 1 && h.bot.State().Connected
	})
	if got := h.bot.State().Reconnects; got != 1 {
		t.Errorf("Reconnects = %d, want 1", got)
	}
	close(release)
	if err := waitChan(t, "slow reply", done); err != nil {
		t.Fatalf("reply after reconnect: %v", err)
	}
	fs.PostUserMessage("D1", "U1", "", "after")
	if err := waitChan(t, "reply after reconnect", done); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range fs.Messages("D1") {
		if m.BotID != "" {
			texts = append(texts, m.Text)
		}
	}
	if want := []string{"answer to slow", "answer to after"}; strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("bot messages %q, want %q", texts, want)
	}
}

func TestShutdownDrainsThenCancels(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	causes := make(chan error, 2) // one per reply
	started := make(chan struct{}, 2)
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- struct{}{}
		if req.Text == "quick" {
			time.Sleep(200 * time.Millisecond) // finishes within the grace period
			causes <- nil
			return nil
		}
		<-ctx.Done() // never finishes by itself
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}}
	h := startBot(t, fs, r, nil, Options{Grace: 2 * time.Second})
	fs.PostUserMessage("D1", "U1", "", "quick")
	fs.PostUserMessage("D2", "U2", "", "endless")
	waitChan(t, "start", started)
	waitChan(t, "start", started)

	begin := time.Now()
	if err := h.shutdown(t); err != nil {
		t.Errorf("Run returned %v, want nil", err)
	}
	took := time.Since(begin)
	var gotShutdown, gotNil int
	for range 2 {
		switch err := waitChan(t, "reply end", causes); {
		case err == nil:
			gotNil++
		case errors.Is(err, handlers.ErrShutdown):
			gotShutdown++
		default:
			t.Errorf("cause %v, want nil or ErrShutdown", err)
		}
	}
	if gotNil != 1 || gotShutdown != 1 {
		t.Errorf("finished %d, cancelled with ErrShutdown %d; want 1 and 1", gotNil, gotShutdown)
	}
	if took < time.Second || took > 3*2*time.Second {
		t.Errorf("shutdown took %v, want the endless reply cancelled after grace/2 .. grace-2s and then ended", took)
	}
	// The socket is closed: nothing new is taken. Every envelope handled was acked first.
	h.waitFor(t, "socket closed", func() bool { return fs.Connections().Current == 0 })
	eventually(t, "every envelope handled acked before the socket closed", func() bool {
		return fs.Stats().Unacked == 0 // the fake records acks from its own reader goroutine
	})
}

func TestSlashCommandAck(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	ran := make(chan imagine.Request, 1) // one command
	im := &fakeImaginer{text: "Generating “a fox”…", start: true, run: func(ctx context.Context, req imagine.Request) error {
		ran <- req
		return nil
	}}
	h := startBot(t, fs, &fakeReplier{}, im, Options{})
	url := fs.SlashCommand("C1", "U1", "/imagine", "a fox")
	req := waitChan(t, "imagine run", ran)
	if req.Text != "a fox" || req.Channel != "C1" || req.User != "U1" || req.ResponseURL != url {
		t.Errorf("request %+v", req)
	}
	h.waitFor(t, "ack", func() bool { return len(fs.Acks()) == 1 })
	var payload struct{ ResponseType, Text string }
	ack := fs.Acks()[0]
	if err := json.Unmarshal(ack.Payload, &payload); err != nil {
		t.Fatalf("ack payload %s: %v", ack.Payload, err)
	}
	if payload.Text != im.text {
		t.Errorf("ack text %q, want %q", payload.Text, im.text)
	}
	if !strings.Contains(string(ack.Payload), `"response_type":"ephemeral"`) {
		t.Errorf("ack payload %s is not ephemeral", ack.Payload)
	}
}

func TestShutdownTellsQueuedAsker(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r, started := runsUntilCancelled(func(req route.ReplyRequest) string { return req.TS })
	h := startBot(t, fs, r, nil, Options{Grace: time.Second})
	parent := fs.PostUserMessage("C1", "U1", "", "<@UBOT> first")
	waitChan(t, "first reply", started)
	fs.PostUserMessage("C1", "U2", parent, "<@UBOT> second, same thread")
	h.waitFor(t, "second queued", func() bool {
		return h.bot.turns.len() == 1 && len(fs.Acks()) == len(fs.Envelopes()) && len(fs.Envelopes()) == 4
	})
	if err := h.shutdown(t); err != nil {
		t.Fatal(err)
	}
	select {
	case ts := <-started:
		t.Errorf("reply %s started during shutdown", ts)
	default:
	}
	e := fs.Ephemerals()
	if len(e) != 1 || e[0].User != "U2" || e[0].Text != RestartText || e[0].ThreadTS != parent {
		t.Errorf("ephemerals %+v: want the restart notice to U2 in the thread", e)
	}
}

func TestBadAppTokenStopsRun(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	client := slack.New("xoxb-test", slack.OptionAPIURL(fs.URL()), slack.OptionAppLevelToken("xapp-wrong"))
	b := newBot(client, Identity{UserID: "UBOT"}, &fakeReplier{}, nil, nil, zaptest.NewLogger(t), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err := b.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "SLACK_APP_TOKEN") || ctx.Err() != nil {
		t.Errorf("Run with a bad app token: %v, want an error naming SLACK_APP_TOKEN at once", err)
	}
}

func TestStopReply(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	started := make(chan route.ReplyRequest, 1) // one reply
	causes := make(chan error, 1)
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- req
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}}
	h := startBot(t, fs, r, nil, Options{})
	fs.PostUserMessage("C1", "U1", "", "<@UBOT> long question")
	req := waitChan(t, "reply", started)

	if stopped, err := h.bot.StopReply("C1", req.ThreadTS, "U2"); stopped || !errors.Is(err, ErrNotAsker) {
		t.Errorf("StopReply by someone else = %v, %v; want false, ErrNotAsker", stopped, err)
	}
	if stopped, err := h.bot.StopReply("C1", "1.0", "U1"); stopped || err != nil {
		t.Errorf("StopReply in an idle thread = %v, %v; want false, nil", stopped, err)
	}
	if stopped, err := h.bot.StopReply("C1", req.ThreadTS, "U1"); !stopped || err != nil {
		t.Errorf("StopReply by the asker = %v, %v; want true, nil", stopped, err)
	}
	if cause := waitChan(t, "cancel", causes); !errors.Is(cause, handlers.ErrStopped) {
		t.Errorf("cause %v, want ErrStopped", cause)
	}
	eventually(t, "no active reply", func() bool {
		stopped, err := h.bot.StopReply("C1", req.ThreadTS, "U1")
		return !stopped && err == nil
	})
}

func TestDroppedConnectionMidReply(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	release := make(chan struct{})
	done := make(chan string, 2) // one per reply
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		if req.Text == "slow" {
			<-release
		}
		done <- req.Text
		return nil
	}}
	h := startBot(t, fs, r, nil, Options{})
	fs.PostUserMessage("D1", "U1", "", "slow")
	h.waitFor(t, "reply started", func() bool { return len(r.requests()) == 1 })
	fs.DropConnections()
	h.waitFor(t, "reconnected", func() bool {
		return fs.Connections().Total == 2 && fs.Connections().Current == 1 && h.bot.State().Connected
	})
	close(release)
	if got := waitChan(t, "slow reply", done); got != "slow" {
		t.Errorf("got %q", got)
	}
	fs.PostUserMessage("D1", "U1", "", "after")
	if got := waitChan(t, "reply after reconnect", done); got != "after" {
		t.Errorf("got %q", got)
	}
}

func TestPanickingHandlerDoesNotStopTheBot(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	done := make(chan string, 1) // the reply after the panic
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		if req.Text == "boom" {
			panic("bad input")
		}
		done <- req.Text
		return nil
	}}
	var failed atomic.Int32
	startBot(t, fs, r, nil, Options{Hooks: Hooks{Done: func(_ string, err error, _ time.Duration) {
		if errors.Is(err, errPanic) {
			failed.Add(1)
		}
	}}})
	fs.PostUserMessage("D1", "U1", "", "boom")
	eventually(t, "panic reported", func() bool { return failed.Load() == 1 })
	fs.PostUserMessage("D1", "U1", "", "still alive?")
	if got := waitChan(t, "next reply", done); got != "still alive?" {
		t.Errorf("got %q", got)
	}
}

func TestInteractiveEnvelope(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	clicks := make(chan route.Request, 1) // one click
	h := startBot(t, fs, &fakeReplier{}, nil, Options{}, route.Route{Kind: route.Action, Name: "stop",
		Handler: route.Funcs{AcceptFunc: func(req *route.Request) route.Decision {
			clicks <- *req
			return route.Decision{}
		}}})
	id := fs.SendRaw([]byte(`{"envelope_id":"click-1","type":"interactive","accepts_response_payload":false,"payload":` +
		`{"type":"block_actions","user":{"id":"U1"},"channel":{"id":"C1"},"container":{"type":"message","message_ts":"1.2","thread_ts":"1.0"},` +
		`"actions":[{"action_id":"stop","block_id":"b","type":"button","value":"1.0"}]}}`))
	req := waitChan(t, "click", clicks)
	want := route.Request{Kind: route.Action, Name: "stop", Feature: "stop", Channel: "C1", User: "U1", ThreadTS: "1.0", MessageTS: "1.2", Text: "1.0"}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("request %+v\nwant    %+v", req, want)
	}
	h.waitFor(t, "ack", func() bool { return acked(fs, id) })
}

// hangingNotifier never answers: a Slack that does not respond to chat.postEphemeral.
type hangingNotifier struct{ calls atomic.Int32 }

func (n *hangingNotifier) Ephemeral(ctx context.Context, _, _, _, _ string) error {
	n.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// TestShutdownNoticesEndWithTheGracePeriod: the restart notices of messages queued behind an
// answer in the same thread are bounded by the grace period, not by their own 10 s timeout each.
func TestShutdownNoticesEndWithTheGracePeriod(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	client := newClient(fs)
	api := NewSlackAPI(client, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	id, err := api.Identify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		started <- struct{}{}
		<-ctx.Done()
		return context.Cause(ctx)
	}}
	notify := &hangingNotifier{}
	const grace = 2 * time.Second
	b := newBot(client, id, r, nil, notify, zaptest.NewLogger(t), Options{Grace: grace})
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- b.Run(runCtx) }()
	eventually(t, "connected", func() bool { return b.State().Connected })
	parent := fs.PostUserMessage("C1", "U1", "", "<@UBOT> first")
	waitChan(t, "first reply", started)
	for i := range 3 {
		fs.PostUserMessage("C1", "U2", parent, "<@UBOT> queued "+string(rune('a'+i)))
	}
	eventually(t, "three queued", func() bool {
		return len(r.requests()) == 1 && len(fs.Acks()) == len(fs.Envelopes()) && len(fs.Envelopes()) == 8
	})
	begin := time.Now()
	stop()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return")
	}
	if took := time.Since(begin); took > grace+2*time.Second { // it took 10s per queued notice before
		t.Errorf("shutdown took %v with a %v grace period", took, grace)
	}
	if n := notify.calls.Load(); n == 0 {
		t.Error("no restart notice was tried")
	}
}

// TestPingTimeoutMidReply: when Slack's pings stop, slack-go's watchdog drops the connection and
// dials again; the answer in progress completes and later messages are answered, each once.
func TestPingTimeoutMidReply(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{PingInterval: time.Hour}) // Slack goes quiet
	client := newClient(fs)
	api := NewSlackAPI(client, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	id, err := api.Identify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	done := make(chan string, 2) // one per reply
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		if req.Text == "slow" {
			<-release
		}
		done <- req.Text
		return nil
	}}
	b := newBot(client, id, r, nil, gateway.NewNotices(api, gateway.Budgets{}), zaptest.NewLogger(t), Options{Grace: time.Second, PingTimeout: 500 * time.Millisecond})
	runCtx, stop := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- b.Run(runCtx) }()
	defer func() {
		stop()
		select {
		case <-errc:
		case <-time.After(waitTimeout):
			t.Error("Run did not return")
		}
	}()
	eventually(t, "connected", func() bool { return b.State().Connected })
	fs.PostUserMessage("D1", "U1", "", "slow")
	eventually(t, "reply started", func() bool { return len(r.requests()) == 1 })
	eventually(t, "a connection dropped for missing pings and dialled again", func() bool {
		return fs.Connections().Total >= 2
	})
	close(release)
	if got := waitChan(t, "slow reply", done); got != "slow" {
		t.Errorf("got %q", got)
	}
	fs.PostUserMessage("D1", "U1", "", "after")
	if got := waitChan(t, "reply after the ping timeout", done); got != "after" {
		t.Errorf("got %q", got)
	}
	if n := len(r.requests()); n != 2 {
		t.Errorf("Reply called %d times, want 2 (no repeats)", n)
	}
}

// TestPanickingEnvelopeDoesNotStopTheLoop: a panic while the loop itself handles a frame (here the
// duplicate hook, which runs in the loop) drops that frame, and the loop reads the next one.
func TestPanickingEnvelopeDoesNotStopTheLoop(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	done := make(chan string, 10) // more than the replies expected
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		done <- req.Text
		return nil
	}}
	var panics atomic.Int32
	h := startBot(t, fs, r, nil, Options{Hooks: Hooks{Duplicate: func(string) {
		panics.Add(1)
		panic("a payload the loop cannot take")
	}}})
	fs.PostUserMessage("D1", "U1", "", "first")
	waitChan(t, "first reply", done)
	retry := fs.Redeliver(fs.Envelopes()[0].ID) // a duplicate: the hook panics in the loop
	h.waitFor(t, "the retry's ack", func() bool { return acked(fs, retry) })
	eventually(t, "the hook's panic", func() bool { return panics.Load() == 1 })
	fs.PostUserMessage("D1", "U1", "", "still alive?")
	if got := waitChan(t, "next reply", done); got != "still alive?" {
		t.Errorf("got %q", got)
	}
}
