package access_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/route"
)

// directory is a Directory that answers from a table of users (users.info) and records who was
// looked up; a user not in the table is a failed look-up.
type directory struct {
	users map[string]slack.User

	mu     sync.Mutex
	looked []string
}

var errLookup = errors.New("users.info: ratelimited")

func (d *directory) UserInfo(_ context.Context, user string) (*slack.User, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.looked = append(d.looked, user)
	u, ok := d.users[user]
	if !ok {
		return nil, errLookup
	}
	return &u, nil
}

func (d *directory) lookups() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.looked)
}

// people are users.info's answers in the tests below, for a workspace T1 (alone, or in org E1).
var people = map[string]slack.User{
	"U0ALICE":      {ID: "U0ALICE", TeamID: "T1"},
	"U0GUEST":      {ID: "U0GUEST", TeamID: "T1", IsRestricted: true},
	"U0SINGLE":     {ID: "U0SINGLE", TeamID: "T1", IsRestricted: true, IsUltraRestricted: true},
	"U0OUT":        {ID: "U0OUT", TeamID: "T9"},
	"W0ORG":        {ID: "W0ORG", TeamID: "T2", Enterprise: slack.EnterpriseUser{EnterpriseID: "E1"}},
	"W0OTHER":      {ID: "W0OTHER", TeamID: "T8", Enterprise: slack.EnterpriseUser{EnterpriseID: "E8"}},
	"U0STRANGE":    {ID: "U0STRANGE", TeamID: "T1", IsStranger: true},
	"W0ORGSTRANGE": {ID: "W0ORGSTRANGE", TeamID: "T3", IsStranger: true, Enterprise: slack.EnterpriseUser{EnterpriseID: "E1"}},
}

// How a person is placed and decided: from the request's team alone where it says enough, else by
// users.info, and what happens when users.info fails (nobody locked out, no outsider let in).
func TestMembersVerify(t *testing.T) {
	tests := []struct {
		name             string
		enterprise       string // the workspace's org
		external, guests string // EXTERNAL_USERS, GUEST_USERS ("": defaults)
		user, team       string // the request's
		userTeam         string // the team the payload names as the person's own
		want             access.Reason
		wantKnown        bool     // Check decides without a look-up
		wantLooked       []string // users.info calls
	}{
		{"another team, told by the request", "", "", "", "U0OUT", "T9", "", access.ReasonExternal, true, nil},
		{"another team, told only by users.info", "", "", "", "U0OUT", "T1", "", access.ReasonExternal, false, []string{"U0OUT"}},
		{"a member is looked up once", "", "", "", "U0ALICE", "T1", "", "", false, []string{"U0ALICE"}},
		{"users.info's stranger is an outsider", "", "", "", "U0STRANGE", "T1", "", access.ReasonExternal, false, []string{"U0STRANGE"}},
		{"a guest follows the members' rules", "", "", "", "U0GUEST", "T1", "", "", false, []string{"U0GUEST"}},
		{"GUEST_USERS=refused: a guest", "", "", access.Refused, "U0GUEST", "T1", "", access.ReasonGuest, false, []string{"U0GUEST"}},
		{"GUEST_USERS=refused: a single-channel guest", "", "", access.Refused, "U0SINGLE", "T1", "", access.ReasonGuest, false, []string{"U0SINGLE"}},
		{"GUEST_USERS=refused: an outsider is no guest", "", access.AsMembers, access.Refused, "U0OUT", "T9", "", "", true, nil},
		{"EXTERNAL_USERS=members: nobody looked up", "", access.AsMembers, "", "U0OUT", "T9", "", "", true, nil},
		{"look-up failed, the request named the workspace: let in", "", "", "", "U0NOBODY", "T1", "", "", false, []string{"U0NOBODY"}},
		{"look-up failed, the request named nobody: let in", "", "", "", "U0NOBODY", "", "", "", false, []string{"U0NOBODY"}},
		{"GUEST_USERS=refused: look-up failed: not let in unchecked", "", "", access.Refused, "U0NOBODY", "T1", "", access.ReasonUnchecked, false, []string{"U0NOBODY"}},
		{"org: another workspace of the org is a member", "E1", "", "", "W0ORG", "T2", "", "", false, []string{"W0ORG"}},
		{"org: the org's own, though a stranger to the workspace", "E1", "", "", "W0ORGSTRANGE", "T3", "", "", false, []string{"W0ORGSTRANGE"}},
		{"org: another org is outside", "E1", "", "", "W0OTHER", "T8", "", access.ReasonExternal, false, []string{"W0OTHER"}},
		{"the payload names the workspace as the person's team: nobody looked up", "", "", "", "U0GUEST", "T1", "T1", "", true, nil},
		{"the payload names another team as the person's own", "", "", "", "U0OUT", "T9", "T9", access.ReasonExternal, true, nil},
		{"GUEST_USERS=refused: the person's team is not enough", "", "", access.Refused, "U0GUEST", "T1", "T1", access.ReasonGuest, false, []string{"U0GUEST"}},
		{"org: look-up failed, the request named another team", "E1", "", "", "W0NOBODY", "T7", "", access.ReasonUnchecked, false, []string{"W0NOBODY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := &directory{users: people}
			m, err := access.NewMembers(access.MembersOptions{Team: "T1", Enterprise: tt.enterprise, Workspace: "Acme",
				External: tt.external, Guests: tt.guests, Directory: dir})
			if err != nil {
				t.Fatal(err)
			}
			if _, known := m.Check(tt.user, tt.team, tt.userTeam); known != tt.wantKnown {
				t.Errorf("Check knows = %v, want %v", known, tt.wantKnown)
			}
			d, _ := m.Verify(t.Context(), tt.user, tt.team, tt.userTeam)
			if d.Reason != tt.want || d.Allowed != (tt.want == "") || (d.Message == "") != d.Allowed {
				t.Errorf("Verify = %+v, want reason %q", d, tt.want)
			}
			if got := dir.lookups(); !slices.Equal(got, tt.wantLooked) {
				t.Errorf("looked up %v, want %v", got, tt.wantLooked)
			}
		})
	}
}

// What outsiders are told names the workspace, and says nothing of the bot's rules beyond that.
func TestMembersRefusalNamesTheWorkspace(t *testing.T) {
	m, err := access.NewMembers(access.MembersOptions{Team: "T1", Workspace: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := m.Check("U0OUT", "T9", "")
	const want = "Sorry, I only answer people of Acme; people of other organisations in shared channels can't use me here."
	if d.Message != want {
		t.Errorf("an outsider is told %q, want %q", d.Message, want)
	}
}

// A look-up is kept for its TTL, then made again; the people kept are bounded, a failed look-up is
// not kept (the next request asks again).
func TestMembersRemembers(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	dir := &directory{users: people}
	m, err := access.NewMembers(access.MembersOptions{Team: "T1", Directory: dir, TTL: time.Minute, Max: 2,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(users ...string) {
		for _, u := range users {
			if _, err := m.Verify(t.Context(), u, "T1", ""); err != nil && u != "U0NOBODY" {
				t.Fatalf("Verify(%s): %v", u, err)
			}
		}
	}
	ask("U0ALICE", "U0ALICE", "U0NOBODY", "U0NOBODY")
	if _, known := m.Check("U0OUT", "T1", ""); known {
		t.Error("someone never looked up is known")
	}
	if d, known := m.Check("U0ALICE", "T1", ""); !known || !d.Allowed {
		t.Errorf("Alice, looked up, Check = %+v, %v; want allowed and known", d, known)
	}
	now = now.Add(time.Minute)
	ask("U0ALICE")
	ask("U0GUEST", "U0OUT") // three kept at most two: one goes
	want := []string{"U0ALICE", "U0NOBODY", "U0NOBODY", "U0ALICE", "U0GUEST", "U0OUT"}
	if got := dir.lookups(); !slices.Equal(got, want) {
		t.Errorf("looked up %v, want %v", got, want)
	}
	kept := 0
	for _, u := range []string{"U0ALICE", "U0GUEST", "U0OUT"} {
		if _, known := m.Check(u, "T1", ""); known {
			kept++
		}
	}
	if kept != 2 {
		t.Errorf("%d people kept, want 2 (the bound)", kept)
	}
}

func TestNewMembersRefusesUnknownValues(t *testing.T) {
	for _, opt := range []access.MembersOptions{{External: "allowed"}, {Guests: "no"}} {
		if _, err := access.NewMembers(opt); err == nil {
			t.Errorf("NewMembers(%+v) accepted a value that is neither refused nor members", opt)
		}
	}
}

// notes records what a Guard tells people after Accept (GuardOptions.Notifier).
type notes struct {
	mu  sync.Mutex
	got []string // user: text
}

func (n *notes) Ephemeral(_ context.Context, _, user, _, text string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, user+": "+text)
	return nil
}

func (n *notes) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

// A person only users.info can place is looked up when their request runs, not in Accept (no
// I/O there): refused, they are told privately (a follow-up without a mention silently), the
// wrapped handler does not run, the refusal is counted, the run ends as ErrIgnored (nothing to
// answer) and an /imagine picture goes back to the quota. Allowed, the handler runs.
func TestGuardLooksUpBeforeRun(t *testing.T) {
	outsiderMention := message(route.ReplyRequest{Channel: "C1", ChannelType: "channel", User: "U0OUT", Team: "T1", TS: "1.1", ThreadTS: "1.1", Text: "<@UBOT> hi"})
	outsiderFollowUp := message(route.ReplyRequest{Channel: "C1", ChannelType: "channel", User: "U0OUT", Team: "T1", TS: "1.2", ThreadTS: "1.1", Text: "and?", FollowUp: true})
	tests := []struct {
		name        string
		req         *route.Request
		wantRun     bool
		wantNotes   []string
		wantDenials [][2]string
	}{
		{"an outsider's mention", outsiderMention, false,
			[]string{"U0OUT: Sorry, I only answer people of Acme; people of other organisations in shared channels can't use me here."},
			[][2]string{{access.FeatureMention, string(access.ReasonExternal)}}},
		{"an outsider's follow-up", outsiderFollowUp, false, nil,
			[][2]string{{access.FeatureFollowUp, string(access.ReasonExternal)}}},
		{"an outsider's /imagine", imagineCmd("C1", "U0OUT", "a cat"), false,
			[]string{"U0OUT: Sorry, I only answer people of Acme; people of other organisations in shared channels can't use me here."},
			[][2]string{{access.FeatureImagine, string(access.ReasonExternal)}}},
		{"a member's /imagine", imagineCmd("C1", "U0ALICE", "a cat"), true, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := &fakeRoute{decision: route.Decision{Run: true, Say: "Working on it…"}}
			members, err := access.NewMembers(access.MembersOptions{Team: "T1", Workspace: "Acme", Directory: &directory{users: people}})
			if err != nil {
				t.Fatal(err)
			}
			var d denials
			told := &notes{}
			quota := access.NewQuota(1, 0)
			h := access.NewGuard(access.GuardOptions{Quota: quota, Denied: d.denied, Members: members, Notifier: told}).Middleware(next)

			if got := h.Accept(tt.req); got != next.decision {
				t.Fatalf("Accept = %+v, want the handler's %+v (the look-up comes when it runs)", got, next.decision)
			}
			err = h.Run(t.Context(), tt.req)
			if ran := len(next.ran) == 1; ran != tt.wantRun {
				t.Errorf("the handler ran = %v, want %v", ran, tt.wantRun)
			}
			if wantErr := !tt.wantRun; errors.Is(err, handlers.ErrIgnored) != wantErr {
				t.Errorf("Run = %v, want ErrIgnored %v", err, wantErr)
			}
			if got := told.list(); !slices.Equal(got, tt.wantNotes) {
				t.Errorf("told %q, want %q", got, tt.wantNotes)
			}
			if got := d.list(); !slices.Equal(got, tt.wantDenials) {
				t.Errorf("denials = %v, want %v", got, tt.wantDenials)
			}
			if got, want := quota.Remaining(tt.req.User), 1; got != want && !tt.wantRun {
				t.Errorf("%d pictures left after a refused /imagine, want %d (given back)", got, want)
			}
		})
	}
}

// budget is a Budget that records its turns and pauses; refuse makes Wait fail, as a budget
// whose turn does not come within the look-up's time.
type budget struct {
	refuse error
	waits  int
	paused []time.Duration
}

func (b *budget) Wait(context.Context) error { b.waits++; return b.refuse }
func (b *budget) Throttled(d time.Duration)  { b.paused = append(b.paused, d) }

// limited is a directory whose users.info answers 429 with Retry-After 30 s.
type limited struct{}

func (limited) UserInfo(context.Context, string) (*slack.User, error) {
	return nil, fmt.Errorf("users.info: %w", &slack.RateLimitedError{RetryAfter: 30 * time.Second})
}

// Look-ups take their turn in the budget users.info shares with the names' look-ups, and a 429
// pauses it for everyone; a look-up without a turn in time is a failed one (the member is let in).
func TestMembersLookUpsPaced(t *testing.T) {
	tests := []struct {
		name       string
		b          *budget
		dir        access.Directory
		wantPaused []time.Duration
		wantLooked int
	}{
		{"a turn, then users.info", &budget{}, &directory{users: people}, nil, 1},
		{"a 429 pauses the budget", &budget{}, limited{}, []time.Duration{30 * time.Second}, 0},
		{"no turn in time: no call", &budget{refuse: context.DeadlineExceeded}, &directory{users: people}, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := access.NewMembers(access.MembersOptions{Team: "T1", Directory: tt.dir, Budget: tt.b})
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := m.Verify(t.Context(), "U0ALICE", "T1", ""); !d.Allowed {
				t.Errorf("a member of the workspace refused: %+v", d)
			}
			if tt.b.waits != 1 || !slices.Equal(tt.b.paused, tt.wantPaused) {
				t.Errorf("budget: %d turns, paused %v; want 1 turn, paused %v", tt.b.waits, tt.b.paused, tt.wantPaused)
			}
			if d, ok := tt.dir.(*directory); ok && len(d.lookups()) != tt.wantLooked {
				t.Errorf("%d look-ups, want %d", len(d.lookups()), tt.wantLooked)
			}
		})
	}
}
