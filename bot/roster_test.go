package bot

import (
	"fmt"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// Roster pages users.list to the end, a 429 waited out and the same page asked again, and stops
// when told to.
func TestRosterListsEveryone(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{Limits: fakeslack.Limits{Methods: map[string]fakeslack.Limit{
		"users.list": {PerMinute: 600, Burst: 1}}}}) // a page every 0.1 s: the second, asked at once, gets a 429
	t.Cleanup(fs.Close)
	for i := range 450 {
		fs.AddUser(fakeslack.User{ID: fmt.Sprintf("U%04d", i), Name: fmt.Sprintf("u%d", i)})
	}
	fs.AddUser(fakeslack.User{ID: "U9OUT", Name: "outsider", Team: "T0OTHER"})
	r := &Roster{c: slack.New("xoxb-test", slack.OptionAPIURL(fs.URL())), gap: time.Millisecond}
	seen := map[string]bool{}
	pages := 0
	err := r.ListUsers(t.Context(), func(users []slack.User) bool {
		pages++
		for _, u := range users {
			seen[u.ID] = true
		}
		return true
	})
	if err != nil || !seen["U0000"] || !seen["U0449"] || seen["U9OUT"] || pages != 3 {
		t.Fatalf("ListUsers = %v: %d people in %d pages, want the workspace's 450 (and the bot) in 3, not the outsider", err, len(seen), pages)
	}
	if fs.Count429("users.list") == 0 {
		t.Error("no 429: the test does not show one waited out")
	}
	pages = 0
	if err := r.ListUsers(t.Context(), func([]slack.User) bool { pages++; return false }); err != nil || pages != 1 {
		t.Errorf("told to stop: %v after %d pages, want nil after 1", err, pages)
	}
}
