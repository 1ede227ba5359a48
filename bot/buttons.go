package bot

import (
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
		log.Debug("stop: the answer has already ended")
		return route.Decision{Say: handlers.TextNotRunning}
	}
	log.Info("answer stopped by the person who asked")
	return route.Decision{}
}
