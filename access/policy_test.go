package access_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/access"
)

func TestPolicyCheck(t *testing.T) {
	const (
		general = "C0GENERAL"
		ai      = "C0AIHELP"
		secret  = "G0SECRET"
		dm      = "D0ALICE"
		groupDM = "G0ALICEBOB" // a group DM (mpim) is a channel to the lists
		alice   = "U0ALICE"
		bob     = "U0BOB"
		mallory = "W0MALLORY"
	)
	tests := []struct {
		name          string
		rules         access.Rules
		channel, user string
		want          access.Reason // "" = allowed
	}{
		{"no lists: everyone everywhere", access.Rules{}, general, alice, ""},
		{"no lists: DMs too", access.Rules{}, dm, alice, ""},
		{"denied user", access.Rules{DenyUsers: []string{mallory}}, general, mallory, access.ReasonUserDenied},
		{"denied user in a DM", access.Rules{DenyUsers: []string{mallory}}, dm, mallory, access.ReasonUserDenied},
		{"other users unaffected by a deny", access.Rules{DenyUsers: []string{mallory}}, general, alice, ""},
		{"denied channel", access.Rules{DenyChannels: []string{secret}}, secret, alice, access.ReasonChannelDenied},
		{"deny wins over allow (channel)", access.Rules{AllowChannels: []string{secret}, DenyChannels: []string{secret}}, secret, alice, access.ReasonChannelDenied},
		{"deny wins over allow (user)", access.Rules{AllowUsers: []string{mallory}, DenyUsers: []string{mallory}}, general, mallory, access.ReasonUserDenied},
		{"allowed channel", access.Rules{AllowChannels: []string{ai}}, ai, alice, ""},
		{"channel not on the allow list", access.Rules{AllowChannels: []string{ai}}, general, alice, access.ReasonChannelNotAllowed},
		{"a channel allow list without dm excludes DMs", access.Rules{AllowChannels: []string{ai}}, dm, alice, access.ReasonChannelNotAllowed},
		{"dm in the allow list allows DMs", access.Rules{AllowChannels: []string{ai, "dm"}}, dm, alice, ""},
		{"DM in any case", access.Rules{AllowChannels: []string{ai, "DM"}}, dm, alice, ""},
		{"a DM's own ID in the allow list", access.Rules{AllowChannels: []string{dm}}, dm, alice, ""},
		{"dm in the deny list turns DMs off", access.Rules{DenyChannels: []string{"dm"}}, dm, alice, access.ReasonChannelDenied},
		{"dm in the deny list leaves channels alone", access.Rules{DenyChannels: []string{"dm"}}, general, alice, ""},
		{"dm in the deny list leaves group DMs alone (one-to-one only)", access.Rules{DenyChannels: []string{"dm"}}, groupDM, alice, ""},
		{"a group DM is denied by its ID", access.Rules{DenyChannels: []string{"dm", groupDM}}, groupDM, alice, access.ReasonChannelDenied},
		{"dm in the allow list does not allow group DMs", access.Rules{AllowChannels: []string{"dm"}}, groupDM, alice, access.ReasonChannelNotAllowed},
		{"allowed user", access.Rules{AllowUsers: []string{alice}}, general, alice, ""},
		{"user not on the allow list", access.Rules{AllowUsers: []string{alice}}, general, bob, access.ReasonUserNotAllowed},
		{"user not on the allow list in a DM", access.Rules{AllowUsers: []string{alice}}, dm, bob, access.ReasonUserNotAllowed},
		{"both allow lists: both must match", access.Rules{AllowChannels: []string{ai}, AllowUsers: []string{alice}}, ai, bob, access.ReasonUserNotAllowed},
		{"both allow lists: channel checked first", access.Rules{AllowChannels: []string{ai}, AllowUsers: []string{alice}}, general, alice, access.ReasonChannelNotAllowed},
		{"user deny beats channel allow", access.Rules{AllowChannels: []string{ai}, DenyUsers: []string{bob}}, ai, bob, access.ReasonUserDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := access.NewPolicy(tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			d := p.Check(tt.channel, tt.user)
			if d.Reason != tt.want || d.Allowed != (tt.want == "") {
				t.Errorf("Check(%s, %s) = %+v, want reason %q", tt.channel, tt.user, d, tt.want)
			}
			if d.Allowed && d.Message != "" || !d.Allowed && d.Message != access.DefaultRefusal {
				t.Errorf("Check(%s, %s).Message = %q", tt.channel, tt.user, d.Message)
			}
		})
	}
}

func TestRefusalText(t *testing.T) {
	p, err := access.NewPolicy(access.Rules{AllowUsers: []string{"U0ALICE"}, Refusal: "  I'm in beta — ask in #it-help to join.  "})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Check("C0GENERAL", "U0BOB").Message, "I'm in beta — ask in #it-help to join."; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
}

func TestPolicyOpen(t *testing.T) {
	open, _ := access.NewPolicy(access.Rules{Refusal: "x"})
	closed, _ := access.NewPolicy(access.Rules{DenyChannels: []string{"dm"}})
	if !open.Open() || closed.Open() {
		t.Errorf("Open() = %v, %v; want true, false", open.Open(), closed.Open())
	}
}

// Every bad ID is reported at once, with the list it is in and where to find a real ID.
func TestNewPolicyRejectsBadIDs(t *testing.T) {
	_, err := access.NewPolicy(access.Rules{
		AllowChannels: []string{"#general", "C0OK"},
		DenyChannels:  []string{"c0lower"},
		AllowUsers:    []string{"@alice", "C0NOTAUSER"},
		DenyUsers:     []string{"U0OK", "U0 SPACE"},
	})
	if err == nil {
		t.Fatal("NewPolicy with bad IDs = nil error")
	}
	for _, want := range []string{
		`ALLOW_CHANNELS: "#general" is not a channel ID like C0123ABCD`,
		`DENY_CHANNELS: "c0lower"`,
		`ALLOW_USERS: "@alice" is not a user ID like U0123ABCD (profile > ⋮ > Copy member ID)`,
		`ALLOW_USERS: "C0NOTAUSER"`,
		`DENY_USERS: "U0 SPACE"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	for _, good := range []string{"C0OK", "U0OK"} {
		if strings.Contains(err.Error(), `"`+good+`"`) {
			t.Errorf("error blames the valid ID %s: %q", good, err)
		}
	}
}

func TestParseIDs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ", nil},
		{"C0123ABCD", []string{"C0123ABCD"}},
		{"C0123ABCD, C0456EFGH ,dm", []string{"C0123ABCD", "C0456EFGH", "dm"}},
		{",,U1,,", []string{"U1"}},
	}
	for _, tt := range tests {
		if got := access.ParseIDs(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("ParseIDs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIDShapes(t *testing.T) {
	tests := []struct {
		id            string
		channel, user bool
	}{
		{"C0123ABCD", true, false},
		{"G0123ABCD", true, false},
		{"D0123ABCD", true, false},
		{"C1", true, false}, // the fakes' short IDs
		{"U0123ABCD", false, true},
		{"W0123ABCD", false, true},
		{"UBOT", false, true},
		{"C", false, false},
		{"c0123abcd", false, false},
		{"#general", false, false},
		{"C0123ABCD0123ABCD0123ABCD", false, false}, // too long
		{"", false, false},
	}
	for _, tt := range tests {
		if got := access.ValidChannelID(tt.id); got != tt.channel {
			t.Errorf("ValidChannelID(%q) = %v", tt.id, got)
		}
		if got := access.ValidUserID(tt.id); got != tt.user {
			t.Errorf("ValidUserID(%q) = %v", tt.id, got)
		}
	}
}
