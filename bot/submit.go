package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmbot/llmbot/route"
)

// ErrNotRunning is returned by Submit when the loop does not run (it has stopped, or never ran).
var ErrNotRunning = errors.New("bot: not running")

// Submit hands the loop a request the bot makes itself, on behalf of req.User (a scheduled prompt,
// as its creator): it is dispatched as if Slack had sent it, through the route's access rules and
// metrics, the queue for a place and, for an answer, its thread's turn and the replicas' claims.
// It returns once the loop has taken it, or ctx ends, or the loop has stopped.
func (b *Bot) Submit(ctx context.Context, req *route.Request) error {
	select {
	case b.submitted <- req:
		return nil
	case <-b.ended:
		return fmt.Errorf("submit %s: %w", req.Name, ErrNotRunning)
	case <-ctx.Done():
		return fmt.Errorf("submit %s: %w", req.Name, context.Cause(ctx))
	}
}
