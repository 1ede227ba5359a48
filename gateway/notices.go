package gateway

import (
	"context"
	"time"

	"github.com/llmbot/llmbot/pace"
)

// Notices tell people privately (chat.postEphemeral) for the rest of the bot: the loop's busy
// notes, places in line and restart notes (bot.Notifier), and the access guard's refusals. They
// go through the replies' own writer: a turn in the one Ephemerals budget that the replies' private
// notes take from too, and the one 429 loop that pauses that budget for every caller, so the
// process keeps Slack's chat.postEphemeral limit once (and, with Budgets.Share, with its replicas).
type Notices struct{ w Writer }

// NewNotices returns Notices that write with m (*bot.SlackAPI; only its Ephemeral is called) in
// b's Ephemerals budget: give it the Budgets the replies are given (handlers.ReplyOptions.Budgets). A nil
// Ephemerals budget gets a default one of its own.
func NewNotices(m Messenger, b Budgets) *Notices {
	if b.Ephemerals == nil {
		b.Ephemerals = pace.NewBucket(ephemeralsPerMinute*pace.RateMargin, ephemeralsBurst)
	}
	return &Notices{w: Writer{Budgets: Budgets{Ephemerals: b.Ephemerals}, Msgs: m}}
}

// Ephemeral shows text to user alone in channel (in the thread threadTS, "" for none) once its
// turn comes, waiting out 429s until ctx ends: the caller time-boxes it.
func (n *Notices) Ephemeral(ctx context.Context, channel, user, threadTS, text string) error {
	return n.w.Ephemeral(ctx, noticeRetry, time.Time{}, channel, user, threadTS, text)
}
