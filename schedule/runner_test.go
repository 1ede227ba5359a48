package schedule

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/state"
)

var limits = Limits{PerChannel: 10, PerPerson: 10}

// TestRunnerRunsEachOccurrence: the runner sleeps until an occurrence and runs it then, once, and the
// next one a day later (synctest's clock starts at midnight UTC, 1 January 2000).
func TestRunnerRunsEachOccurrence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memoryStore(t, "")
		s := NewSchedules(m.Records(), testKey, limits)
		start := time.Now()
		sc := mustAdd(t, s, "C1", "U1", "every day at 9:00 UTC | what is new?", start)
		ask, o := &fakeAsker{}, &outcomes{}
		stop := running(t, newTestRunner(t, s, m.Keys(), ask, &fakeTeller{}, o, time.Hour))
		defer stop()

		time.Sleep(9*time.Hour - time.Second)
		synctest.Wait()
		if got := ask.got(); len(got) != 0 {
			t.Fatalf("runs before 9:00: %v", got)
		}
		time.Sleep(24*time.Hour + time.Second)
		synctest.Wait()
		nine := start.Add(9 * time.Hour)
		want := []asked{{sc.ID, nine}, {sc.ID, nine.Add(24 * time.Hour)}}
		if got := ask.got(); !sameRuns(got, want) {
			t.Fatalf("runs = %v, want %v", got, want)
		}
		if got := o.get(OutcomeOK); got != 2 {
			t.Errorf("ok outcomes = %d, want 2", got)
		}
	})
}

// TestRunnerRestartAcrossAnOccurrence: a process that stops before an occurrence and comes back
// after it (on the same state directory) runs it once if it is back within the catch-up window, and
// skips it with a log line otherwise; the next occurrence runs either way.
func TestRunnerRestartAcrossAnOccurrence(t *testing.T) {
	for _, c := range []struct {
		name     string
		downFor  time.Duration // from 8:59
		wantRuns int           // of the 9:00 occurrence
		skipped  int
	}{
		{"back within the window", 30 * time.Minute, 1, 0},
		{"back after the window", 3 * time.Hour, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				first := memoryStore(t, dir)
				sc := mustAdd(t, NewSchedules(first.Records(), testKey, limits), "C1", "U1", "every day at 9:00 | status?", start)
				ask, o := &fakeAsker{}, &outcomes{}
				stop := running(t, newTestRunner(t, NewSchedules(first.Records(), testKey, limits), first.Keys(), ask, &fakeTeller{}, o, time.Hour))
				time.Sleep(8*time.Hour + 59*time.Minute)
				stop()
				_ = first.Close()

				time.Sleep(c.downFor)
				back := time.Now()
				second := memoryStore(t, dir) // a new process: nothing in memory, the directory kept
				stop = running(t, newTestRunner(t, NewSchedules(second.Records(), testKey, limits), second.Keys(), ask, &fakeTeller{}, o, time.Hour))
				defer stop()
				synctest.Wait()
				var want []asked
				for range c.wantRuns {
					want = append(want, asked{sc.ID, back})
				}
				if got := runsAt(ask.got(), start.Add(9*time.Hour), back); !sameRuns(got, want) {
					t.Fatalf("runs of the 9:00 occurrence = %v, want %v", got, want)
				}
				if got := o.get(OutcomeSkipped); got != c.skipped {
					t.Errorf("skipped = %d, want %d", got, c.skipped)
				}
				time.Sleep(24 * time.Hour)
				synctest.Wait()
				if got := ask.got(); len(got) == 0 || !got[len(got)-1].at.Equal(start.Add(33*time.Hour)) {
					t.Fatalf("runs = %v, want the next day's 9:00 last", got)
				}
			})
		})
	}
}

// sameRuns compares runs by their instants (not their time zones).
func sameRuns(a, b []asked) bool {
	return slices.EqualFunc(a, b, func(x, y asked) bool { return x.id == y.id && x.at.Equal(y.at) })
}

// runsAt are the runs started at back (a catch-up of the occurrence at), with at as their time.
func runsAt(runs []asked, at, back time.Time) []asked {
	var out []asked
	for _, r := range runs {
		if r.at.Equal(at) {
			out = append(out, asked{r.id, back})
		}
	}
	return out
}

// TestRunnerTellsTheCreatorWhenARunFails: a run that cannot start tells its creator privately, once.
func TestRunnerTellsTheCreatorWhenARunFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memoryStore(t, "")
		s := NewSchedules(m.Records(), testKey, limits)
		sc := mustAdd(t, s, "C1", "U1", "every day at 9:00 | status?", time.Now())
		ask, tell, o := &fakeAsker{err: errAskFailed}, &fakeTeller{}, &outcomes{}
		stop := running(t, newTestRunner(t, s, m.Keys(), ask, tell, o, time.Hour))
		defer stop()
		time.Sleep(10 * time.Hour)
		synctest.Wait()
		notes := tell.got()
		if len(notes) != 1 || notes[0].channel != "C1" || notes[0].user != "U1" || !strings.Contains(notes[0].text, sc.ID) {
			t.Fatalf("notes = %+v, want one to U1 in C1 naming %s", notes, sc.ID)
		}
		if got := o.get(OutcomeFailed); got != 1 {
			t.Errorf("failed = %d, want 1", got)
		}
	})
}

// TestRunnerDeletedScheduleDoesNotRun: a schedule deleted before its occurrence never runs.
func TestRunnerDeletedScheduleDoesNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := memoryStore(t, "")
		s := NewSchedules(m.Records(), testKey, limits)
		sc := mustAdd(t, s, "C1", "U1", "every day at 9:00 | status?", time.Now())
		ask := &fakeAsker{}
		stop := running(t, newTestRunner(t, s, m.Keys(), ask, &fakeTeller{}, &outcomes{}, time.Hour))
		defer stop()
		time.Sleep(time.Hour)
		if _, err := s.Delete(t.Context(), "C1", sc.ID, func(Schedule) bool { return true }); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Hour)
		synctest.Wait()
		if got := ask.got(); len(got) != 0 {
			t.Fatalf("runs of a deleted schedule: %v", got)
		}
	})
}

// TestTwoReplicasRunAnOccurrenceOnce: two replicas on one real redis-server, each ticking at the
// occurrence at once, run it exactly once between them.
func TestTwoReplicasRunAnOccurrenceOnce(t *testing.T) {
	url, _ := redistest.Start(t)
	replica := func(self string) *state.Redis {
		r, err := state.NewRedis(t.Context(), url, "llmbot:test-schedule:", self, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	a, b := replica("a"), replica("b")
	created := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	mustAdd(t, NewSchedules(a.Records(), testKey, limits), "C1", "U1", "every weekday at 9:00 | status?", created)
	ask, o := &fakeAsker{}, &outcomes{}
	runners := []*Runner{
		newTestRunner(t, NewSchedules(a.Records(), testKey, limits), a.Keys(), ask, &fakeTeller{}, o, time.Hour),
		newTestRunner(t, NewSchedules(b.Records(), testKey, limits), b.Keys(), ask, &fakeTeller{}, o, time.Hour),
	}
	for _, now := range []time.Time{created.Add(time.Hour), created.Add(time.Hour + time.Second), created.Add(25 * time.Hour)} {
		var wg sync.WaitGroup
		for _, r := range runners {
			wg.Go(func() { r.Tick(t.Context(), now) })
		}
		wg.Wait()
	}
	if got, want := len(ask.got()), 2; got != want {
		t.Fatalf("runs = %v, want %d (Monday's and Tuesday's 9:00, once each)", ask.got(), want)
	}
	if got := o.get(OutcomeOK); got != 2 {
		t.Errorf("ok = %d, want 2", got)
	}
}
