package access

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/slack-go/slack"
)

// The values of EXTERNAL_USERS and GUEST_USERS.
const (
	Refused   = "refused" // told privately that the bot is not for them, and not served
	AsMembers = "members" // served as the workspace's members are (the same lists and quota)
)

// Directory looks a person up in Slack (users.info; *bot.SlackAPI). It does not cache: Members
// does.
type Directory interface {
	UserInfo(ctx context.Context, user string) (*slack.User, error)
}

// Budget is a share of Slack's rate limit for users.info (*pace.Bucket).
type Budget interface {
	Wait(ctx context.Context) error
	Throttled(retryAfter time.Duration)
}

// Standing is where a person stands to the workspace the bot is installed in.
type Standing int

// The standings.
const (
	Member   Standing = iota + 1 // of the workspace (or of its Enterprise Grid org)
	Guest                        // a multi- or single-channel guest of the workspace
	Outsider                     // of another organisation, in a Slack Connect channel or DM
)

// MembersOptions configure Members.
type MembersOptions struct {
	// Team is the workspace the bot is installed in and Enterprise its Enterprise Grid org ("":
	// none), both from auth.test. Workspace is its name, for the note outsiders get.
	Team, Enterprise, Workspace string
	External                    string // EXTERNAL_USERS: Refused or AsMembers ("": Refused)
	Guests                      string // GUEST_USERS: AsMembers or Refused ("": AsMembers)
	// Directory answers for people the request alone does not place. Nil: nobody is looked up,
	// and only what the request says is known.
	Directory Directory
	// Budget, when set, paces the look-ups with the bot's other users.info calls (the look-up
	// budget: a 429 pauses them all). Nil: not paced.
	Budget Budget
	TTL    time.Duration    // how long a look-up is trusted; default 1 h
	Max    int              // people remembered at most; default 10,000
	Now    func() time.Time // default time.Now
}

// Members tells the workspace's members from its guests and from people of other organisations
// (Slack Connect), and decides, by EXTERNAL_USERS and GUEST_USERS, whether each may use the bot.
//
// A person is placed, without I/O, by what the request says of them when it says enough: someone
// whose request names a team other than the workspace's, in a workspace outside any Enterprise
// Grid org, is an outsider. Otherwise (the request names the workspace's own team, which Slack
// also puts in payloads that say nothing of the person, or the workspace is part of an org whose
// other workspaces are not outsiders) they are looked up with users.info, and what it says is
// kept for TTL. A look-up that fails lets the person in when their request named the workspace's
// team (a Slack outage must not lock everyone out, and such a request comes from a member as far
// as anything tells), and refuses them with a "could not check" note when it named another team.
//
// Only team and enterprise ids and the guest and stranger flags are kept, never names or
// profiles. Safe for concurrent use.
type Members struct {
	opt MembersOptions

	mu     sync.Mutex
	people map[string]known
}

// known is what a look-up said of a person, until when.
type known struct {
	standing Standing
	until    time.Time
}

// NewMembers returns Members for opt, or an error naming a value of EXTERNAL_USERS or
// GUEST_USERS that is neither refused nor members.
func NewMembers(opt MembersOptions) (*Members, error) {
	opt.External = cmp.Or(opt.External, Refused)
	opt.Guests = cmp.Or(opt.Guests, AsMembers)
	for _, s := range []struct{ name, value string }{{"EXTERNAL_USERS", opt.External}, {"GUEST_USERS", opt.Guests}} {
		if s.value != Refused && s.value != AsMembers {
			return nil, fmt.Errorf("%s: %q is neither %s nor %s", s.name, s.value, Refused, AsMembers)
		}
	}
	opt.TTL = cmp.Or(opt.TTL, time.Hour)
	opt.Max = cmp.Or(opt.Max, 10000)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Members{opt: opt, people: map[string]known{}}, nil
}

// The reasons of refusals by standing (see Reason).
const (
	ReasonExternal  Reason = "external_user" // of another organisation, with EXTERNAL_USERS=refused
	ReasonGuest     Reason = "guest"         // a guest, with GUEST_USERS=refused
	ReasonUnchecked Reason = "unchecked"     // named another team, and users.info could not say more
)

// open reports whether nobody is refused for their standing: then nobody is looked up.
func (m *Members) open() bool { return m.opt.External == AsMembers && m.opt.Guests == AsMembers }

// Check decides, without I/O, whether user, whose request named team ("": none), may use the
// bot for their standing; known is false when only a look-up can tell (Verify). userTeam is the
// team Slack named as the person's own ("": not said): this workspace's, the person is a member or
// a guest, and with guests served as members nobody needs looking up (a burst of new people is not
// held behind users.info's budget).
func (m *Members) Check(user, team, userTeam string) (d Decision, known bool) {
	if m.open() || userTeam != "" && userTeam == m.opt.Team && m.opt.Guests == AsMembers {
		return allow, true
	}
	if s, ok := m.remembered(user); ok {
		return m.decide(s), true
	}
	if m.otherTeam(team) && m.opt.Enterprise == "" {
		return m.decide(Outsider), true
	}
	return Decision{}, false
}

// Verify decides as Check does, looking user up when Check cannot tell. ctx bounds the look-up.
// err is the look-up's failure, for the caller to log; d is then decided as Members says.
func (m *Members) Verify(ctx context.Context, user, team, userTeam string) (d Decision, err error) {
	if d, ok := m.Check(user, team, userTeam); ok {
		return d, nil
	}
	if m.opt.Directory == nil {
		return m.unchecked(team), nil
	}
	u, err := m.lookUp(ctx, user)
	if err != nil {
		return m.unchecked(team), fmt.Errorf("look up %s: %w", user, err)
	}
	s := m.standingOf(u)
	m.remember(user, s)
	return m.decide(s), nil
}

// lookUp calls users.info at its turn in the budget; a 429 pauses the budget for everyone.
func (m *Members) lookUp(ctx context.Context, user string) (*slack.User, error) {
	b := m.opt.Budget
	if b == nil {
		return m.opt.Directory.UserInfo(ctx, user)
	}
	if err := b.Wait(ctx); err != nil {
		return nil, err
	}
	u, err := m.opt.Directory.UserInfo(ctx, user)
	var rl *slack.RateLimitedError
	if errors.As(err, &rl) {
		b.Throttled(rl.RetryAfter)
	}
	return u, err
}

// unchecked is the decision for someone nobody could look up: refused when their request named
// another team, or when guests are refused (a guest's requests name the workspace as a member's do:
// only the look-up tells them apart); else let in, so that a users.info outage locks no member out.
func (m *Members) unchecked(team string) Decision {
	if m.otherTeam(team) || m.opt.Guests == Refused {
		return Decision{Reason: ReasonUnchecked, Message: fmt.Sprintf(
			"Sorry, I couldn't check that you're a member of %s just now. Please try again in a minute.", m.workspace())}
	}
	return allow
}

func (m *Members) otherTeam(team string) bool { return team != "" && team != m.opt.Team }

func (m *Members) workspace() string { return cmp.Or(m.opt.Workspace, "this workspace") }

// standingOf places a user object. In an Enterprise Grid org, people of its other workspaces are
// members whatever else users.info says; anyone else of another team, or marked is_stranger (of a
// workspace other than the token's), is an outsider.
func (m *Members) standingOf(u *slack.User) Standing {
	org := m.opt.Enterprise != "" && u.Enterprise.EnterpriseID == m.opt.Enterprise
	switch {
	case !org && (u.IsStranger || u.TeamID != "" && u.TeamID != m.opt.Team):
		return Outsider
	case u.IsRestricted || u.IsUltraRestricted:
		return Guest
	}
	return Member
}

// decide applies EXTERNAL_USERS and GUEST_USERS to a standing.
func (m *Members) decide(s Standing) Decision {
	switch {
	case s == Outsider && m.opt.External == Refused:
		return Decision{Reason: ReasonExternal, Message: fmt.Sprintf(
			"Sorry, I only answer people of %s; people of other organisations in shared channels can't use me here.", m.workspace())}
	case s == Guest && m.opt.Guests == Refused:
		return Decision{Reason: ReasonGuest, Message: fmt.Sprintf(
			"Sorry, I'm not enabled for guests of %s. If you need me, ask the people who run me there.", m.workspace())}
	}
	return allow
}

func (m *Members) remembered(user string) (Standing, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.people[user]
	if !ok || !m.opt.Now().Before(k.until) {
		return 0, false
	}
	return k.standing, true
}

// remember keeps s for user until the TTL is over. At the bound, expired people go first, then
// anyone: a forgotten person is only looked up again.
func (m *Members) remember(user string, s Standing) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.opt.Now()
	if _, ok := m.people[user]; !ok && len(m.people) >= m.opt.Max {
		for id, k := range m.people {
			if !now.Before(k.until) {
				delete(m.people, id)
			}
		}
		for id := range m.people {
			if len(m.people) < m.opt.Max {
				break
			}
			delete(m.people, id)
		}
	}
	m.people[user] = known{standing: s, until: now.Add(m.opt.TTL)}
}
