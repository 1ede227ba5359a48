package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/llmbot/llmbot/state"
)

// TestAddRefuses: what a person gets wrong, or a limit, is a Refusal whose text says so.
func TestAddRefuses(t *testing.T) {
	now := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, channel, creator, text, wantIn string
	}{
		{"no bar", "C1", "U1", "every day at 9:00 what is new", "a `|`"},
		{"no prompt", "C1", "U1", "every day at 9:00 |  ", "a `|`"},
		{"bad schedule", "C1", "U1", "daily | what is new", "every <days> at <time>"},
		{"bad zone", "C1", "U1", "every day at 9:00 Nowhere/Land | what is new", "no time zone"},
		{"long prompt", "C1", "U1", "every day at 9:00 | " + strings.Repeat("x", MaxPrompt+1), "at most 2000"},
		{"channel full", "C2", "U9", "every day at 9:00 | what is new", "This channel has 2"},
		{"person full", "C3", "U1", "every day at 9:00 | what is new", "You have 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewSchedules(memoryStore(t, "").Records(), testKey, Limits{PerChannel: 2, PerPerson: 1})
			mustAdd(t, s, "C2", "U1", "every day at 9:00 | one", now)
			mustAdd(t, s, "C2", "U2", "every day at 9:00 | two", now)
			_, err := s.Add(t.Context(), "T1", c.channel, c.creator, c.text, now)
			text, ok := IsRefusal(err)
			if !ok || !strings.Contains(text, c.wantIn) {
				t.Fatalf("Add = %v, want a refusal saying %q", err, c.wantIn)
			}
		})
	}
}

// TestListAndDelete: a channel lists its own schedules; only who may delete one deletes it.
func TestListAndDelete(t *testing.T) {
	now := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	s := NewSchedules(memoryStore(t, "").Records(), testKey, limits)
	a := mustAdd(t, s, "C1", "U1", "every monday at 17:30 | one", now)
	b := mustAdd(t, s, "C1", "U2", "every weekday at 9:00 Europe/Berlin | two", now.Add(time.Second))
	mustAdd(t, s, "C2", "U1", "every day at 8:00 | elsewhere", now)
	in, err := s.In(t.Context(), "C1")
	if err != nil || len(in) != 2 || in[0].ID != a.ID || in[1].ID != b.ID {
		t.Fatalf("In(C1) = %+v, %v; want %s then %s", in, err, a.ID, b.ID)
	}
	if in[1].When != "every weekday at 09:00 Europe/Berlin" {
		t.Errorf("When = %q, want the canonical form", in[1].When)
	}
	onlyCreator := func(u string) func(Schedule) bool { return func(sc Schedule) bool { return sc.Creator == u } }
	for _, c := range []struct {
		channel, id, user, wantIn string
	}{
		{"C1", b.ID, "U1", "Only <@U2>"},
		{"C2", b.ID, "U2", "no scheduled prompt"},
		{"C1", "nope", "U2", "no scheduled prompt"},
	} {
		_, err := s.Delete(t.Context(), c.channel, c.id, onlyCreator(c.user))
		if text, ok := IsRefusal(err); !ok || !strings.Contains(text, c.wantIn) {
			t.Errorf("Delete(%s, %s) by %s = %v, want a refusal saying %q", c.channel, c.id, c.user, err, c.wantIn)
		}
	}
	if _, err := s.Delete(t.Context(), "C1", b.ID, onlyCreator("U2")); err != nil {
		t.Fatalf("Delete by its creator: %v", err)
	}
	if in, _ := s.In(t.Context(), "C1"); len(in) != 1 || in[0].ID != a.ID {
		t.Fatalf("after Delete, In(C1) = %+v, want only %s", in, a.ID)
	}
}

// TestForgedScheduleNeverRuns: a schedule written into the store without the key (Redis is no trust
// root), or sealed under another id, is no schedule: it is neither listed nor run.
func TestForgedScheduleNeverRuns(t *testing.T) {
	m := memoryStore(t, "")
	s := NewSchedules(m.Records(), testKey, limits)
	forged := []byte(`{"id":"f0f0f0f0","team":"T1","channel":"C1","creator":"U1","when":"every day at 09:00 UTC","prompt":"leak","created":"2026-03-02T08:00:00Z"}`)
	for id, val := range map[string][]byte{
		"f0f0f0f0": forged,
		"a1a1a1a1": state.Seal(testKey, collSchedules, "f0f0f0f0", forged),
	} {
		if err := m.Records().Put(t.Context(), collSchedules, id, val); err != nil {
			t.Fatal(err)
		}
	}
	if all, err := s.All(t.Context()); err != nil || len(all) != 0 {
		t.Fatalf("All = %+v, %v; want none", all, err)
	}
}
