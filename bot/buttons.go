package bot

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/route"
)

// StopHandler serves the Stop button (route.ActionStop): the answer it is on stops when the
// person who asked presses it (StopReply); anyone else, or a click on an answer that has ended, is
// told why privately. It is done at once, in Accept: a Stop never waits for a place, however busy
// the bot is. Register it for route.ActionStop.
func (b *Bot) StopHandler() route.Handler {
	return route.Funcs{AcceptFunc: b.acceptStop}
}

func (b *Bot) acceptStop(req *route.Request) route.Decision {
	log := b.log.With(zap.String("channel", req.Channel), zap.String("user", req.User))
	ref, err := route.ParseReplyRef(req.Text)
	if err != nil {
		log.Warn("stop click ignored", zap.Error(err))
		return route.Decision{}
	}
	return b.stopAnswer(req, ref.ThreadTS, ref.TS, route.AnswerID(req.Channel, ref.TS), log, func() {
		b.notices.tell(req.Channel, req.User, req.ThreadTS, handlers.TextNotRunning, log)
	})
}

// SessionStopHandler serves Slack's agent_session_stopped event (route.Event): the Stop Slack shows
// on the agent session of a thread while the bot streams an answer there. It is the Stop button
// for the answer running in the session's thread: stopped for the person who asked, handed to the
// replica writing it, refused privately to anyone else. When no replica is writing an answer there,
// the session's status is moved off "processing" instead of a note (Slack leaves that to the app,
// and the person pressed Slack's Stop, not one of ours). sessions may be nil.
//
// Another replica's answer is found by the thread's first message (the question of a mention
// answered in its own thread, or of a message in the agent pane) in the journal, else by the
// holder of the thread (a follow-up's answer).
func (b *Bot) SessionStopHandler(sessions handlers.Sessions) route.Handler {
	return route.Funcs{AcceptFunc: func(req *route.Request) route.Decision {
		log := b.log.With(zap.String("channel", req.Channel), zap.String("thread_ts", req.ThreadTS), zap.String("user", req.User))
		if req.ThreadTS == "" {
			log.Warn("agent session stop without a thread ignored")
			return route.Decision{}
		}
		return b.stopAnswer(req, req.ThreadTS, "", route.AnswerID(req.Channel, req.ThreadTS), log, func() {
			if sessions == nil {
				return
			}
			ctx, cancel := context.WithTimeout(b.closing, sharedTimeout)
			defer cancel()
			if err := sessions.SetSessionStatus(ctx, req.Channel, req.ThreadTS, route.SessionActive); err != nil {
				log.Info("agent session left as it is", zap.Error(err))
			}
		})
	}}
}

// stopAnswer stops the answer to the message ts ("": whichever runs) in the thread threadTS for
// req's person, or hands the stop to the replica writing the answer id; ended runs (in a goroutine
// of the bot's) when no replica is writing it.
func (b *Bot) stopAnswer(req *route.Request, threadTS, ts, id string, log *zap.Logger, ended func()) route.Decision {
	stopped, err := b.active.stop(req.Channel, threadTS, ts, req.User)
	switch {
	case errors.Is(err, ErrNotAsker):
		log.Info("stop refused: not the person who asked")
		return route.Decision{Say: handlers.TextNotAsker}
	case !stopped:
		// Not written here: maybe by another replica, which the stop is handed to.
		b.held.later(func() { b.replicas.stopElsewhere(req, id, log, ended) })
		return route.Decision{}
	}
	log.Info("answer stopped by the person who asked")
	return route.Decision{}
}
