package access_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/summarize"
)

// The people of the tests below, besides members (any other user id is a member of the fake's
// workspace T1, "Test Team"): someone of another organisation in a Slack Connect channel, and the
// workspace's guests.
var (
	outsider    = fakeslack.User{ID: "U0OUT", Name: "outsider", Team: "T0OTHER"}
	guest       = fakeslack.User{ID: "U0GUEST", Name: "guest", Guest: true}
	singleGuest = fakeslack.User{ID: "U0SINGLE", Name: "single", UltraGuest: true}
)

// refusalFor is what Members tells u, as users.info shows them, when refused for their standing
// in the fake's workspace under opt.
func refusalFor(t *testing.T, u slack.User, opt access.MembersOptions) string {
	t.Helper()
	opt.Team, opt.Workspace, opt.Directory = "T1", "Test Team", &directory{users: map[string]slack.User{u.ID: u}}
	m, err := access.NewMembers(opt)
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.Verify(t.Context(), u.ID, u.TeamID, "")
	if err != nil || d.Allowed {
		t.Fatalf("%+v is not refused by %+v: %+v, %v", u, opt, d, err)
	}
	return d.Message
}

// asked is a member's question in C1 and its answer, done (with its Regenerate button).
type asked struct{ question, answer string }

// memberAsks has Alice, a member, ask in C1 and waits for her answer with its Regenerate button:
// members are answered whatever EXTERNAL_USERS says.
func memberAsks(t *testing.T, w *wired) asked {
	t.Helper()
	q := w.fs.PostUserMessage("C1", "U0ALICE", "", "<@UBOT> hello?")
	var a asked
	waitFor(t, w.fs, "Alice's answer with its buttons", func() bool {
		r := w.fs.BotReplies("C1", q)
		if len(r) != 1 || r[0].Text != "Sure thing." {
			return false
		}
		a = asked{question: q, answer: r[0].TS}
		return slices.ContainsFunc(r[0].Buttons(), func(b fakeslack.Button) bool { return b.ActionID == route.ActionRegenerate })
	})
	return a
}

// approvalPrompt posts, as the bot, a tool approval prompt on the answer to a's question for
// asker, as an answer with tools shows one (the buttons of handlers' prompts).
func approvalPrompt(t *testing.T, w *wired, a asked, asker string) string {
	t.Helper()
	ref := approvals.ApprovalRef{ThreadTS: a.question, TS: a.question, ID: "call1", Asker: asker}
	blocks := fmt.Sprintf(`[{"type":"actions","elements":[{"type":"button","action_id":%q,`+
		`"text":{"type":"plain_text","text":"Allow once"},"value":%q}]}]`, approvals.ActionToolAllowOnce, ref.Value())
	return w.fs.Post(fakeslack.UserMessage{Channel: "C1", ThreadTS: a.question, BotID: w.id.BotID,
		Text: "may I use the tool?", Blocks: json.RawMessage(blocks)})
}

func click(t *testing.T, w *wired, ts, user, actionID string) {
	t.Helper()
	if _, err := w.fs.Click("C1", ts, user, actionID); err != nil {
		t.Fatal(err)
	}
}

// README, "Who may use it": people of another organisation in a Slack Connect channel are refused
// by default (EXTERNAL_USERS=refused), with one short private note, whatever they use: a mention,
// a slash command, a button on an answer, a tool approval. Nothing they ask reaches the model, no
// summary of the channel reaches them, and a member in the same channel is still answered. Their
// messages name their team (user_team), their clicks too (user.team_id); a slash command names
// only the workspace, so they are looked up (users.info) before it runs, and told then.
func TestWiredOutsiderRefused(t *testing.T) {
	tests := []struct {
		name string
		do   func(t *testing.T, w *wired, a asked)
	}{
		{"mention", func(t *testing.T, w *wired, _ asked) {
			w.fs.PostUserMessage("C1", outsider.ID, "", "<@UBOT> what did they decide today?")
		}},
		{"follow-up mention in a member's thread", func(t *testing.T, w *wired, a asked) {
			w.fs.PostUserMessage("C1", outsider.ID, a.question, "<@UBOT> and for us?")
		}},
		{"/imagine", func(t *testing.T, w *wired, _ asked) {
			w.fs.SlashCommand("C1", outsider.ID, "/imagine", "a lighthouse")
		}},
		{"/summarize", func(t *testing.T, w *wired, _ asked) { w.fs.SlashCommand("C1", outsider.ID, "/summarize", "") }},
		{"Summarize thread on a member's thread", func(t *testing.T, w *wired, a asked) {
			if _, err := w.fs.MessageShortcut("C1", a.question, outsider.ID, summarize.ShortcutThread); err != nil {
				t.Fatal(err)
			}
		}},
		{"Regenerate on a member's answer", func(t *testing.T, w *wired, a asked) {
			click(t, w, a.answer, outsider.ID, route.ActionRegenerate)
		}},
		{"tool approval", func(t *testing.T, w *wired, a asked) {
			click(t, w, approvalPrompt(t, w, a, outsider.ID), outsider.ID, approvals.ActionToolAllowOnce)
		}},
	}
	want := refusalFor(t, slack.User{ID: outsider.ID, TeamID: outsider.Team}, access.MembersOptions{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWired(t)
			w.fs.AddUser(outsider)
			ev := wiredBot(t, w, nil, wiredConfig{Buttons: true})
			a := memberAsks(t, w)

			tt.do(t, w, a)
			waitFor(t, w.fs, "the note to the outsider", func() bool { return len(ephemeralsTo(w.fs, outsider.ID, "C1")) > 0 })
			time.Sleep(300 * time.Millisecond) // a second note or an answer, if any, comes well within this
			if got := ephemeralsTo(w.fs, outsider.ID, "C1"); len(got) != 1 || got[0].Text != want {
				t.Errorf("the outsider was told %+v, want %q once", got, want)
			}
			if c := w.fl.Counts(); c.Chat != 1 || c.Image != 0 {
				t.Errorf("model requests: %d chat, %d image; want only the member's answer", c.Chat, c.Image)
			}
			if r := w.fs.BotReplies("C1", a.question); len(r) > 2 { // the answer, and the approval prompt of that row
				t.Errorf("the member's thread has %d bot messages after the outsider's request: %+v", len(r), r)
			}
			if got, wantDenied := ev.now().denials, 1; len(got) != wantDenied || got[0][1] != string(access.ReasonExternal) {
				t.Errorf("denials counted = %v, want one %s", got, access.ReasonExternal)
			}
		})
	}
}

// The outsider's own thread gets no answer, and EXTERNAL_USERS=members serves them as a member.
func TestWiredOutsiderAnswered(t *testing.T) {
	tests := []struct {
		name       string
		external   string
		wantAnswer bool
	}{
		{"EXTERNAL_USERS unset", "", false},
		{"EXTERNAL_USERS=refused", access.Refused, false},
		{"EXTERNAL_USERS=members", access.AsMembers, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWired(t)
			w.fs.AddUser(outsider)
			ev := wiredBot(t, w, nil, wiredConfig{External: tt.external})
			q := w.fs.PostUserMessage("C1", outsider.ID, "", "<@UBOT> hello?")
			ev.waitFor(t, "the mention decided", func(s botSeen) bool { return len(s.decided) == 1 })
			if tt.wantAnswer {
				waitFor(t, w.fs, "the answer", func() bool { return len(w.fs.BotReplies("C1", q)) == 1 })
			} else {
				waitFor(t, w.fs, "the note", func() bool { return len(ephemeralsTo(w.fs, outsider.ID, "C1")) == 1 })
			}
			time.Sleep(300 * time.Millisecond)
			if got := len(w.fs.BotReplies("C1", q)) == 1; got != tt.wantAnswer {
				t.Errorf("the outsider answered = %v, want %v", got, tt.wantAnswer)
			}
			if got := w.fl.Counts().Chat == 1; got != tt.wantAnswer {
				t.Errorf("the outsider's question reached the model = %v, want %v", got, tt.wantAnswer)
			}
		})
	}
}

// Guests (multi- and single-channel) follow the members' rules unless GUEST_USERS=refused, which
// refuses them with a note. A guest's message names the workspace's own team, so they are looked
// up (users.info) before their answer runs.
func TestWiredGuests(t *testing.T) {
	tests := []struct {
		name       string
		guests     string
		user       fakeslack.User
		wantAnswer bool
	}{
		{"guest, GUEST_USERS unset", "", guest, true},
		{"single-channel guest, GUEST_USERS unset", "", singleGuest, true},
		{"guest, GUEST_USERS=members", access.AsMembers, guest, true},
		{"guest, GUEST_USERS=refused", access.Refused, guest, false},
		{"single-channel guest, GUEST_USERS=refused", access.Refused, singleGuest, false},
		{"member, GUEST_USERS=refused", access.Refused, fakeslack.User{ID: "U0ALICE", Name: "alice"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWired(t)
			w.fs.AddUser(tt.user)
			wiredBot(t, w, nil, wiredConfig{Guests: tt.guests})
			q := w.fs.PostUserMessage("C1", tt.user.ID, "", "<@UBOT> hello?")
			if tt.wantAnswer {
				waitFor(t, w.fs, "the answer", func() bool {
					r := w.fs.BotReplies("C1", q)
					return len(r) == 1 && r[0].Text == "Sure thing."
				})
				if got := ephemeralsTo(w.fs, tt.user.ID, "C1"); len(got) != 0 {
					t.Errorf("answered, and told %+v", got)
				}
				return
			}
			want := refusalFor(t, slack.User{ID: tt.user.ID, TeamID: "T1", IsRestricted: true}, access.MembersOptions{Guests: access.Refused})
			waitFor(t, w.fs, "the note", func() bool { return len(ephemeralsTo(w.fs, tt.user.ID, "C1")) == 1 })
			if got := ephemeralsTo(w.fs, tt.user.ID, "C1")[0]; got.Text != want || got.ThreadTS != q {
				t.Errorf("told %q in thread %q, want %q in %q", got.Text, got.ThreadTS, want, q)
			}
			time.Sleep(300 * time.Millisecond)
			if r := w.fs.BotReplies("C1", q); len(r) != 0 || w.fl.Counts().Chat != 0 {
				t.Errorf("a refused guest got %d bot messages, %d model requests", len(r), w.fl.Counts().Chat)
			}
		})
	}
}

// In a workspace of an Enterprise Grid org, the people of the org's other workspaces are members
// (their messages name another team, so they are looked up), and people of another org are not.
func TestWiredEnterpriseOrg(t *testing.T) {
	tests := []struct {
		name       string
		user       fakeslack.User
		wantAnswer bool
	}{
		{"another workspace of the org", fakeslack.User{ID: "W0ORG", Name: "orgmate", Team: "T2", Enterprise: "E1"}, true},
		{"another org", fakeslack.User{ID: "W0OUT", Name: "out", Team: "T9", Enterprise: "E9"}, false},
		{"a workspace of no org", fakeslack.User{ID: "U0OUT", Name: "out", Team: "T8"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWiredSlack(t, fakeslack.Config{EnterpriseID: "E1"})
			w.fs.AddUser(tt.user)
			wiredBot(t, w, nil, wiredConfig{})
			q := w.fs.PostUserMessage("C1", tt.user.ID, "", "<@UBOT> hello?")
			if tt.wantAnswer {
				waitFor(t, w.fs, "the answer", func() bool { return len(w.fs.BotReplies("C1", q)) == 1 })
				return
			}
			waitFor(t, w.fs, "the note", func() bool { return len(ephemeralsTo(w.fs, tt.user.ID, "C1")) == 1 })
			time.Sleep(300 * time.Millisecond)
			if r := w.fs.BotReplies("C1", q); len(r) != 0 || w.fl.Counts().Chat != 0 {
				t.Errorf("someone of another org got %d bot messages, %d model requests", len(r), w.fl.Counts().Chat)
			}
		})
	}
}

// Issue 29: 50 members new to the bot ask at once in their DMs. When their messages name the
// workspace as their own team (user_team, fakeslack.Config.UserTeams), nobody is looked up, so no
// question waits for users.info's budget (100 a minute, burst 10 here, as the load tool's fake
// Slack); when they name no team (as Slack's messages in a workspace on its own may not), each
// person is still looked up. Either way every question is taken on. An outsider's message names
// their team and is refused (the tests above).
func TestWiredMembersNamedByTheirTeamAreNotLookedUp(t *testing.T) {
	const people = 50
	for _, named := range []bool{true, false} {
		t.Run(fmt.Sprintf("user_team=%v", named), func(t *testing.T) {
			t.Parallel()
			w := newWiredSlack(t, fakeslack.Config{UserTeams: named, Limits: fakeslack.Limits{Methods: map[string]fakeslack.Limit{
				"users.info": {PerMinute: 100, Burst: 10}}}})
			wiredBot(t, w, nil, wiredConfig{Bot: bot.Options{MaxConcurrent: people + 10, Grace: wiredGrace}})
			for i := range people {
				w.fs.PostUserMessage(fmt.Sprintf("D%04d", i), fmt.Sprintf("U%04d", i), "", "hello?")
			}
			// Each answer's placeholder is posted once its person is placed (Guard runs before the answer).
			waitFor(t, w.fs, "every question's placeholder", func() bool { return w.fs.CallCount("chat.postMessage") >= people })
			switch n := w.fs.CallCount("users.info"); {
			case named && n != 0:
				t.Errorf("%d users.info calls, want none: every message named the person's team", n)
			case !named && n == 0:
				t.Error("nobody looked up, though no message named the person's team")
			}
		})
	}
}
