package handlers

import (
	"errors"
	"time"
)

// When an answer's closing writes must end. An answer that is never cancelled has no deadline: its
// closing writes wait their turn as long as it takes. Once it is cancelled, its deadline is fixed
// once, by closeBy, and every time box of its writes derives from it.

// closeBy is when the closing writes of an answer cancelled with cause at cancelled, whose closing
// writes began at began, must end. At shutdown it counts from the cancellation: the bot's grace
// period is a hard deadline. After a Stop (which has none) it counts from when the closing writes
// begin, if later: an interim call finishing first must not eat the final write's time.
func (r *Replies) closeBy(cause error, cancelled, began time.Time) time.Time {
	if errors.Is(cause, ErrShutdown) {
		return cancelled.Add(min(r.opt.ShutdownTimeout, r.opt.FinalTimeout))
	}
	return later(cancelled, began).Add(r.opt.FinalTimeout)
}

// halfway is the moment halfway from from to to: the share of a deadline one write may take so that
// the write that must follow it still fits.
func halfway(from, to time.Time) time.Time { return from.Add(to.Sub(from) / 2) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
