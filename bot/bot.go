// Package bot runs the Socket Mode loop over the envelopes package slacksocket reads and acks
// (decode, dedupe, route, bounded concurrency, one answer at a time per thread, graceful drain)
// and adapts the Slack Web API to the interfaces of package gateway and of the use cases (SlackAPI,
// and SlackAssistant for the assistant and agent surfaces).
package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/slacksocket"
	"github.com/llmbot/llmbot/threads"
)

// socket is the Socket Mode connection the loop reads envelopes from and acks slash commands
// on: a *slacksocket.Client.
type socket interface {
	// Run connects and reads until ctx ends, leaving the last connection open for the loop's
	// last acks, or until the connection fails for good.
	Run(ctx context.Context) error
	// Frames delivers the envelopes read, acked already but for slash commands.
	Frames() <-chan slacksocket.Frame
	// Ack acks an envelope the socket left to the loop, with payload as its answer.
	Ack(ctx context.Context, envelopeID string, payload any) error
	// Close closes the last connection once Run has returned and the last acks are written.
	Close()
}

// Notifier tells one person something privately (the busy notice, a place in line, the restart
// note): *gateway.Notices, which waits for its turn in Slack's chat.postEphemeral budget (the one
// the replies' own notes take from) and rides out 429s until ctx ends.
type Notifier interface {
	Ephemeral(ctx context.Context, channel, user, threadTS, text string) error
}

// QueueStatus shows a waiting question's place in line where its answer will be written: under its
// thread, as the thread's assistant status (*pane.Pane).
type QueueStatus interface {
	// ShowQueued shows that the question answered in threadTS waits, place-th in line (1: next),
	// and reports whether it is shown (when not, the asker is told privately).
	ShowQueued(ctx context.Context, channel, threadTS string, place int) bool
	// ClearQueued takes the status down from a thread where no answer will clear it.
	ClearQueued(ctx context.Context, channel, threadTS string)
}

// Identity is who the bot is, from auth.test.
type Identity struct {
	UserID string // the bot user, U...
	BotID  string // the bot, B...
	TeamID string
	// TeamName is the workspace's name; EnterpriseID its Enterprise Grid org ("": none).
	TeamName, EnterpriseID string
	Name                   string // the bot user's name
	AppID                  string // the Slack app, A... ("" when unknown): Socket Mode must connect to the same one
}

// What a person is told privately when the bot cannot take their message.
const (
	// BusyText: MaxConcurrent answers are in progress and MaxQueued more wait for their turn.
	BusyText = "I'm answering too many questions right now — try again in a minute."
	// queuedFormat: every place is taken; the question waits in line (its place, 1 for the next).
	queuedFormat = "Many questions at once: yours is number %d in line. I'll answer here when it's its turn."
	// RestartText: the bot shut down while the message waited for an earlier answer in its thread.
	RestartText = "I'm restarting and couldn't get to your message — please ask again in a minute."
)

// Options tune the loop. Zero values get the defaults named in the comments.
type Options struct {
	MaxConcurrent int // answers and /imagine jobs running at once; default 50
	// MaxQueued is how many answers may wait for a free place beyond MaxConcurrent, in arrival order;
	// beyond that the asker is told the bot is busy. 0: none wait.
	MaxQueued int
	Grace     time.Duration // shutdown: time for work in progress; default 8s
	FollowUps bool          // answer thread messages without a mention (the handler decides if the thread involves the bot)
	// AgentView: the app is declared as an agent (features.agent_view): each message in a DM with
	// the bot (its agent pane) is its own thread root, answered in its thread, where native
	// streaming and the agent session apply. Off: answered at the top of the DM.
	AgentView   bool
	AnswerBots  bool          // answer other bots' messages (never our own)
	AckTimeout  time.Duration // most time the loop's ack (of a slash command) may take to write; default 2s
	PingTimeout time.Duration // a connection that brings nothing (not even a ping) for this long is dialled again; default 30s
	DedupeTTL   time.Duration // how long envelope, event and message ids are remembered; default 1h (Slack's retries have been seen minutes later)
	DedupeMax   int           // most ids remembered per kind; default 20000
	// Replicas is what this bot shares with its other replicas (the state package); a nil part: nobody.
	Replicas Replicas
	// InboxKey signs what this replica hands another and checks what it is handed (InboxKey of
	// the bot token); nil: nothing is handed over either way.
	InboxKey []byte
	// Queue shows a waiting question's place in line under its thread; nil (or a question with no
	// thread): the asker is told privately.
	Queue QueueStatus
	// Threads is the bot's memory of its threads (nil: none): every message event changes it before
	// it is routed, and a connection that comes up after none was (the first one too) makes all of it
	// stale, for events may have been missed meanwhile.
	Threads *threads.Cache
	Hooks   Hooks

	burstHold  time.Duration       // the most work is held while its burst is acked; default burstHold (tests set it)
	leaseRenew time.Duration       // how often a running answer renews its thread's lease; default leaseRenew (tests set it)
	wrapSocket func(socket) socket // tests: stands between the loop and the socket
}

// Hooks observe the loop (metrics live in the caller). Every field is optional and must not block.
type Hooks struct {
	// Acked: an envelope was acked, latency since it was read. Called from the socket's reader too,
	// once the ack is written or, in a burst, queued for the burst's one write.
	Acked      func(envelopeType string, latency time.Duration)
	Duplicate  func(kind string)                             // "envelope", "event" or "message" dropped as a repeat
	Busy       func()                                        // an answer refused because MaxConcurrent + MaxQueued were reached
	Done       func(kind string, err error, d time.Duration) // "reply" or a route's feature ("imagine") finished
	Connection func(connected bool)                          // a Socket Mode connection came up (also one that replaced another without a gap: a refresh), or the connection went down
}

// State is the Socket Mode connection's state, for readiness checks.
type State struct {
	Connected  bool
	Reconnects int       // connections made after the first
	Since      time.Time // when Connected last changed
}

const (
	closeReserve  = 2 * time.Second // of the grace period, kept for writing "interrupted" notes (see CloseReserve)
	noticeTimeout = 10 * time.Second
	busyNoteEvery = time.Minute // one "busy" note per person at most this often

	// Work is started once the envelopes arriving with it are acked: held until no envelope came
	// for burstGap, never longer than burstHold (see Bot.later).
	burstGap  = 2 * time.Millisecond
	burstHold = 50 * time.Millisecond
)

// Bot is the Socket Mode event loop. Create it with New and call Run once.
type Bot struct {
	sock   socket
	routes *route.Table
	log    *zap.Logger
	opt    Options

	slots *slots // MaxConcurrent places for running work, and the queue for them
	// replies counts the answers admitted and not done with the model (waiting for a place, or
	// holding one): at most MaxConcurrent + MaxQueued. An answer whose last writes are under way
	// no longer counts: its place is someone else's.
	replies  atomic.Int64
	turns    *turns
	replicas *replicas
	reader   reader
	tasks    tasks // every goroutine started for work
	// closing ends when the grace period does (set by Run before any work starts): private notices
	// are bounded by it, so shutdown ends in time even when Slack is slow.
	closing context.Context

	// Only the event loop goroutine touches these.
	seen recent
	held held // work handled but not started yet

	conn    *connection
	active  *actives
	notices *notices

	// submitted carries the requests the bot makes itself (Submit) to the loop; ended is closed
	// when the loop stops taking them.
	submitted chan *route.Request
	ended     chan struct{}
}

// recent is what the loop remembers having had lately: envelopes, events and messages (so that a
// redelivery is dropped), and the people told the bot is busy (told once in busyNoteEvery).
type recent struct {
	envelopes, events, messages *seen
	busyTold                    *seen
}

// ErrNotAsker is returned by StopReply when someone other than the asker tries to stop an answer.
var ErrNotAsker = errors.New("only the person who asked can stop this answer")

// New returns a Bot that connects to Slack over Socket Mode with open (a *slack.Client made with
// the app-level token) and serves the routes (filled before Run). notify tells people privately
// what Accept says and why their request cannot run; nil: they are not told.
func New(open slacksocket.Opener, id Identity, routes *route.Table, notify Notifier, log *zap.Logger, opt Options) *Bot {
	if opt.MaxConcurrent <= 0 {
		opt.MaxConcurrent = 50
	}
	if opt.Grace <= 0 {
		opt.Grace = 8 * time.Second
	}
	if opt.AckTimeout <= 0 {
		opt.AckTimeout = 2 * time.Second
	}
	if opt.DedupeTTL <= 0 {
		opt.DedupeTTL = time.Hour
	}
	opt.Replicas = opt.Replicas.withAlone()
	if opt.leaseRenew <= 0 {
		opt.leaseRenew = leaseRenew
	}
	if opt.DedupeMax <= 0 {
		opt.DedupeMax = 20000
	}
	if opt.burstHold <= 0 {
		opt.burstHold = burstHold
	}
	b := &Bot{
		routes: routes, log: log, opt: opt,
		reader:  reader{id: id, agentView: opt.AgentView, followUps: opt.FollowUps, answerBots: opt.AnswerBots},
		slots:   newSlots(opt.MaxConcurrent),
		turns:   newTurns(),
		active:  newActives(),
		conn:    &connection{log: log, hook: opt.Hooks.Connection, threads: opt.Threads},
		notices: &notices{notify: notify, queue: opt.Queue},
		seen: recent{envelopes: newSeen(opt.DedupeTTL, opt.DedupeMax), events: newSeen(opt.DedupeTTL, opt.DedupeMax),
			messages: newSeen(opt.DedupeTTL, opt.DedupeMax), busyTold: newSeen(busyNoteEvery, opt.DedupeMax)},
		submitted: make(chan *route.Request), // unbuffered: Submit returns once the loop has it
		ended:     make(chan struct{}),
	}
	b.replicas = &replicas{shared: opt.Replicas, inboxKey: opt.InboxKey, renew: opt.leaseRenew, log: log,
		notices: b.notices, duplicate: opt.Hooks.duplicate}
	b.sock = slacksocket.New(open, log, slacksocket.Options{PingTimeout: opt.PingTimeout, AppID: id.AppID,
		Acked: opt.Hooks.Acked, State: b.conn.follow})
	if opt.wrapSocket != nil {
		b.sock = opt.wrapSocket(b.sock)
	}
	return b
}

// State returns the connection state. Safe for concurrent use.
func (b *Bot) State() State { return b.conn.get() }

// Run connects to Slack and handles envelopes until ctx is cancelled or the connection fails for
// good (bad app token). Then it stops reading (Slack redelivers what was not acked), gives work
// in progress the grace period, cancels what is left with handlers.ErrShutdown so it can close
// its messages with a note, and returns once every goroutine has ended: nil after ctx was
// cancelled, otherwise the connection's error.
func (b *Bot) Run(ctx context.Context) error {
	// The socket stops reading when ctx ends; its last connection stays open for the acks the
	// loop still writes (slash commands read before), and is closed once they are written.
	sockErr := make(chan error, 1) // size 1: the socket goroutine never waits for us
	var sockWG sync.WaitGroup
	sockWG.Go(func() { sockErr <- b.sock.Run(ctx) })

	// Work outlives ctx for the grace period; it is cancelled by drain.
	work, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelWork(nil)
	closing, endClosing := context.WithCancel(context.WithoutCancel(ctx))
	defer endClosing()
	b.closing, b.notices.closing = closing, closing

	// Requests other replicas hand to this one (a click on an answer written here), read until this
	// replica's work has drained: its answers take their clicks until they end (drain).
	inbox := make(chan *route.Request) // unbuffered: the reader waits; closed once it has ended
	inboxCtx, stopInbox := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInbox()
	go b.replicas.receive(inboxCtx, inbox) // its end is waited for by drain

	frames := b.sock.Frames()
	var runErr error
	burst := time.NewTimer(burstGap) // fires when a burst of envelopes is over: its held work starts
	burst.Stop()
	var heldSince time.Time
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-sockErr:
			sockErr <- err // for the wait below
			if ctx.Err() == nil {
				runErr = err // returned, not logged: the caller reports it
			}
			break loop
		case f := <-frames:
			read := f.Read
			b.handle(work, f)
			switch {
			case len(b.held) == 0:
			case heldSince.IsZero():
				heldSince = read
				fallthrough
			case read.Sub(heldSince) < b.opt.burstHold:
				burst.Reset(burstGap)
			default: // a burst longer than burstHold: start what waited so far
				burst.Stop()
				b.held.release(&b.tasks)
				heldSince = time.Time{}
			}
		case req := <-inbox:
			b.fromReplica(work, req)
		case req := <-b.submitted:
			log := b.log.With(zap.String("submitted", req.Name), zap.String("user", req.User))
			b.dispatch(work, req, time.Now(), log, b.tellLater(req.Channel, req.User, req.ThreadTS, log))
			b.held.release(&b.tasks)
		case <-burst.C:
			if len(frames) > 0 && time.Since(heldSince) < b.opt.burstHold {
				burst.Reset(burstGap) // the burst goes on (its envelopes were slow to handle): ack them first
				continue
			}
			b.held.release(&b.tasks)
			heldSince = time.Time{}
		}
	}
	burst.Stop()
	close(b.ended)
	<-sockErr // the socket has stopped reading (ctx ended) or failed for good
	sockWG.Wait()
	// What the socket read before it stopped was acked (or is a slash command, acked now on the
	// connection still open): it is handled, not lost.
	for len(frames) > 0 {
		b.handle(work, <-frames)
	}
	b.sock.Close()
	b.held.release(&b.tasks) // acked: answered, or told about the restart (see answer)
	b.conn.setConnected(false)
	b.drain(work, cancelWork, endClosing, inbox, stopInbox)
	return runErr
}

// fromReplica dispatches a request another replica handed to this one. Only the loop (then the
// drain) calls it.
func (b *Bot) fromReplica(work context.Context, req *route.Request) {
	log := b.log.With(zap.String("from", req.From), zap.String("name", req.Name))
	b.dispatch(work, req, time.Now(), log, b.tellLater(req.Channel, req.User, req.ThreadTS, log))
	b.held.release(&b.tasks)
}

// CloseReserve is the part of the grace period kept for closing answers once the work left is
// cancelled with handlers.ErrShutdown: the handlers' final writes and notes must fit in it
// (handlers.ReplyOptions.ShutdownTimeout, imagine.Options.ShutdownTimeout).
func CloseReserve(grace time.Duration) time.Duration {
	return grace - max(grace-closeReserve, grace/2)
}

// drain waits for work in progress: all of the grace period but CloseReserve, then it cancels
// the rest with handlers.ErrShutdown and waits for them to write their notes (the handlers
// bound those by their ShutdownTimeout; the bot's own notices end with the grace period).
// Meanwhile the clicks other replicas hand to this one are still dispatched (a Stop, an approval,
// an answer to a question on an answer that drains here): the inbox is read until no work is left,
// and what its reader popped is dispatched before drain waits for the last of it, so a hand-over
// this replica took (its receipt claimed) always acts or is answered.
func (b *Bot) drain(work context.Context, cancelWork context.CancelCauseFunc, endClosing context.CancelFunc,
	inbox <-chan *route.Request, stopInbox context.CancelFunc) {
	soft := b.opt.Grace - CloseReserve(b.opt.Grace)
	start := time.Now()
	stopClosing := time.AfterFunc(b.opt.Grace, endClosing)
	defer stopClosing.Stop()
	timer := time.NewTimer(soft)
	defer timer.Stop()
	cancelled := false
	for idle := b.tasks.idle(); idle != nil; {
		select {
		case <-idle:
			idle = nil
		case <-timer.C:
			b.log.Info("shutdown: cancelling work still in progress", zap.Duration("waited", time.Since(start)))
			cancelWork(handlers.ErrShutdown) // handlers write their final notes on detached, time-boxed contexts
			cancelled = true
		case req := <-inbox:
			b.fromReplica(work, req)
			idle = b.tasks.idle()
		}
	}
	stopInbox()
	for req := range inbox { // popped as the reader stopped: it acts, or its person is told the answer ended
		b.fromReplica(work, req)
	}
	b.tasks.Wait()
	if cancelled {
		b.log.Info("shutdown: all work ended", zap.Duration("took", time.Since(start)))
	}
}

// handle processes one frame from the socket. It never blocks for long: it decodes, decides and
// hands work to a goroutine (the socket has acked every envelope but a slash command already).
func (b *Bot) handle(work context.Context, f slacksocket.Frame) {
	defer b.survive(f)
	read := f.Read
	evt, err := parseEnvelope(f.Data)
	if err != nil {
		b.badEnvelope(f, err)
		return
	}
	if evt.Request == nil || evt.Request.EnvelopeID == "" {
		b.log.Debug("socket mode event without envelope", zap.String("type", string(evt.Type)))
		return
	}
	req := evt.Request
	log := b.log.With(zap.String("envelope_id", req.EnvelopeID))

	if evt.Type == socketmode.EventTypeSlashCommand {
		b.slashCommand(work, evt, read, log) // acks with the command's payload
		return
	}
	if !f.Acked {
		b.ack(req, nil, read, log)
	}
	if b.seen.envelopes.add(req.EnvelopeID, read) {
		b.opt.Hooks.duplicate("envelope", log)
		return
	}
	switch evt.Type {
	case socketmode.EventTypeEventsAPI:
		e, ok := evt.Data.(slackevents.EventsAPIEvent)
		if !ok {
			log.Warn("events_api envelope without an event")
			return
		}
		b.eventsAPI(work, e, req, read, log)
	case socketmode.EventTypeInteractive:
		b.interactive(work, evt, read, log)
	default:
		log.Debug("envelope ignored", zap.String("type", string(evt.Type)))
	}
}

// ack acknowledges an envelope the socket left to the loop, waiting at most AckTimeout.
func (b *Bot) ack(req *socketmode.Request, payload any, read time.Time, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opt.AckTimeout)
	defer cancel()
	if err := b.sock.Ack(ctx, req.EnvelopeID, payload); err != nil {
		log.Warn("ack failed (Slack will redeliver)", zap.Error(err))
		return
	}
	if b.opt.Hooks.Acked != nil {
		b.opt.Hooks.Acked(req.Type, time.Since(read))
	}
}

// survive, deferred by handle, drops a frame whose handling panicked (a payload shape that the
// decoding or the routing cannot take) with the stack in the log: the loop goes on with the next
// frame, and the person who sent it sees no answer to it, as for any envelope that cannot be read.
func (b *Bot) survive(f slacksocket.Frame) {
	if r := recover(); r != nil {
		b.log.Error("socket mode: handling an envelope panicked; dropped",
			zap.String("envelope_id", f.EnvelopeID), zap.String("type", f.Type),
			zap.String("panic", fmt.Sprint(r)), zap.ByteString("stack", debug.Stack()))
	}
}

// badEnvelope drops a frame that could not be decoded (slack-go's types are strict: a new field
// shape can fail a whole event), acking it first if the socket left that to the loop: Slack
// would otherwise keep sending it.
func (b *Bot) badEnvelope(f slacksocket.Frame, err error) {
	log := b.log.With(zap.String("envelope_id", f.EnvelopeID), zap.String("type", f.Type))
	if f.EnvelopeID == "" {
		log.Debug("socket mode: frame ignored", zap.Error(err))
		return
	}
	if !f.Acked {
		b.ack(&socketmode.Request{Type: f.Type, EnvelopeID: f.EnvelopeID}, nil, f.Read, log)
	}
	log.Warn("socket mode: envelope could not be decoded; acked and dropped", zap.Error(err))
}

func (h Hooks) duplicate(kind string, log *zap.Logger) {
	log.Debug("duplicate dropped", zap.String("kind", kind))
	if h.Duplicate != nil {
		h.Duplicate(kind)
	}
}

// eventsAPI routes an Events API event (already acked).
func (b *Bot) eventsAPI(work context.Context, e slackevents.EventsAPIEvent, req *socketmode.Request, read time.Time, log *zap.Logger) {
	eventID := ""
	if cb, ok := e.Data.(*slackevents.EventsAPICallbackEvent); ok {
		eventID = cb.EventID
	}
	if eventID != "" {
		log = log.With(zap.String("event_id", eventID))
		if b.seen.events.add(eventID, read) {
			b.opt.Hooks.duplicate("event", log)
			return
		}
	}
	if req.RetryAttempt > 0 {
		log.Debug("redelivered event", zap.Int("retry_attempt", req.RetryAttempt), zap.String("retry_reason", req.RetryReason))
	}
	b.opt.Threads.Event(work, e)
	var (
		rr     route.ReplyRequest
		reason string
	)
	switch ev := e.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		rr, reason = b.reader.fromMention(ev, e.TeamID)
	case *slackevents.MessageEvent:
		rr, reason = b.reader.fromMessage(ev, e.TeamID)
	default:
		if req := fromEvent(e); req != nil && b.routes.Has(route.Event, req.Name) {
			log = log.With(zap.String("event", req.Name), zap.String("channel", req.Channel), zap.String("user", req.User))
			b.dispatch(work, req, read, log, b.tellLater(req.Channel, req.User, req.ThreadTS, log))
			return
		}
		reason = "event type " + e.InnerEvent.Type
	}
	if reason != "" {
		log.Debug("event ignored", zap.String("reason", reason))
		return
	}
	key := rr.Channel + "/" + rr.TS
	if rr.Edited {
		key += "/edited" // a reply only looked at as a follow-up must not keep its edit out (Replies checks answers)
	}
	if b.seen.messages.add(key, read) {
		b.opt.Hooks.duplicate("message", log.With(zap.String("channel", rr.Channel), zap.String("ts", rr.TS))) // e.g. app_mention and message.im for the same DM
		return
	}
	msg := &route.Request{Kind: route.Message, Name: route.MessageRoute, Feature: rr.Feature(), Channel: rr.Channel,
		User: rr.User, Team: rr.Team, UserTeam: rr.UserTeam, ThreadTS: rr.ThreadTS, MessageTS: rr.TS, Text: rr.Text, Reply: &rr}
	b.dispatch(work, msg, read, log, b.tellLater(rr.Channel, rr.User, rr.ThreadTS, log))
}

// fromEvent turns an event that is no message to answer into a request for its route (route.Event,
// named by the event's type), or nil for an event the bot has no use for.
func fromEvent(e slackevents.EventsAPIEvent) *route.Request {
	switch ev := e.InnerEvent.Data.(type) {
	case *slackevents.AgentSessionStoppedEvent:
		// Slack's own Stop on a session: the thread names the answer, as with our Stop button.
		return &route.Request{Kind: route.Event, Name: string(slackevents.AgentSessionStopped), Channel: ev.Channel,
			User: ev.User, Team: e.TeamID, ThreadTS: ev.ThreadTimestamp}
	case *slackevents.AppHomeOpenedEvent:
		// The app opened: Text is the tab ("messages": the DM, the agent pane under agent_view).
		return &route.Request{Kind: route.Event, Name: string(slackevents.AppHomeOpened), Channel: ev.Channel,
			User: ev.User, Team: e.TeamID, Text: ev.Tab}
	}
	return nil
}

// dispatch serves one request: its route's Accept at once (in the loop), what it says told to the
// person with say (a slash command is always acked through it), and its Run started when it runs:
// an answer in its thread's turn and the queue for a place, other work in the queue for a place.
func (b *Bot) dispatch(work context.Context, req *route.Request, read time.Time, log *zap.Logger, say func(string)) {
	h, ok := b.routes.Lookup(req)
	if !ok {
		log.Debug("no route", zap.String("kind", string(req.Kind)), zap.String("name", req.Name))
		if req.Kind == route.Command {
			say("Sorry, I don't know " + req.Name + ".")
		}
		return
	}
	d, err := accept(h, req)
	if err != nil {
		log.Error("accept failed", zap.Error(err))
		say(textFailed)
		return
	}
	if d.Say != "" || req.Kind == route.Command {
		say(d.Say)
	}
	if !d.Run {
		return
	}
	if req.Kind == route.Command {
		// Acked: anything said later is told privately.
		say = b.tellLater(req.Channel, req.User, req.ThreadTS, log)
	}
	if req.Reply != nil {
		b.startReply(work, h, req, d.Quiet, read, log, say)
		return
	}
	if d.Now {
		b.held.later(func() {
			started := time.Now()
			err := run(work, h, req)
			b.notices.failed(err, req.Channel, req.User, req.ThreadTS, log)
			b.opt.Hooks.finished(req.Feature, err, read, started, log)
		})
		return
	}
	place := b.slots.join() // in the loop: in arrival order
	b.held.later(func() {
		err := place.wait(work)
		if err == nil {
			defer b.slots.release()
		} // else shutting down: Run sees its context ended and closes with its own note
		started := time.Now()
		err = run(work, h, req)
		b.notices.failed(err, req.Channel, req.User, req.ThreadTS, log)
		b.opt.Hooks.finished(req.Feature, err, read, started, log)
	})
}

// textFailed is told when a request's route failed before it could start.
const textFailed = "Something went wrong — please try again."

// accept calls h.Accept, turning a panic into an error: one bad request must not take the bot down.
func accept(h route.Handler, req *route.Request) (d route.Decision, err error) {
	defer recoverAs(&err)
	return h.Accept(req), nil
}

// run calls h.Run, turning a panic into an error.
func run(ctx context.Context, h route.Handler, req *route.Request) (err error) {
	defer recoverAs(&err)
	return h.Run(ctx, req)
}

// startReply admits an answer (or tells the asker the bot is busy: MaxConcurrent answers run and
// MaxQueued wait), takes its thread's turn, and answers in a goroutine once its turn and a place
// come.
func (b *Bot) startReply(work context.Context, h route.Handler, req *route.Request, quiet bool, read time.Time, log *zap.Logger, say func(string)) {
	rr := req.Reply
	log = log.With(zap.String("channel", rr.Channel), zap.String("thread_ts", rr.ThreadTS), zap.String("user", rr.User))
	if n := b.replies.Add(1); n > int64(b.opt.MaxConcurrent+b.opt.MaxQueued) {
		b.replies.Add(-1)
		if b.opt.Hooks.Busy != nil {
			b.opt.Hooks.Busy()
		}
		if quiet || b.seen.busyTold.add(rr.User, read) {
			// A follow-up that may not be for the bot, or someone told a moment ago: a flood of
			// messages while the bot is full must not become a flood of notes competing with the
			// answers for Slack's limits.
			log.Warn("busy: not answered, nobody told", zap.Int("max_concurrent", b.opt.MaxConcurrent), zap.Int("max_queued", b.opt.MaxQueued))
			return
		}
		log.Warn("busy: asker told to retry", zap.Int("max_concurrent", b.opt.MaxConcurrent), zap.Int("max_queued", b.opt.MaxQueued))
		say(BusyText)
		return
	}
	key := threadKey(rr.Channel, rr.ThreadTS)
	prev, done := b.turns.take(key)
	var place *ticket
	inLine := 0 // the place in line the answer's goroutine shows its asker (0: none)
	if prev == nil {
		place = b.slots.join() // in the loop: in arrival order (after a turn, the line is joined then)
		if n, waits := place.queued(); waits && !quiet {
			inLine = n // a sign of life while the answer waits its turn
		}
	}
	log.Debug("reply queued", zap.Bool("follow_up", rr.FollowUp), zap.Bool("regenerate", rr.Regenerate), zap.Int("text_len", len(rr.Text)))
	leave := sync.OnceFunc(func() { b.replies.Add(-1) })
	b.held.later(func() {
		shown := inLine > 0 && b.showPlace(req, inLine, log)
		started, ran, err := b.answer(work, h, req, key, prev, place, leave, log)
		if shown && ran && (errors.Is(err, handlers.ErrIgnored) || errors.Is(err, errDuplicate)) {
			// Nothing is posted to clear it: taken down before the thread's next answer may show
			// its own status.
			b.notices.clearPlace(rr)
		}
		done()
		leave() // before finished: once its end is reported, the answer no longer counts
		if ran {
			b.notices.failed(err, rr.Channel, rr.User, rr.ThreadTS, log)
			b.opt.Hooks.finished("reply", err, read, started, log) // after the place and the thread are free
		} else if !quiet {
			log.Info("reply not started: shutting down")
			b.notices.tell(rr.Channel, rr.User, rr.ThreadTS, RestartText, log)
			if shown {
				b.notices.clearPlace(rr) // the thread must not say the question waits once the asker is told to ask again
			}
		}
	})
}

// showPlace shows a queued asker their place in line under the answer's thread (Options.Queue), or,
// when it cannot be shown there (no thread, no token at once, statuses refused, the call failed),
// tells them privately: nobody waits without a sign. It runs in the answer's goroutine before the
// answer waits for its place, so the answer's own "is thinking…" never lands before it and is
// overwritten. The private note goes in a goroutine of its own, out of the answer's way, within the
// notices' time limit: a burst of questions queues more notes than Slack's budgets serve in
// seconds, and those beyond are not told their place (their answers start in their turn). It
// reports whether the status is shown.
func (b *Bot) showPlace(req *route.Request, place int, log *zap.Logger) bool {
	rr := req.Reply
	if b.opt.Queue != nil && rr.ThreadTS != "" {
		ctx, cancel := context.WithTimeout(b.closing, noticeTimeout)
		shown := b.opt.Queue.ShowQueued(ctx, rr.Channel, rr.ThreadTS, place)
		cancel()
		if shown {
			log.Debug("place in line shown in the thread's status", zap.Int("place", place))
			return true
		}
	}
	// Where say would have told it (a click's or a command's request names the place).
	b.tasks.Go(func() { b.notices.tell(req.Channel, req.User, req.ThreadTS, queuedText(place), log) })
	return false
}

// answer waits for the thread's turn and a place (place: the one taken at arrival; nil: take one
// after the turn), and runs the reply; it frees the place (and the answer leaves the admitted
// count: leave) once the reply is done with the model, at the latest before returning, and the
// caller the thread's turn. started is when it started; ran is false when shutdown came first.
func (b *Bot) answer(work context.Context, h route.Handler, req *route.Request, key string, prev <-chan struct{}, place *ticket, leave func(), log *zap.Logger) (started time.Time, ran bool, err error) {
	if prev != nil {
		select {
		case <-prev:
		case <-work.Done(): // shutting down: neither answer will start, so their order no longer matters
		}
	}
	if place == nil {
		place = b.slots.join()
	}
	if err := place.wait(work); err != nil {
		return time.Now(), false, nil
	}
	if context.Cause(work) != nil { // a place came as the shutdown did: the answer is not started
		b.slots.release()
		return time.Now(), false, nil
	}
	// The place bounds the model requests in flight: it is freed once the answer is done with the
	// model (its last Slack writes, paced by the budgets, can take a while under load), or at the end.
	free := sync.OnceFunc(func() { b.slots.release(); leave() })
	defer free()
	started = time.Now()
	rr := req.Reply
	rr.ModelDone = free
	if !b.replicas.claim(work, req, log) {
		return started, true, errDuplicate
	}
	release, err := b.replicas.lease(work, key, log)
	if err != nil {
		return started, false, nil // shutting down while another replica answered in the thread
	}
	defer release()
	ctx, cancel := context.WithCancelCause(work)
	defer cancel(nil)
	defer b.replicas.holdLease(ctx, key, log)()
	endRecord := b.replicas.journal(ctx, rr, log)
	b.active.set(key, activeReply{user: rr.User, ts: rr.TS, cancel: cancel})
	err = run(ctx, h, req)
	b.active.set(key, activeReply{})
	endRecord(err)
	return started, true, err
}

// errDuplicate ends an answer that another replica (or this one before a restart) gives already.
var errDuplicate = errors.New("answered by another replica")

// errPanic reports a handler that panicked: one bad message must not take the bot down.
var errPanic = errors.New("handler panicked")

// recoverAs turns a panic of the calling function into *err (with the stack, for the log).
func recoverAs(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %v\n%s", errPanic, r, debug.Stack())
	}
}

// threadKey names a thread for per-thread ordering and StopReply ("" threadTS: a top-level DM).
func threadKey(channel, threadTS string) string { return channel + "/" + threadTS }

// StopReply cancels the answer being written in a thread with handlers.ErrStopped (the reply
// keeps its text so far, marked as stopped), if user is the person who asked. It reports whether
// an answer was stopped; ErrNotAsker when user may not stop it. For a Stop button: one answer
// runs per thread at a time, so the thread names it. Safe for concurrent use.
func (b *Bot) StopReply(channel, threadTS, user string) (bool, error) {
	return b.active.stop(channel, threadTS, "", user)
}

// finished logs the end of a piece of work, once.
func (h Hooks) finished(kind string, err error, read, started time.Time, log *zap.Logger) {
	fields := []zap.Field{zap.String("kind", kind), zap.Duration("waited", started.Sub(read)), zap.Duration("took", time.Since(started))}
	switch {
	case err == nil:
		log.Info("done", fields...)
	case errors.Is(err, handlers.ErrIgnored) || errors.Is(err, errDuplicate):
		log.Debug("nothing to answer", append(fields, zap.Error(err))...)
	case errors.Is(err, handlers.ErrShutdown) || errors.Is(err, handlers.ErrStopped):
		log.Info("interrupted", append(fields, zap.Error(err))...)
	default:
		log.Error("failed", append(fields, zap.Error(err))...)
	}
	if h.Done != nil {
		h.Done(kind, err, time.Since(started))
	}
}

// queuedText is what an asker is told when their question waits for a place, n-th in line.
func queuedText(n int) string { return fmt.Sprintf(queuedFormat, n) }

// tellLater is tell in a goroutine of the bot's, started once the envelopes of the burst are acked.
func (b *Bot) tellLater(channel, user, threadTS string, log *zap.Logger) func(string) {
	return func(text string) {
		if text != "" {
			b.held.later(func() { b.notices.tell(channel, user, threadTS, text, log) })
		}
	}
}

// slashCommand acks a slash command with its route's answer and starts its work.
func (b *Bot) slashCommand(work context.Context, evt socketmode.Event, read time.Time, log *zap.Logger) {
	cmd, ok := evt.Data.(slack.SlashCommand)
	if !ok {
		b.ack(evt.Request, nil, read, log)
		return
	}
	log = log.With(zap.String("command", cmd.Command), zap.String("channel", cmd.ChannelID), zap.String("user", cmd.UserID))
	if b.seen.envelopes.add(evt.Request.EnvelopeID, read) {
		b.ack(evt.Request, nil, read, log)
		b.opt.Hooks.duplicate("envelope", log)
		return
	}
	req := &route.Request{Kind: route.Command, Name: cmd.Command, Channel: cmd.ChannelID, User: cmd.UserID,
		Team: cmd.TeamID, Text: cmd.Text, ResponseURL: cmd.ResponseURL, TriggerID: cmd.TriggerID}
	b.dispatch(work, req, read, log, func(text string) {
		var payload any
		if text != "" {
			payload = ephemeral(text)
		}
		b.ack(evt.Request, payload, read, log)
	})
}

// interactive routes a click or a shortcut (already acked) to its route: a block action by its
// action_id, a shortcut by its callback_id. What its route says is told privately to the person.
func (b *Bot) interactive(work context.Context, evt socketmode.Event, read time.Time, log *zap.Logger) {
	cb, ok := evt.Data.(slack.InteractionCallback)
	if !ok {
		log.Debug("interactive envelope ignored")
		return
	}
	channel := cmp.Or(cb.Channel.ID, cb.Container.ChannelID)
	log = log.With(zap.String("interaction", string(cb.Type)), zap.String("channel", channel), zap.String("user", cb.User.ID))
	base := route.Request{Channel: channel, User: cb.User.ID, Team: cmp.Or(cb.User.TeamID, cb.Team.ID), UserTeam: cb.User.TeamID,
		ResponseURL: cb.ResponseURL, TriggerID: cb.TriggerID}
	var req *route.Request
	switch cb.Type {
	case slack.InteractionTypeBlockActions:
		for _, a := range cb.ActionCallback.BlockActions {
			if b.routes.Has(route.Action, a.ActionID) {
				r := base
				r.Kind, r.Name, r.Text = route.Action, a.ActionID, a.Value
				r.ThreadTS = cmp.Or(cb.Container.ThreadTs, cb.Message.ThreadTimestamp)
				r.MessageTS = cmp.Or(cb.Container.MessageTs, cb.Message.Timestamp)
				req, log = &r, log.With(zap.String("action_id", a.ActionID))
				break
			}
		}
	case slack.InteractionTypeMessageAction, slack.InteractionTypeShortcut:
		r := base
		r.Kind, r.Name, r.Text = route.Shortcut, cb.CallbackID, cb.Message.Text
		r.ThreadTS, r.MessageTS = cb.Message.ThreadTimestamp, cb.Message.Timestamp
		req, log = &r, log.With(zap.String("callback_id", cb.CallbackID))
	case slack.InteractionTypeViewSubmission:
		req = fromView(base, cb)
		log = log.With(zap.String("callback_id", cb.View.CallbackID))
	}
	if req == nil {
		log.Debug("interactive envelope ignored")
		return
	}
	if req.Channel == "" || req.User == "" {
		log.Warn("interaction without channel or user")
		return
	}
	b.dispatch(work, req, read, log, b.tellLater(req.Channel, req.User, req.ThreadTS, log))
}

// fromView turns a modal's submission into a request at the place the modal belongs (its
// private_metadata, route.ViewPlace), or nil for a modal that is none of the bot's.
func fromView(base route.Request, cb slack.InteractionCallback) *route.Request {
	place, ok := route.ParseViewPlace(cb.View.PrivateMetadata)
	if !ok {
		return nil
	}
	r := base
	r.Kind, r.Name, r.Channel = route.View, cb.View.CallbackID, place.Channel
	r.ThreadTS, r.MessageTS, r.Text = place.ThreadTS, place.MessageTS, place.Text
	r.Values = map[string]string{}
	if cb.View.State == nil {
		return &r
	}
	for _, actions := range cb.View.State.Values {
		for id, a := range actions {
			r.Values[id] = a.Value
		}
	}
	return &r
}

// ephemeral is a slash command ack payload shown only to the person who typed the command.
func ephemeral(text string) map[string]any {
	return map[string]any{"response_type": "ephemeral", "text": text}
}
