package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/internal/watch"
)

// Times of a Fallback's calls to Redis.
const (
	callTimeout = 500 * time.Millisecond // one call: a Redis slower than this is as good as down
	probeEvery  = time.Second            // PING while degraded
)

// FallbackHooks observe a Fallback (logging is the Fallback's own; hooks are for metrics and /readyz).
// They are called synchronously and must not call the Fallback, but for Degraded.
type FallbackHooks struct {
	// Degraded is called on each change: true when calls go to the local store, false when Redis is back.
	Degraded func(bool)
	// Failed is called for each Redis call that failed, with its operation ("claim", "take", "heartbeat",
	// "ping" for the probe while degraded, "receive" for the inbox, ...).
	Failed func(op string)
}

// Fallback is Redis, served from a local Memory while Redis does not answer: a call that fails (or takes
// longer than half a second) is served by the Memory, and so are the following ones until Run's probe finds
// Redis answering again. It never fails because Redis is down: a duplicate is better than silence.
//
// So that an outage starts from what this replica knew, the claims, marks, counts and pauses it writes to
// Redis are written to the Memory too; the journal's answers stay where they were opened (an answer opened
// during an outage is in the Memory: Get, Orphans and Adopt look there too, AddMessage and CloseAnswer reach
// it). The Memory must have the same self as the Redis. Run the Fallback's Run, not theirs.
type Fallback struct {
	primary *Redis
	local   *Memory
	log     *zap.Logger
	hooks   FallbackHooks

	timeout    time.Duration // fields so tests can change them
	probeEvery time.Duration

	switching sync.Mutex // held through a change and its hook, so hooks see the changes in order
	degraded  atomic.Bool
	streak    atomic.Int32 // the bot's calls that failed in a row (see failuresToDegrade)

	inbox chan []byte // Run's two readers hand messages to Receive, unbuffered: a message waits in its source

	// threads is the thread store over this Fallback (Threads; nil: none), caught up before Redis is
	// used again after an outage.
	threads atomic.Pointer[FallbackThreads]

	mu sync.Mutex
	// late is what is still to be done in Redis to answers closed, abandoned or opened locally while it
	// could not be reached (see CloseAnswer, Abandon, Open), made at the next heartbeat or recovery.
	late map[string]lateOp
}

// NewFallback returns primary backed by local (made with the same self).
func NewFallback(primary *Redis, local *Memory, log *zap.Logger, hooks FallbackHooks) *Fallback {
	if log == nil {
		log = zap.NewNop()
	}
	return &Fallback{
		primary: primary, local: local, log: log, hooks: hooks,
		timeout: callTimeout, probeEvery: probeEvery,
		inbox: make(chan []byte), late: make(map[string]lateOp),
	}
}

// Degrade serves every call from the local store from now on, until Run's probe finds Redis
// answering: for a bot that starts while Redis is down (OpenRedis, then a failed Ping).
func (f *Fallback) Degrade(err error) { f.failed("start", err) }

// Degraded reports whether calls are being served from the local store.
func (f *Fallback) Degraded() bool { return f.degraded.Load() }

// Self is this replica's id.
func (f *Fallback) Self() string { return f.primary.Self() }

// Run keeps this replica alive in Redis and in the local store, probes Redis while degraded (PING every
// second) and switches back when it answers, and reads both inboxes for Receive, until ctx ends. Then it
// removes its liveness and returns nil (or the local store's error, which ends it early). A message read from
// an inbox as Run ends is dropped: this replica is leaving, and its answers are adopted by another.
func (f *Fallback) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var localErr error
	wg.Go(func() {
		if err := f.local.Run(ctx); err != nil {
			localErr = err
			cancel()
		}
	})
	wg.Go(func() { f.readLocal(ctx) })
	wg.Go(func() { f.readRedis(ctx) })
	f.keepAlive(ctx)
	wg.Wait()
	if !f.Degraded() {
		f.primary.leave(ctx)
	}
	return localErr
}

// keepAlive renews the liveness in Redis every heartbeat while healthy, and probes every probeEvery while
// degraded, until ctx ends.
func (f *Fallback) keepAlive(ctx context.Context) {
	tick := time.NewTicker(min(f.probeEvery, f.primary.heartbeat))
	defer tick.Stop()
	var beaten, probed time.Time
	for {
		switch now := time.Now(); {
		case f.Degraded():
			if now.Sub(probed) >= f.probeEvery {
				probed = now
				if f.probe(ctx) {
					beaten = now
					f.catchUp(ctx)
				}
			}
		case now.Sub(beaten) >= f.primary.heartbeat:
			if f.beat(ctx) {
				beaten = now
				f.catchUp(ctx) // those left by a failed call while not degraded (a blip)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// beat renews the liveness in Redis; a failure degrades.
func (f *Fallback) beat(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	err := f.primary.beat(cctx)
	if err != nil && ctx.Err() == nil {
		f.failed("heartbeat", err)
	}
	return err == nil
}

// probe PINGs Redis and, when it answers, renews the liveness there and switches back to it.
func (f *Fallback) probe(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := f.primary.ping(cctx); err != nil {
		if ctx.Err() == nil && f.hooks.Failed != nil {
			f.hooks.Failed("ping")
		}
		return false
	}
	if err := f.primary.beat(cctx); err != nil {
		if ctx.Err() == nil && f.hooks.Failed != nil {
			f.hooks.Failed("heartbeat")
		}
		return false
	}
	if ft := f.threads.Load(); ft != nil && !ft.caughtUp(cctx) {
		return false // its entries may miss what changed meanwhile: not trusted before they are stale
	}
	f.streak.Store(0)
	f.set(false, "", nil)
	return true
}

// failed counts a failed Redis call and degrades.
func (f *Fallback) failed(op string, err error) {
	if f.hooks.Failed != nil {
		f.hooks.Failed(op)
	}
	f.set(true, op, err)
}

// set changes the state, logging and calling the hook once per change.
func (f *Fallback) set(degraded bool, op string, err error) {
	f.switching.Lock()
	defer f.switching.Unlock()
	if f.degraded.Swap(degraded) == degraded {
		return
	}
	if degraded {
		f.log.Warn("state: Redis failed; this replica serves the shared state from its memory until Redis answers",
			zap.String("op", op), zap.Error(err))
	} else {
		f.log.Info("state: Redis answers again; the state is shared again")
	}
	if f.hooks.Degraded != nil {
		f.hooks.Degraded(degraded)
	}
}

// readLocal hands the local store's messages to Receive until ctx ends.
func (f *Fallback) readLocal(ctx context.Context) {
	for {
		msg, err := f.local.Inbox().Receive(ctx)
		if err != nil {
			return
		}
		f.deliver(ctx, msg)
	}
}

// readRedis hands the messages of this replica's Redis inbox to Receive until ctx ends; while degraded it
// waits for the probe.
func (f *Fallback) readRedis(ctx context.Context) {
	for ctx.Err() == nil {
		if f.Degraded() {
			_ = watch.Sleep(ctx, f.probeEvery) // its end is the loop's
			continue
		}
		msg, ok, err := f.primary.Inbox().pop(ctx, f.primary.pollBlock)
		if err != nil {
			if ctx.Err() == nil {
				f.failed("receive", err)
			}
			continue
		}
		if ok {
			f.deliver(ctx, msg)
		}
	}
}

func (f *Fallback) deliver(ctx context.Context, msg []byte) {
	select {
	case f.inbox <- msg:
	case <-ctx.Done():
		f.log.Debug("state: a message for this replica dropped as it stops")
	}
}

// Close closes both stores, once Run has returned.
func (f *Fallback) Close() error { return errors.Join(f.primary.Close(), f.local.Close()) }

// call runs remote on Redis under the call timeout unless degraded; when Redis fails it degrades and serves
// the call with local. Errors that are the caller's (its context, its arguments, ErrNoReplica, ErrFull) pass through.
func call[T any](ctx context.Context, f *Fallback, op string, remote, local func(context.Context) (T, error)) (T, error) {
	if !f.Degraded() {
		rctx, cancel := context.WithTimeout(ctx, f.timeout)
		v, err := remote(rctx)
		cancel()
		if err == nil {
			f.streak.Store(0)
		}
		if err == nil || ctx.Err() != nil || errors.Is(err, errInvalid) || errors.Is(err, ErrNoReplica) || errors.Is(err, ErrFull) {
			return v, err
		}
		f.failedCall(op, err)
	}
	return local(ctx)
}

// failuresToDegrade is how many calls in a row must fail before a replica serves every call from
// its own state: one slow call alone (a blip) must not make it stop seeing the claims and leases
// of the others for a probe's second, where a redelivered event could be answered twice.
const failuresToDegrade = 2

// failedCall is failed for one of the bot's calls (served locally either way).
func (f *Fallback) failedCall(op string, err error) {
	if f.streak.Add(1) < failuresToDegrade {
		if f.hooks.Failed != nil {
			f.hooks.Failed(op)
		}
		return
	}
	f.failed(op, err)
}

// do is call for operations without a result.
func do(ctx context.Context, f *Fallback, op string, remote, local func(context.Context) error) error {
	wrap := func(fn func(context.Context) error) func(context.Context) (struct{}, error) {
		return func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) }
	}
	_, err := call(ctx, f, op, wrap(remote), wrap(local))
	return err
}

// none is the local side of a call whose local part was done already.
func none(context.Context) error { return nil }

// Claim is true the first time key is claimed within ttl.
func (k FallbackKeys) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	f := k.f
	return call(ctx, f, "claim", func(c context.Context) (bool, error) {
		first, err := f.primary.Keys().Claim(c, key, ttl)
		if err == nil {
			_, _ = f.local.Keys().Claim(c, key, ttl)
		}
		return first, err
	}, func(c context.Context) (bool, error) { return f.local.Keys().Claim(c, key, ttl) })
}

// ErrNotShared: Redis did not make or decide a change (it failed, or this replica is degraded), so
// what this process's memory says alone is not what the other replicas see: a claim not decided
// (ClaimShared), a record removed here only, which comes back once Redis answers (FallbackRecords.Delete).
// The caller tries again, or says that it failed.
var ErrNotShared = errors.New("state: not made in the shared store")

// ClaimShared is Claim decided by Redis alone: when Redis fails or this replica is degraded it
// returns ErrNotShared rather than an answer from this process's memory, for a caller that acts on
// what another replica claimed (the check of a hand-over's receipt) and must know when it cannot tell.
func (k FallbackKeys) ClaimShared(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	f := k.f
	if f.Degraded() {
		return false, ErrNotShared
	}
	rctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	first, err := f.primary.Keys().Claim(rctx, key, ttl)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, errInvalid) {
			f.failedCall("claim", err)
		}
		return false, fmt.Errorf("%w: %w", ErrNotShared, err)
	}
	f.streak.Store(0)
	_, _ = f.local.Keys().Claim(ctx, key, ttl)
	return first, nil
}

// Mark sets a flag on key for ttl.
func (k FallbackKeys) Mark(ctx context.Context, key string, ttl time.Duration) error {
	f := k.f
	if err := f.local.Keys().Mark(ctx, key, ttl); err != nil {
		return err
	}
	return do(ctx, f, "mark", func(c context.Context) error { return f.primary.Keys().Mark(c, key, ttl) }, none)
}

// Marked reports whether key's flag is set.
func (k FallbackKeys) Marked(ctx context.Context, key string) (bool, error) {
	f := k.f
	return call(ctx, f, "marked",
		func(c context.Context) (bool, error) { return f.primary.Keys().Marked(c, key) },
		func(c context.Context) (bool, error) { return f.local.Keys().Marked(c, key) })
}

// Add adds delta to counter key and returns its new value; ttl is set when the key is created.
func (k FallbackKeys) Add(ctx context.Context, key string, delta int64, ttl time.Duration) (int64, error) {
	f := k.f
	return call(ctx, f, "add", func(c context.Context) (int64, error) {
		n, err := f.primary.Keys().Add(c, key, delta, ttl)
		if err == nil {
			_, _ = f.local.Keys().Add(c, key, delta, ttl)
		}
		return n, err
	}, func(c context.Context) (int64, error) { return f.local.Keys().Add(c, key, delta, ttl) })
}

// Take takes a token of bucket name if one is there now and returns 0, or returns how long until one will be.
func (k FallbackKeys) Take(ctx context.Context, name string, perMinute float64, burst int) (time.Duration, error) {
	f := k.f
	return call(ctx, f, "take",
		func(c context.Context) (time.Duration, error) {
			return f.primary.Keys().Take(c, name, perMinute, burst)
		},
		func(c context.Context) (time.Duration, error) { return f.local.Keys().Take(c, name, perMinute, burst) })
}

// Pause stops bucket name until until; an earlier pause than the one in force is ignored.
func (k FallbackKeys) Pause(ctx context.Context, name string, until time.Time) error {
	f := k.f
	if err := f.local.Keys().Pause(ctx, name, until); err != nil {
		return err
	}
	return do(ctx, f, "pause", func(c context.Context) error { return f.primary.Keys().Pause(c, name, until) }, none)
}

// Lease takes key for this replica if it is free, its own, or its holder is not alive; it returns the holder.
func (f *Fallback) Lease(ctx context.Context, key string) (string, error) {
	return call(ctx, f, "lease",
		func(c context.Context) (string, error) { return f.primary.Lease(c, key) },
		func(c context.Context) (string, error) { return f.local.Lease(c, key) })
}

// Holder returns the replica holding the lease key, from Redis or else the local store.
func (f *Fallback) Holder(ctx context.Context, key string) (string, error) {
	return call(ctx, f, "holder",
		func(c context.Context) (string, error) { return f.primary.Holder(c, key) },
		func(c context.Context) (string, error) { return f.local.Holder(c, key) })
}

// Release frees key if this replica holds it (in Redis, and in the local store for a lease of an outage).
func (f *Fallback) Release(ctx context.Context, key string) error {
	if err := f.local.Release(ctx, key); err != nil {
		return err
	}
	return do(ctx, f, "release", func(c context.Context) error { return f.primary.Release(c, key) }, none)
}

// Alive reports whether replica is alive (this one always is).
func (f *Fallback) Alive(ctx context.Context, replica string) (bool, error) {
	return call(ctx, f, "alive",
		func(c context.Context) (bool, error) { return f.primary.Alive(c, replica) },
		func(c context.Context) (bool, error) { return f.local.Alive(c, replica) })
}

// Open records a as in progress, owned by this replica.
func (j FallbackAnswers) Open(ctx context.Context, a Answer) error {
	f := j.f
	onRedis := false
	err := do(ctx, f, "open", func(c context.Context) error {
		err := f.primary.Answers().Open(c, a)
		onRedis = err == nil
		return err
	}, func(c context.Context) error { return f.local.Answers().Open(c, a) })
	f.mu.Lock()
	switch {
	case err == nil && !onRedis:
		// The Redis call that failed may have run there all the same (a timeout): that copy would be
		// a second record of the answer, adopted by another replica if this one died. It goes at the
		// next heartbeat (catchUp); the answer lives in the local store.
		f.late[a.ID] = lateClose
	case onRedis:
		delete(f.late, a.ID) // opened again on Redis: an earlier close left to make must not remove it
	}
	f.mu.Unlock()
	if err != nil || !onRedis {
		return err
	}
	// A copy left in the local store by an outage is out of date now.
	return f.local.Answers().CloseAnswer(ctx, a.ID)
}

// AddMessage appends ts to the messages of answer id, once, wherever it is open.
func (j FallbackAnswers) AddMessage(ctx context.Context, id, ts string) error {
	f := j.f
	if err := f.local.Answers().AddMessage(ctx, id, ts); err != nil {
		return err
	}
	return do(ctx, f, "add_message", func(c context.Context) error { return f.primary.Answers().AddMessage(c, id, ts) }, none)
}

// CloseAnswer removes answer id from the journal, wherever it is open. A close that does not reach
// Redis is kept and made again once Redis answers: a record left there would make a finished answer
// look orphaned when this replica leaves, and another would close it again as interrupted.
func (j FallbackAnswers) CloseAnswer(ctx context.Context, id string) error {
	f := j.f
	if err := f.local.Answers().CloseAnswer(ctx, id); err != nil {
		return err
	}
	closed := false
	err := do(ctx, f, "close_answer", func(c context.Context) error {
		err := f.primary.Answers().CloseAnswer(c, id)
		closed = err == nil
		return err
	}, none)
	if !closed {
		f.mu.Lock()
		f.late[id] = lateClose
		f.mu.Unlock()
	}
	return err
}

// lateOp is what is left to do in Redis to an answer (Fallback.late).
type lateOp int

const (
	lateClose   lateOp = iota // CloseAnswer
	lateAbandon               // Abandon
)

// catchUp makes in Redis the closes and hand-overs that did not reach it, now that it answers.
func (f *Fallback) catchUp(ctx context.Context) {
	f.mu.Lock()
	ops := maps.Clone(f.late)
	f.mu.Unlock()
	for id, op := range ops {
		cctx, cancel := context.WithTimeout(ctx, f.timeout)
		var err error
		if op == lateAbandon {
			err = f.primary.Answers().Abandon(cctx, id)
		} else {
			err = f.primary.Answers().CloseAnswer(cctx, id)
		}
		cancel()
		if err != nil {
			return // Redis failed again: the next recovery tries the rest
		}
		f.mu.Lock()
		if f.late[id] == op {
			delete(f.late, id)
		}
		f.mu.Unlock()
	}
}

// found is Get's and Adopt's result, for call.
type found struct {
	a  Answer
	ok bool
}

// Abandon hands answer id over for adoption where it is open: in the local store if it was opened there
// during an outage, else in Redis (once Redis answers, if it cannot be reached now).
func (j FallbackAnswers) Abandon(ctx context.Context, id string) error {
	f := j.f
	if _, ok, err := f.local.Answers().Get(ctx, id); err != nil || ok {
		if err != nil {
			return err
		}
		return f.local.Answers().Abandon(ctx, id)
	}
	done := false
	err := do(ctx, f, "abandon", func(c context.Context) error {
		err := f.primary.Answers().Abandon(c, id)
		done = err == nil
		return err
	}, none)
	if !done {
		f.mu.Lock()
		f.late[id] = lateAbandon
		f.mu.Unlock()
	}
	return err
}

// Get returns open answer id, from Redis or else the local store.
func (j FallbackAnswers) Get(ctx context.Context, id string) (Answer, bool, error) {
	f := j.f
	get := func(s interface {
		Get(context.Context, string) (Answer, bool, error)
	}) func(context.Context) (found, error) {
		return func(c context.Context) (found, error) {
			a, ok, err := s.Get(c, id)
			return found{a, ok}, err
		}
	}
	r, err := call(ctx, f, "get", get(f.primary.Answers()), get(f.local.Answers()))
	if err == nil && !r.ok {
		r, err = get(f.local.Answers())(ctx)
	}
	return r.a, r.ok, err
}

// Orphans returns the open answers whose owner is not alive, from Redis and the local store.
func (j FallbackAnswers) Orphans(ctx context.Context) ([]Answer, error) {
	f := j.f
	shared, err := call(ctx, f, "orphans", f.primary.Answers().Orphans, func(context.Context) ([]Answer, error) { return nil, nil })
	if err != nil {
		return nil, err
	}
	local, err := f.local.Answers().Orphans(ctx)
	if err != nil {
		return nil, err
	}
	return mergeAnswers(shared, local), nil
}

// mergeAnswers is shared and then those of local not in shared, oldest first.
func mergeAnswers(shared, local []Answer) []Answer {
	seen := make(map[string]bool, len(shared))
	for _, a := range shared {
		seen[a.ID] = true
	}
	for _, a := range local {
		if !seen[a.ID] {
			shared = append(shared, a)
		}
	}
	sortAnswers(shared)
	return shared
}

// Adopt makes this replica the owner of orphan id, where it is open: in the local store if it was opened
// there during an outage, else in Redis.
func (j FallbackAnswers) Adopt(ctx context.Context, id string) (Answer, bool, error) {
	f := j.f
	if _, ok, err := f.local.Answers().Get(ctx, id); err != nil || ok {
		if err != nil {
			return Answer{}, false, err
		}
		return f.local.Answers().Adopt(ctx, id)
	}
	adopt := func(s interface {
		Adopt(context.Context, string) (Answer, bool, error)
	}) func(context.Context) (found, error) {
		return func(c context.Context) (found, error) {
			a, ok, err := s.Adopt(c, id)
			return found{a, ok}, err
		}
	}
	r, err := call(ctx, f, "adopt", adopt(f.primary.Answers()), adopt(f.local.Answers()))
	return r.a, r.ok, err
}

// Send queues msg for replica: through Redis, or, while degraded, only to this replica (else ErrNoReplica).
func (i FallbackInbox) Send(ctx context.Context, replica string, msg []byte) error {
	f := i.f
	return do(ctx, f, "send",
		func(c context.Context) error { return f.primary.Inbox().Send(c, replica, msg) },
		func(c context.Context) error { return f.local.Inbox().Send(c, replica, msg) })
}

// Receive returns the next message for this replica from either inbox, waiting until ctx ends. The inboxes
// are read by Run: without it, nothing arrives.
func (i FallbackInbox) Receive(ctx context.Context) ([]byte, error) {
	f := i.f
	select {
	case msg := <-f.inbox:
		return msg, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
