package tables

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/slackmd"
)

// recordingWrites records the messages written and refuses table blocks while refuse is set.
type recordingWrites struct {
	gateway.Writes // nil: the streams are not used here
	mu             sync.Mutex
	refuse         bool
	msgs           []gateway.Msg
}

func (r *recordingWrites) write(m gateway.Msg) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	for _, b := range m.Blocks {
		if b.BlockType() == slack.MBTTable && r.refuse {
			return slack.SlackErrorResponse{Err: "invalid_blocks"}
		}
	}
	return nil
}

func (r *recordingWrites) Post(_ context.Context, _, _ string, m gateway.Msg) (string, error) {
	return "1700000000.000100", r.write(m)
}

func (r *recordingWrites) Update(_ context.Context, _, _ string, m gateway.Msg) error {
	return r.write(m)
}

const tableMD = "Before.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nAfter."

func finalMsg() gateway.Msg {
	return gateway.Msg{Text: slackmd.Render(tableMD, slackmd.FormatMrkdwn), Markdown: tableMD}
}

// kinds is what each recorded write showed: "table" (a table block), "text" (no blocks), "cleared"
// (blocks=[]: buttons or a table taken off).
func (r *recordingWrites) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		switch {
		case m.Blocks != nil:
			out = append(out, "table")
		case m.Buttons != nil && len(m.Buttons) == 0:
			out = append(out, "cleared")
		default:
			out = append(out, "text")
		}
	}
	return out
}

// TestWritesTable: a final write with a table that fits goes with the table block (counted sent);
// a write without Markdown (an interim edit, another use case's) goes as it is.
func TestWritesTable(t *testing.T) {
	rw := &recordingWrites{}
	var outcomes []string
	w := NewWrites(rw, Options{Observe: func(o string) { outcomes = append(outcomes, o) }})
	if _, err := w.Post(t.Context(), "C1", "1700000000.000001", gateway.Msg{Text: "interim"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Post(t.Context(), "C1", "1700000000.000001", finalMsg()); err != nil {
		t.Fatal(err)
	}
	if got := rw.kinds(); !slices.Equal(got, []string{"text", "table"}) {
		t.Errorf("writes %v", got)
	}
	if !slices.Equal(outcomes, []string{Sent}) {
		t.Errorf("outcomes %v", outcomes)
	}
}

// TestWritesRefused: Slack refusing the block (invalid_blocks) gets the same message written again
// as text, and no table is tried again until the refusal is over.
func TestWritesRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rw := &recordingWrites{refuse: true}
		var outcomes []string
		w := NewWrites(rw, Options{Refusal: time.Minute, Observe: func(o string) { outcomes = append(outcomes, o) }})
		for range 2 {
			if err := w.Update(t.Context(), "C1", "1700000000.000002", finalMsg()); err != nil {
				t.Fatal(err)
			}
		}
		if got := rw.kinds(); !slices.Equal(got, []string{"table", "text", "text"}) {
			t.Errorf("writes %v, want the table, the same as text, then text only", got)
		}
		rw.msgs[1].Markdown = "" // all but the blocks are the same message
		if want := finalMsg(); rw.msgs[1].Text != want.Text {
			t.Errorf("written again as %q, want %q", rw.msgs[1].Text, want.Text)
		}
		time.Sleep(time.Minute)
		rw.refuse = false
		if err := w.Update(t.Context(), "C1", "1700000000.000002", finalMsg()); err != nil {
			t.Fatal(err)
		}
		if got := rw.kinds(); got[len(got)-1] != "table" {
			t.Errorf("after the refusal's time: %v, want a table again", got)
		}
		if !slices.Equal(outcomes, []string{Refused, Sent}) {
			t.Errorf("outcomes %v", outcomes)
		}
	})
}

// TestWritesOtherErrors: an error other than invalid_blocks is the write's: returned, not written
// again, nothing remembered.
func TestWritesOtherErrors(t *testing.T) {
	boom := errors.New("connection reset")
	rw := &failingWrites{err: boom}
	w := NewWrites(rw, Options{})
	if err := w.Update(t.Context(), "C1", "1700000000.000003", finalMsg()); !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
	if rw.calls != 1 || !w.refused.Allowed() {
		t.Errorf("%d calls, refused %v; want 1 and none remembered", rw.calls, !w.refused.Allowed())
	}
}

type failingWrites struct {
	gateway.Writes
	err   error
	calls int
}

func (f *failingWrites) Update(context.Context, string, string, gateway.Msg) error {
	f.calls++
	return f.err
}

// TestWritesTableTakenOff: an edit without a table of a message that showed one (a Regenerate
// written in its place) takes the block off (blocks=[]), or Slack would keep showing the old table.
func TestWritesTableTakenOff(t *testing.T) {
	rw := &recordingWrites{}
	w := NewWrites(rw, Options{})
	ts, err := w.Post(t.Context(), "C1", "1700000000.000001", finalMsg())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Update(t.Context(), "C1", ts, gateway.Msg{Text: "Regenerating…"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Update(t.Context(), "C1", "1700000000.000009", gateway.Msg{Text: "another message"}); err != nil {
		t.Fatal(err)
	}
	if got := rw.kinds(); !slices.Equal(got, []string{"table", "cleared", "text"}) {
		t.Errorf("writes %v", got)
	}
}
