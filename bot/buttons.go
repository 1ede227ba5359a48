package bot

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/route"
)

// StopHandler serves the Stop button (handlers.ActionStop): the answer it is on stops when the
// person who asked presses it (StopReply); anyone else, or a click on an answer that has ended, is
// told why privately. It is done at once, in Accept: a Stop never waits for a place, however busy
// the bot is. Register it for handlers.ActionStop.
func (b *Bot) StopHandler() route.Handler {
	return route.Funcs{AcceptFunc: b.acceptStop}
}

func (b *Bot) acceptStop(req *route.Request) route.Decision {
	log := b.log.With(zap.String("channel", req.Channel), zap.String("user", req.User))
	ref, err := handlers.ParseReplyRef(req.Text)
	if err != nil {
		log.Warn("stop click ignored", zap.Error(err))
		return route.Decision{}
	}
	stopped, err := b.stop(req.Channel, ref.ThreadTS, ref.TS, req.User)
	switch {
	case errors.Is(err, ErrNotAsker):
		log.Info("stop refused: not the person who asked")
		return route.Decision{Say: handlers.TextNotAsker}
	case !stopped:
		// Not written here: maybe by another replica, which the click is handed to.
		b.later(func() { b.stopElsewhere(req, route.AnswerID(req.Channel, ref.TS), log) })
		return route.Decision{}
	}
	log.Info("answer stopped by the person who asked")
	return route.Decision{}
}

// stopElsewhere hands a Stop click to the replica writing the answer id, or tells the person the
// answer has ended when none is.
func (b *Bot) stopElsewhere(req *route.Request, id string, log *zap.Logger) {
	b.elsewhere(req, id, handoff{what: "stop", failed: handlers.TextStopFailed, ended: handlers.TextNotRunning}, log)
}

// handoff is what a click handed to another replica is, and what the person is told when it cannot
// be handed over (failed) or nobody has the answer open any more (ended).
type handoff struct{ what, failed, ended string }

// elsewhere hands a click on the answer id (Stop, a tool approval) to the replica writing that answer,
// or tells the person why it could not.
func (b *Bot) elsewhere(req *route.Request, id string, h handoff, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(b.closing, sharedTimeout)
	defer cancel()
	handed, err := b.forward(ctx, req, id)
	switch {
	case err != nil:
		log.Warn(h.what+": could not reach the replica writing the answer", zap.Error(err))
		b.tell(req.Channel, req.User, req.ThreadTS, h.failed, log)
	case handed:
		log.Info(h.what + " handed to the replica writing the answer")
	default:
		log.Debug(h.what + ": the answer has already ended")
		b.tell(req.Channel, req.User, req.ThreadTS, h.ended, log)
	}
}
