package handlers

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/llm"
)

// Progress as tasks: a natively streamed answer shows its steps as task cards (task_update
// chunks) above its text while nothing else shows: reading the conversation, then waiting for
// the model, with each retry and its reason. An answer written by editing shows none (its
// placeholder says "Thinking…"). Progress is a courtesy: it is sent only when the appends budget
// has a token at once, and a failure is never the answer's.

// The answer's tasks.
const (
	taskRead        = "read"
	taskModel       = "model"
	titleRead       = "Reading the conversation"
	titleModel      = "Waiting for the model"
	progressTimeout = 2 * time.Second
)

// progress shows tasks on the open streamed message, in one call (see above). Called by the
// answer's goroutine before the writer takes the stream, by the model's reader before the model's
// first words (a retry), and by the writer itself: never two at once.
func (s *streamSink) progress(ctx context.Context, tasks ...gateway.Task) {
	a := s.answer
	if len(tasks) == 0 || s.ts == "" || s.state != streamLive || !a.r.paced.TryAppend() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), progressTimeout)
	defer cancel()
	if err := a.r.streamer.AppendTasks(ctx, a.req.Channel, s.ts, tasks); err != nil {
		a.log.Debug("progress not shown", zap.String("task", tasks[0].ID), zap.Error(err))
	}
}

// readTasks is the read task as the answer's reading left it (none when nothing was read), with
// the model task under way after it: one call.
func (a *answer) readTasks() []gateway.Task {
	model := gateway.Task{ID: taskModel, Title: titleModel, Status: gateway.TaskInProgress}
	if a.readStatus == "" {
		return []gateway.Task{model}
	}
	return []gateway.Task{{ID: taskRead, Title: titleRead, Status: a.readStatus}, model}
}

// retried is the model's retry observer (llm.WithRetries): the model task says why it waits.
func retried(s roundSink, ctx context.Context) llm.RetryFunc {
	return func(attempt int, wait time.Duration, err *llm.Error) {
		reason := string(err.Kind)
		if err.Status != 0 {
			reason = fmt.Sprintf("%s, HTTP %d", reason, err.Status)
		}
		s.progress(ctx, gateway.Task{ID: taskModel, Title: titleModel, Status: gateway.TaskInProgress,
			Details: fmt.Sprintf("The model service did not answer (%s): trying again in %s (attempt %d).",
				reason, wait.Round(100*time.Millisecond), attempt+1)})
	}
}

// doneStatus is a finished step's status: complete, or error when err says it failed.
func doneStatus(err error) string {
	if err != nil {
		return gateway.TaskError
	}
	return gateway.TaskComplete
}

// modelDone marks the model task done with status, once.
func (s *streamSink) modelDone(ctx context.Context, status string) {
	if s.modelShown {
		return
	}
	s.modelShown = true
	s.progress(ctx, gateway.Task{ID: taskModel, Title: titleModel, Status: status})
}
