package handlers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// cutFence is the shared state of a replica cut off from the others from from to until: its
// answers' writes wait meanwhile, and then go on (result nil: nobody adopted them) or fail for good
// (state.ErrFenced: another replica did).
type cutFence struct {
	from, until time.Time
	result      error

	mu  sync.Mutex
	ids []string
}

func (f *cutFence) Fence(ctx context.Context, id string) (time.Time, error) {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	f.mu.Unlock()
	now := time.Now()
	if now.Before(f.from) {
		return time.Time{}, nil
	}
	if now.Before(f.until) {
		t := time.NewTimer(f.until.Sub(now))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return time.Time{}, context.Cause(ctx)
		case <-t.C:
		}
	}
	return time.Time{}, f.result
}

// seen is the ids of the answers whose writes came to the fence so far.
func (f *cutFence) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ids)
}

// A replica cut off from the others writes nothing to its answer while it is (the Fence waits);
// once back, it finishes the answer if it is still its own, and writes nothing more to it if
// another replica adopted it meanwhile.
func TestFencedAnswerWaitsAndStopsWhenAdopted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		result    error
		wantWhole bool
	}{
		{name: "still its own", result: nil, wantWhole: true},
		{name: "adopted meanwhile", result: state.ErrFenced, wantWhole: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := newQuestionSlack()
				start := time.Now()
				fence := &cutFence{from: start.Add(2 * time.Second), until: start.Add(20 * time.Second), result: tc.result}
				opt := testOptions()
				opt.Fence = fence
				ws := paragraphs(20)
				chat := &llmtest.Chat{Steps: llmtest.Deltas(ws, 250*time.Millisecond)} // 20 s of text
				err := NewReplies(fs, fs, fs, fs, chat, zap.NewNop(), opt).Reply(t.Context(), testRequest())
				for _, c := range fs.Calls {
					if c.Method == "replies" || c.At.Before(fence.from) || !c.At.Before(fence.until) {
						continue
					}
					t.Errorf("%s at +%v while cut off", c.Method, c.At.Sub(start))
				}
				var after []gatewaytest.Call
				for _, c := range fs.Calls {
					if !c.At.Before(fence.until) {
						after = append(after, c)
					}
				}
				whole := shownText(fs, testCh) == strings.Join(strings.Fields(joined(ws)), " ")
				switch {
				case tc.wantWhole && (!whole || err != nil):
					t.Errorf("answer shows %q (Reply: %v); want it whole once back", shownText(fs, testCh), err)
				case !tc.wantWhole && (len(after) != 0 || !errors.Is(err, state.ErrFenced)):
					t.Errorf("calls once back %+v, Reply: %v; want none, and ErrFenced", after, err)
				}
				if ids := fence.seen(); len(ids) == 0 || ids[0] != route.AnswerID(testCh, testTS) {
					t.Errorf("fenced ids %v; want the answer's", ids)
				}
			})
		})
	}
}

// journalFence refuses the writes of an answer once the journal has no record of it, as a replica's
// fence did after a lapse of its liveness.
type journalFence struct{ j *fakeJournal }

func (f journalFence) Fence(_ context.Context, id string) (time.Time, error) {
	if slices.Contains(f.j.closedIDs(), id) {
		return time.Time{}, state.ErrFenced
	}
	return time.Time{}, nil
}

// A rescued stream deletes its streamed messages after its record is closed: those deletes are the
// answer's own, which no fence refuses.
func TestWritesAfterTheAnswersOwnCloseAreNotFenced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		opt := streamOptions()
		j := &fakeJournal{answers: map[string]state.Answer{}}
		opt.Journal, opt.Fence = j, journalFence{j}
		fs.StopErr = func(int, gatewaytest.Call) error { return slack.SlackErrorResponse{Err: "cant_update_message"} }
		chat := &llmtest.Chat{Steps: llmtest.Deltas(lines(6), 100*time.Millisecond)}
		err := NewReplies(fs, fs, fs, fs, chat, zap.NewNop(), opt).Reply(t.Context(), testRequest())
		if err != nil {
			t.Errorf("Reply: %v", err)
		}
		if len(fs.CallsOf("delete")) == 0 {
			t.Error("the rescued answer's streamed messages were not deleted")
		}
	})
}

// An answer stopped while its writes wait for a fence that does not come back (Redis stays away)
// ends at its closing deadline, reported ErrUnclosed: its record is then handed over for adoption.
func TestStoppedWhileFencedAnswerIsUnclosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newQuestionSlack()
		start := time.Now()
		fence := &cutFence{from: start.Add(2 * time.Second), until: start.Add(24 * time.Hour)}
		opt := testOptions()
		opt.Fence, opt.FinalTimeout = fence, 10*time.Second
		chat := &llmtest.Chat{Steps: llmtest.Deltas(paragraphs(20), 250*time.Millisecond)}
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		time.AfterFunc(5*time.Second, func() { cancel(ErrStopped) })
		err := NewReplies(fs, fs, fs, fs, chat, zap.NewNop(), opt).Reply(ctx, testRequest())
		if !errors.Is(err, ErrUnclosed) {
			t.Errorf("Reply: %v; want ErrUnclosed", err)
		}
		// An interim call waiting at the Stop keeps its own time box; the final write then has its own.
		if took := time.Since(start); took > 5*time.Second+gateway.WriteCallTimeout+opt.FinalTimeout {
			t.Errorf("the answer ended %v after it began; want by its closing deadline", took)
		}
	})
}
