package access

import (
	"context"

	"github.com/slack-go/slack"
)

// Roster lists the workspace's people a page at a time (users.list; *bot.Roster), calling each with
// every page until it returns false.
type Roster interface {
	ListUsers(ctx context.Context, each func([]slack.User) bool) error
}

// Preload places the workspace's people before they ask, from one listing of them (users.list), as
// a look-up of each would (kept for TTL): a burst of people new to the bot then waits for no turn
// in users.info's budget (Tier 4, 100 a minute: 15 people in 3 s, where one users.list page holds
// 200). Someone the listing leaves out (a person of another organisation, someone who joined
// since) is looked up when they ask, as before. Nothing is listed when nobody is looked up
// (EXTERNAL_USERS and GUEST_USERS both members), and the listing stops once Max people are
// known. It returns how many people it placed.
func (m *Members) Preload(ctx context.Context, r Roster) (int, error) {
	if m.open() {
		return 0, nil
	}
	placed := 0
	err := r.ListUsers(ctx, func(users []slack.User) bool {
		for i := range users {
			u := &users[i]
			if u.ID == "" || u.Deleted {
				continue
			}
			if m.full() {
				return false
			}
			m.remember(u.ID, m.standingOf(u))
			placed++
		}
		return true
	})
	return placed, err
}

// full reports whether Max people are known.
func (m *Members) full() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.people) >= m.opt.Max
}
