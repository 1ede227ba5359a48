package handlers

import (
	"context"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/llm"
)

// ThreadSummaries make and keep the summaries of long threads' oldest parts (threads.Summaries):
// when a thread no longer fits the budget, the request carries the summary of what convo.Build
// left out and the recent messages in full.
type ThreadSummaries interface {
	Summary(ctx context.Context, key string, earlier []slack.Message, req llm.ChatRequest) (convo.Summary, error)
}

// withSummary builds the request again with a summary of what the first Build left out, when the
// thread is too long and Summaries are on; when the summary cannot be had, res stays the cut.
func (a *contextRead) withSummary(ctx context.Context, res convo.Result, thread []slack.Message, trigger slack.Message, names convo.Names, opt convo.Options) convo.Result {
	s := a.r.opt.Summaries
	if s == nil || len(res.Earlier) == 0 {
		return res
	}
	req := llm.ChatRequest{Model: a.model, Messages: convo.SummaryRequest(res.Earlier, names, opt)}
	sum, err := s.Summary(ctx, a.req.Channel+"/"+a.threadTS, res.Earlier, req)
	if err != nil {
		a.log.Warn("thread summary failed: the oldest messages are left out", zap.Error(err))
		return res
	}
	opt.Summary = sum
	return convo.Build(thread, trigger, names, opt)
}
