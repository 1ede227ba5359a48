package schedule

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"
)

// Outcomes of an occurrence, as Hooks.Ran names them.
const (
	OutcomeOK      = "ok"      // its run was started in its channel
	OutcomeFailed  = "failed"  // its run could not start; the creator was told privately
	OutcomeSkipped = "skipped" // missed by more than the catch-up window while no replica ran
)

// Claims is the part of the shared state that says who is first (state's Keys).
type Claims interface {
	Claim(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// Asker starts the run of one occurrence: sc's prompt asked in its channel as its creator (their
// access and budgets), answered as a new message there. It returns once the run has started or could
// not; what goes wrong later is the answer's to tell, as for any question.
type Asker interface {
	Ask(ctx context.Context, sc Schedule, at time.Time) error
}

// Teller tells a person something privately in a channel.
type Teller interface {
	Tell(ctx context.Context, channel, user, text string) error
}

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	// CatchUp is how late an occurrence may still run: one missed while no replica ran runs once when
	// one comes back within it, and is skipped with a log line after it.
	CatchUp time.Duration
	// Poll bounds how long the runner sleeps, so schedules added on other replicas are seen (default 20s).
	Poll time.Duration
	// Ran, when set, is called once per occurrence handled here, with its outcome.
	Ran func(outcome string)
}

// askTimeout bounds one occurrence's start (a post and a hand-over to the answer path).
const askTimeout = 30 * time.Second

// Runner runs the schedules' occurrences.
type Runner struct {
	s      *Schedules
	claims Claims
	ask    Asker
	tell   Teller
	log    *zap.Logger
	opt    RunnerOptions
	// whens are the schedules' parsed times, by their text, kept from one tick to the next for the
	// schedules still there (LoadLocation reads a file each time). Only Run's goroutine touches it.
	whens map[string]When
}

// NewRunner returns a Runner of s's schedules.
func NewRunner(s *Schedules, claims Claims, ask Asker, tell Teller, log *zap.Logger, opt RunnerOptions) *Runner {
	if opt.Poll <= 0 {
		opt.Poll = 20 * time.Second
	}
	if opt.Ran == nil {
		opt.Ran = func(string) {}
	}
	return &Runner{s: s, claims: claims, ask: ask, tell: tell, log: log, opt: opt}
}

// Run runs the occurrences as they come until ctx ends, then returns nil. It sleeps until the next
// occurrence of any schedule, at most Poll.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := time.Now()
		next := r.Tick(ctx, now)
		t.Reset(max(next.Sub(time.Now()), time.Millisecond))
	}
}

// Tick handles every occurrence due at now and returns when the next one is (at most now + Poll). Run
// calls it; one Runner's ticks must not overlap.
func (r *Runner) Tick(ctx context.Context, now time.Time) time.Time {
	next := now.Add(r.opt.Poll)
	all, err := r.s.all(ctx)
	if err != nil {
		r.log.Warn("schedule: reading the schedules", zap.Error(err))
		return next
	}
	lasts, err := r.s.lasts(ctx)
	if err != nil {
		r.log.Warn("schedule: reading their last runs", zap.Error(err))
		return next
	}
	whens := make(map[string]When, len(all))
	for _, sc := range all {
		w, ok := r.whens[sc.When]
		if !ok {
			if w, err = Parse(sc.When); err != nil {
				continue // Add wrote it parsed; a zone the time zone database no longer has never runs
			}
		}
		whens[sc.When] = w
		if n := r.due(ctx, sc, w, lasts[sc.ID], now); !n.IsZero() && n.Before(next) {
			next = n
		}
	}
	r.whens = whens
	r.log.Debug("schedule: ticked", zap.Int("schedules", len(all)), zap.Time("next", next))
	return next
}

// due handles sc's occurrences (at w) after last (zero: none handled yet) up to now and returns its
// next one.
func (r *Runner) due(ctx context.Context, sc Schedule, w When, last, now time.Time) time.Time {
	from := sc.Created
	if last.After(from) {
		from = last
	}
	occ := w.Next(from)
	if occ.After(now) {
		return occ
	}
	// Occurrences older than the catch-up window are skipped together: one claim, one log line.
	handled := from
	if now.Sub(occ) > r.opt.CatchUp {
		skipped, lastSkipped := 0, occ
		for ; !occ.After(now) && now.Sub(occ) > r.opt.CatchUp; occ = w.Next(occ) {
			skipped, lastSkipped = skipped+1, occ
		}
		if !r.claimed(ctx, "skip", sc.ID, from) {
			return occ
		}
		r.skipped(sc, skipped, lastSkipped)
		handled = lastSkipped
	}
	for ; !occ.After(now); occ = w.Next(occ) {
		if !r.fire(ctx, sc, occ) {
			break
		}
		handled = occ
	}
	if handled.After(from) {
		if err := r.s.setLast(ctx, sc.ID, handled); err != nil {
			r.log.Warn("schedule: writing its last run", zap.String("schedule", sc.ID), zap.Error(err))
		}
	}
	return occ
}

func (r *Runner) skipped(sc Schedule, n int, lastSkipped time.Time) {
	r.log.Warn("schedule: occurrences missed while no replica ran, later than the catch-up window, skipped",
		zap.String("schedule", sc.ID), zap.String("channel", sc.Channel), zap.Int("skipped", n),
		zap.Time("last_skipped", lastSkipped), zap.Duration("catch_up", r.opt.CatchUp))
	for range n {
		r.opt.Ran(OutcomeSkipped)
	}
}

// claimed claims what of sc at t for this replica: false when another replica has it, or the claim
// failed (then a later tick tries again).
func (r *Runner) claimed(ctx context.Context, what, id string, t time.Time) bool {
	// The claim outlives the window in which any replica could still take the occurrence for due.
	first, err := r.claims.Claim(ctx, claimKey(what, id, t), r.opt.CatchUp+time.Hour)
	if err != nil {
		r.log.Warn("schedule: claiming an occurrence", zap.String("schedule", id), zap.Error(err))
		return false
	}
	return first
}

// fire runs sc's occurrence at, unless another replica does: false when it could not be claimed
// (it is tried again at the next tick).
func (r *Runner) fire(ctx context.Context, sc Schedule, at time.Time) bool {
	first, err := r.claims.Claim(ctx, claimKey("run", sc.ID, at), r.opt.CatchUp+time.Hour)
	if err != nil {
		r.log.Warn("schedule: claiming an occurrence", zap.String("schedule", sc.ID), zap.Error(err))
		return false
	}
	if !first {
		r.log.Debug("schedule: occurrence taken by another replica", zap.String("schedule", sc.ID), zap.Time("occurrence", at))
		return true
	}
	// Deleted since it was listed: nothing runs.
	if _, ok, err := r.s.rec.Get(ctx, collSchedules, sc.ID); err == nil && !ok {
		return true
	}
	actx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	log := r.log.With(zap.String("schedule", sc.ID), zap.String("channel", sc.Channel), zap.String("user", sc.Creator), zap.Time("occurrence", at))
	if err := r.ask.Ask(actx, sc, at); err != nil {
		log.Error("schedule: run failed", zap.Error(err))
		r.opt.Ran(OutcomeFailed)
		text := fmt.Sprintf("Your scheduled prompt `%s` (%s) could not run in <#%s> this time.", sc.ID, sc.When, sc.Channel)
		if why, ok := IsRefusal(err); ok {
			text += " " + why
		}
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
		defer cancel()
		if err := r.tell.Tell(tctx, sc.Channel, sc.Creator, text); err != nil {
			log.Warn("schedule: telling the creator that a run failed", zap.Error(err))
		}
		return true
	}
	log.Info("schedule: run started")
	r.opt.Ran(OutcomeOK)
	return true
}

// claimKey names the claim of what ("run", "skip") of schedule id at t, the same on every replica.
func claimKey(what, id string, t time.Time) string {
	return "schedule:" + what + ":" + id + ":" + strconv.FormatInt(t.Unix(), 10)
}
