package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/pace"
)

// pagedThread is a thread of n replies read 100 a page, whose page limited answers one 429 first.
type pagedThread struct {
	n, limited int
	calls      []string // the cursors asked for
	limitedYet bool
}

func (p *pagedThread) Replies(context.Context, string, string) ([]slack.Message, int, error) {
	panic("a paged read must not read the whole thread at once")
}

func (p *pagedThread) History(context.Context, string, int, string) ([]slack.Message, error) {
	return nil, nil
}

func (p *pagedThread) ThreadBytes() int { return 40 * MessageBytes(pagedMessage(1)) }

func (p *pagedThread) RepliesPage(_ context.Context, _, _, cursor string) ([]slack.Message, string, error) {
	p.calls = append(p.calls, cursor)
	from := 0
	if cursor != "" {
		fmt.Sscan(cursor, &from)
	}
	if from/100 == p.limited && !p.limitedYet {
		p.limitedYet = true
		return nil, "", &slack.RateLimitedError{RetryAfter: time.Millisecond}
	}
	var page []slack.Message
	for i := from; i < min(from+100, p.n+1); i++ {
		page = append(page, pagedMessage(i))
	}
	if from+100 > p.n {
		return page, "", nil
	}
	return page, fmt.Sprint(from + 100), nil
}

// pagedMessage is message i of the thread (0: its parent).
func pagedMessage(i int) slack.Message {
	return slack.Message{Msg: slack.Msg{Timestamp: fmt.Sprintf("1700000000.%06d", i), Text: fmt.Sprintf("message %04d %s", i, strings.Repeat("x", 100))}}
}

// TestThreadReadsPaged: a Thread that reads pages is read page by page, a read token each; a 429
// retries its page, not the read from the start; what is kept is the parent, the beginning and the
// newest (ThreadWindow), the rest counted as left out.
func TestThreadReadsPaged(t *testing.T) {
	th := &pagedThread{n: 1000, limited: 3}
	budgets := NewBudgets(DefaultEditsPerMinute, pace.PolicyFair)
	budgets.Reads = pace.NewBucket(60000, 20) // the test's pages need not wait
	reads := ThreadReads{Thread: th, Writer: &Writer{Budgets: budgets}}
	msgs, leftOut, err := reads.Replies(t.Context(), "C1", "1700000000.000000")
	if err != nil {
		t.Fatal(err)
	}
	if len(th.calls) != 12 || th.calls[3] != "300" || th.calls[4] != "300" {
		t.Errorf("pages asked for %q: want each once, the limited one twice", th.calls)
	}
	head, tail := 20, 40 // ThreadBytes/2 and ThreadBytes of replies of the same size
	if len(msgs) != 1+head+tail || leftOut != 1000-head-tail {
		t.Fatalf("%d messages kept, %d left out; want the parent, %d first and %d newest", len(msgs), leftOut, head, tail)
	}
	for i, m := range msgs {
		want := i
		if i > head {
			want = 1000 - tail + i - head
		}
		if m.Timestamp != pagedMessage(want).Timestamp {
			t.Fatalf("message %d is %s, want %s", i, m.Timestamp, pagedMessage(want).Timestamp)
		}
	}
}
