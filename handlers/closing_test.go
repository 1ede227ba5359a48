package handlers

import (
	"slices"
	"testing"
)

// TestPlanClose pins how an answer is closed, for every mode, ending and state of what Slack shows
// that can occur: the ways tried in order until one has closed the answer.
func TestPlanClose(t *testing.T) {
	tests := []struct {
		mode  ReplyMode
		end   ending
		shows showing
		want  []closeStep
	}{
		// Closed in full: the final write, which posts what is not shown and reposts a refused last part.
		{ModeEdit, endFinished, showsNothing, []closeStep{stepFinal}},
		{ModeEdit, endFinished, showsPlaceholder, []closeStep{stepFinal}},
		{ModeEdit, endFinished, showsText, []closeStep{stepFinal}},
		// A stream that cannot be finished is rescued with posts; failing that, it says the rest is missing.
		{ModeStream, endFinished, showsPlaceholder, []closeStep{stepFinal, stepRescue, stepStopUnfinished}},
		{ModeStream, endFinished, showsText, []closeStep{stepFinal, stepRescue, stepStopUnfinished}},
		{ModeStream, endFinished, showsBroken, []closeStep{stepFinal, stepRescue, stepStopUnfinished}},
		{ModeStream, endFinished, showsStopped, []closeStep{stepCloseStopped}},
		// At shutdown nothing shown is withdrawn through budgets of its own, and text shown gets its
		// final write only if a turn comes by half the time left, else a note below it.
		{ModeEdit, endShutdown, showsNothing, []closeStep{stepTellAsker, stepFinal}},
		{ModeEdit, endShutdown, showsPlaceholder, []closeStep{stepWithdraw, stepFinal}},
		{ModeEdit, endShutdown, showsText, []closeStep{stepFinalInTime, stepInterruptedNote}},
		{ModeStream, endShutdown, showsPlaceholder, []closeStep{stepWithdraw, stepFinal, stepRescue, stepStopUnfinished}},
		{ModeStream, endShutdown, showsText, []closeStep{stepFinalInTime, stepInterruptedNote}},
		{ModeStream, endShutdown, showsBroken, []closeStep{stepStopAsItStands, stepInterruptedNote}},
		{ModeStream, endShutdown, showsStopped, []closeStep{stepCloseStopped, stepInterruptedNote}},
	}
	for _, tt := range tests {
		if got := planClose(tt.mode, tt.end, tt.shows); !slices.Equal(got, tt.want) {
			t.Errorf("planClose(%s, %v, %v) = %v, want %v", tt.mode, tt.end, tt.shows, got, tt.want)
		}
	}
}

// TestRepostRefused pins when a part whose message refused its final edit is posted anew in its
// place: only the answer's last message, not deleted, with time left and no note to follow.
func TestRepostRefused(t *testing.T) {
	tests := []struct {
		name                                 string
		last, deleted, timeLeft, noteFollows bool
		want                                 bool
	}{
		{"last message refuses", true, false, true, false, true},
		{"later messages follow it", false, false, true, false, false},
		{"deleted by someone", true, true, true, false, false},
		{"no time left", true, false, false, false, false},
		{"at shutdown the note follows", true, false, true, true, false},
	}
	for _, tt := range tests {
		if got := repostRefused(tt.last, tt.deleted, tt.timeLeft, tt.noteFollows); got != tt.want {
			t.Errorf("%s: repostRefused = %v, want %v", tt.name, got, tt.want)
		}
	}
}
