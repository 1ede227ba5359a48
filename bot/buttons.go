package bot

import (
	"context"
	"errors"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/handlers"
)

// button handles a click on one of the bot's own buttons (already acked) and reports whether
// it was one. The rules (see handlers/buttons.go):
//   - Stop stops the answer it is on, only for the person who asked (StopReply); anyone else,
//     or a click on an answer that has ended, gets a short private explanation.
//   - Regenerate is a new request by the person who clicked, handled exactly like a mention:
//     the Replier (with the access Guard around it), the concurrency bound and the thread's
//     one-answer-at-a-time order. It is not deduplicated by message (the question was answered
//     before); the envelope id still guards against redelivery.
//   - "Another one" on an /imagine picture is /imagine again with the same prompt by the person
//     who clicked (access, per-user bound and daily quota apply); what a slash command's ack
//     would say is told privately.
func (b *Bot) button(work context.Context, cb slack.InteractionCallback, a *slack.BlockAction, read time.Time, log *zap.Logger) bool {
	channel := firstNonEmpty(cb.Channel.ID, cb.Container.ChannelID)
	user := cb.User.ID
	team := firstNonEmpty(cb.User.TeamID, cb.Team.ID)
	switch a.ActionID {
	case handlers.ActionStop, handlers.ActionRegenerate, handlers.ActionImagineAgain:
	default:
		return false
	}
	if channel == "" || user == "" {
		log.Warn("button click without channel or user")
		return true
	}
	if a.ActionID == handlers.ActionImagineAgain {
		if b.imagine == nil {
			b.tellClicker(work, channel, user, "", "/imagine is not set up on this bot.", log)
			return true
		}
		ir := handlers.ImagineRequest{Channel: channel, User: user, Team: team, Text: a.Value, ResponseURL: cb.ResponseURL}
		b.startImagine(work, ir, read, log, func(text string) { b.tellClicker(work, channel, user, "", text, log) })
		return true
	}
	ref, err := handlers.ParseReplyRef(a.Value)
	if err != nil {
		log.Warn("button click ignored", zap.Error(err))
		return true
	}
	if a.ActionID == handlers.ActionRegenerate {
		b.startReply(work, handlers.ReplyRequest{Channel: channel, ChannelType: channelType(channel), User: user, Team: team,
			TS: ref.TS, ThreadTS: ref.ThreadTS, Regenerate: true, Replace: firstNonEmpty(cb.Container.MessageTs, cb.Message.Timestamp)}, read, log)
		return true
	}
	stopped, err := b.stop(channel, ref.ThreadTS, ref.TS, user)
	switch {
	case errors.Is(err, ErrNotAsker):
		log.Info("stop refused: not the person who asked")
		b.tellClicker(work, channel, user, ref.ThreadTS, handlers.TextNotAsker, log)
	case !stopped:
		log.Debug("stop: the answer has already ended")
		b.tellClicker(work, channel, user, ref.ThreadTS, handlers.TextNotRunning, log)
	default:
		log.Info("answer stopped by the person who asked")
	}
	return true
}

// tellClicker shows text privately to the person who clicked, in a goroutine of the bot's
// bounded like the clicks (beyond interactiveLimit in flight it is dropped, logged).
func (b *Bot) tellClicker(work context.Context, channel, user, threadTS, text string, log *zap.Logger) {
	if b.notify == nil || text == "" {
		return
	}
	select {
	case b.clicks <- struct{}{}:
	default:
		log.Warn("notice dropped: too many clicks in flight")
		return
	}
	b.later(func() {
		defer func() { <-b.clicks }()
		b.tell(work, handlers.ReplyRequest{Channel: channel, User: user, ThreadTS: threadTS}, text, log)
	})
}
