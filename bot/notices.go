package bot

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/route"
)

// notices tell people privately what became of their requests (Notifier), and take a place in line
// shown under a thread down again (Options.Queue), on contexts detached from work and time-boxed.
type notices struct {
	notify Notifier
	queue  QueueStatus
	// closing ends when the grace period does (set by Run before any work starts): notices are
	// bounded by it, so shutdown ends in time even when Slack is slow.
	closing context.Context
}

// tell shows text privately to user in channel (in the thread threadTS), on a context detached
// from work and time-boxed (and ended with the grace period at shutdown): within it the notifier
// waits for its turn in Slack's budget and rides out 429s. Notices are not bounded in number: each
// is short and time-boxed, and nobody who asked is left without a word.
func (n *notices) tell(channel, user, threadTS, text string, log *zap.Logger) {
	if n.notify == nil || text == "" {
		return
	}
	ctx, cancel := context.WithTimeout(n.closing, noticeTimeout)
	defer cancel()
	if err := n.notify.Ephemeral(ctx, channel, user, threadTS, text); err != nil {
		log.Warn("notice not sent", zap.Error(err))
	}
}

// failed tells the person privately that their request failed when its handler panicked (it said
// nothing itself); any other error the handler has told them about.
func (n *notices) failed(err error, channel, user, threadTS string, log *zap.Logger) {
	if errors.Is(err, errPanic) {
		n.tell(channel, user, threadTS, textFailed, log)
	}
}

// clearPlace takes a shown place in line down from the answer's thread.
func (n *notices) clearPlace(rr *route.ReplyRequest) {
	ctx, cancel := context.WithTimeout(n.closing, noticeTimeout)
	defer cancel()
	n.queue.ClearQueued(ctx, rr.Channel, rr.ThreadTS)
}
