package gateway

import (
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

// TestThreadWindowEdges: without a bound every message is kept; with one, the parent and the
// newest reply are kept whatever their size, and a reply too big for the beginning starts the
// newest part (the beginning is not taken up again after it).
func TestThreadWindowEdges(t *testing.T) {
	msgs := []slack.Message{pagedMessage(0), pagedMessage(1), pagedMessage(2), pagedMessage(3)}
	all := NewThreadWindow(0)
	all.Add(msgs)
	if got, left := all.Messages(); len(got) != 4 || left != 0 {
		t.Errorf("unbounded: %d kept, %d left out; want all", len(got), left)
	}

	one := MessageBytes(pagedMessage(1))
	big := pagedMessage(2)
	big.Text = strings.Repeat("y", 10*one)
	w := NewThreadWindow(2 * one) // the beginning: one reply
	w.Add([]slack.Message{pagedMessage(0), pagedMessage(1), big})
	w.Add([]slack.Message{pagedMessage(3)})
	got, left := w.Messages()
	var ts []string
	for _, m := range got {
		ts = append(ts, m.Timestamp[len(m.Timestamp)-2:])
	}
	if strings.Join(ts, " ") != "00 01 03" || left != 1 {
		t.Errorf("kept %v, %d left out; want the parent, the first reply and the newest, the big one left out", ts, left)
	}
	if w.Held() > 2*one+one {
		t.Errorf("holds %d bytes, over the bounds %d", w.Held(), 3*one)
	}

	huge := NewThreadWindow(one)
	huge.Add([]slack.Message{pagedMessage(0), big})
	if got, left := huge.Messages(); len(got) != 2 || left != 0 {
		t.Errorf("a newest reply over the bound: %d kept, %d left out; want it kept", len(got), left)
	}
}
