package handlers

import (
	"context"

	"github.com/llmbot/llmbot/route"
)

// The handlers' use cases as route handlers: what each route runs, registered once in the wiring.

// Answerer answers a message in its thread (*Replies).
type Answerer interface {
	Reply(ctx context.Context, req route.ReplyRequest) error
}

// Handler serves route.MessageRoute with r (ReplyHandler, with r's Triage).
func (r *Replies) Handler() route.Handler { return ReplyHandler(r, r.Triage) }

// RegenerateHandler serves route.ActionRegenerate with r (see the package function).
func (r *Replies) RegenerateHandler() route.Handler { return RegenerateHandler(r) }

// ReplyHandler serves route.MessageRoute: mentions, DMs and thread follow-ups are answered in their
// thread by a. triage says, without I/O, whether a message runs at all, and whether it is quiet
// when the bot cannot run it (a follow-up that may be people talking among themselves: nobody is
// told); nil: every message runs, and follow-ups are quiet.
func ReplyHandler(a Answerer, triage func(route.ReplyRequest) (run, quiet bool)) route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			if req.Reply == nil {
				return route.Decision{}
			}
			if triage == nil {
				return route.Decision{Run: true, Quiet: req.Reply.FollowUp}
			}
			run, quiet := triage(*req.Reply)
			return route.Decision{Run: run, Quiet: quiet}
		},
		RunFunc: func(ctx context.Context, req *route.Request) error { return a.Reply(ctx, *req.Reply) },
	}
}

// RegenerateHandler serves route.ActionRegenerate: the person who pressed it asks the question of the
// button's route.ReplyRef again, and the new answer is written in place of the answer the button is on
// (route.ReplyRequest.Replace), in the thread's turn like any answer; on what a task wrote (a
// thread's summary) the task is done again. A value that is not a route.ReplyRef of this bot's is
// ignored.
func RegenerateHandler(a Answerer) route.Handler {
	return route.Funcs{
		AcceptFunc: func(req *route.Request) route.Decision {
			ref, err := route.ParseReplyRef(req.Text)
			if err != nil {
				return route.Decision{}
			}
			req.Reply = &route.ReplyRequest{Channel: req.Channel, ChannelType: route.ChannelType(req.Channel),
				User: req.User, Team: req.Team, TS: ref.TS, ThreadTS: ref.ThreadTS, Regenerate: true, Replace: req.MessageTS,
				Task: ref.Task}
			return route.Decision{Run: true}
		},
		RunFunc: func(ctx context.Context, req *route.Request) error { return a.Reply(ctx, *req.Reply) },
	}
}
