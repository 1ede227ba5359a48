package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slack-go/slack"
)

// Roster lists the workspace's people (users.list), for access.Members to place them before they
// ask (access.Roster).
type Roster struct {
	c   *slack.Client
	gap time.Duration // between pages
}

// rosterPage is how many people a users.list page asks for (Slack recommends no more than 200),
// and rosterGap the wait between pages: users.list is Tier 2, about 20 calls a minute.
const (
	rosterPage = 200
	rosterGap  = 3 * time.Second
)

// NewRoster returns a Roster calling Slack with c.
func NewRoster(c *slack.Client) *Roster { return &Roster{c: c, gap: rosterGap} }

// ListUsers calls each with every page of the workspace's people, one page every rosterGap (a 429
// waits its Retry-After, then asks for the same page again), until the last page, ctx's end, or
// each returns false.
func (r *Roster) ListUsers(ctx context.Context, each func([]slack.User) bool) error {
	p := r.c.GetUsersPaginated(slack.GetUsersOptionLimit(rosterPage))
	for {
		next, err := p.Next(ctx)
		if next.Done(err) {
			return nil
		}
		wait := r.gap
		var rl *slack.RateLimitedError
		switch {
		case errors.As(err, &rl):
			wait = max(rl.RetryAfter, wait)
		case err != nil:
			return fmt.Errorf("users.list: %w", err)
		default:
			if !each(next.Users) || next.Cursor == "" {
				return nil
			}
			p = next
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
