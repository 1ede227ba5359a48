package access_test

import (
	"context"
	"slices"
	"testing"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/access"
)

// roster lists pages of people and counts the pages asked for.
type roster struct {
	pages [][]slack.User
	asked int
}

func (r *roster) ListUsers(_ context.Context, each func([]slack.User) bool) error {
	for _, p := range r.pages {
		r.asked++
		if !each(p) {
			return nil
		}
	}
	return nil
}

// Issue 29: the workspace's people listed beforehand (users.list) are placed without a look-up,
// each as users.info would place them; someone the listing left out is still looked up, the
// listing stops at Max people, and nothing is listed when nobody would be looked up.
func TestMembersPreload(t *testing.T) {
	listed := [][]slack.User{
		{people["U0ALICE"], people["U0GUEST"], {ID: "U0GONE", TeamID: "T1", Deleted: true}},
		{people["U0OUT"], people["U0STRANGE"]},
	}
	t.Run("placed as looked up", func(t *testing.T) {
		dir := &directory{users: people}
		m, err := access.NewMembers(access.MembersOptions{Team: "T1", Workspace: "Acme", Guests: access.Refused, Directory: dir})
		if err != nil {
			t.Fatal(err)
		}
		r := &roster{pages: listed}
		if n, err := m.Preload(t.Context(), r); n != 4 || err != nil || r.asked != 2 {
			t.Fatalf("Preload = %d, %v after %d pages; want 4 people placed from 2 pages", n, err, r.asked)
		}
		for user, want := range map[string]access.Reason{"U0ALICE": "", "U0GUEST": access.ReasonGuest,
			"U0OUT": access.ReasonExternal, "U0STRANGE": access.ReasonExternal} {
			d, known := m.Check(user, "T1", "")
			if !known || d.Reason != want {
				t.Errorf("%s: Check = %+v, known %v; want reason %q without a look-up", user, d, known, want)
			}
		}
		if _, known := m.Check("U0GONE", "T1", ""); known {
			t.Error("a deleted account was placed")
		}
		if d, _ := m.Verify(t.Context(), "U0SINGLE", "T1", ""); d.Reason != access.ReasonGuest {
			t.Errorf("someone not listed: Verify = %+v, want refused as a guest after a look-up", d)
		}
		if got := dir.lookups(); !slices.Equal(got, []string{"U0SINGLE"}) {
			t.Errorf("looked up %v, want only U0SINGLE, whom the listing left out", got)
		}
	})
	t.Run("stops at Max", func(t *testing.T) {
		m, err := access.NewMembers(access.MembersOptions{Team: "T1", Max: 1, Directory: &directory{users: people}})
		if err != nil {
			t.Fatal(err)
		}
		r := &roster{pages: listed}
		if n, _ := m.Preload(t.Context(), r); n != 1 || r.asked != 1 {
			t.Errorf("Preload placed %d after %d pages, want 1 after 1 (Max 1)", n, r.asked)
		}
	})
	t.Run("nobody looked up: nothing listed", func(t *testing.T) {
		m, err := access.NewMembers(access.MembersOptions{Team: "T1", External: access.AsMembers, Guests: access.AsMembers})
		if err != nil {
			t.Fatal(err)
		}
		r := &roster{pages: listed}
		if n, _ := m.Preload(t.Context(), r); n != 0 || r.asked != 0 {
			t.Errorf("Preload placed %d after %d pages, want none listed", n, r.asked)
		}
	})
}
