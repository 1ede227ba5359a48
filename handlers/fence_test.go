package handlers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// cutFence is the shared state of a replica cut off from the others from from to until: its
// answers' writes wait meanwhile, and then go on (result nil: nobody adopted them) or fail for good
// (state.ErrFenced: another replica did).
type cutFence struct {
	from, until time.Time
	result      error
	ids         []string
}

func (f *cutFence) Fence(ctx context.Context, id string) error {
	f.ids = append(f.ids, id) // the answer's writes come one at a time
	now := time.Now()
	if now.Before(f.from) {
		return nil
	}
	if now.Before(f.until) {
		t := time.NewTimer(f.until.Sub(now))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
	return f.result
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
				chat := &fakeChat{steps: deltas(ws, 250*time.Millisecond)} // 20 s of text
				err := NewReplies(fs, fs, fs, fs, chat, zap.NewNop(), opt).Reply(t.Context(), testRequest())
				for _, c := range fs.calls {
					if c.method == "replies" || c.at.Before(fence.from) || !c.at.Before(fence.until) {
						continue
					}
					t.Errorf("%s at +%v while cut off", c.method, c.at.Sub(start))
				}
				var after []call
				for _, c := range fs.calls {
					if !c.at.Before(fence.until) {
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
				if len(fence.ids) == 0 || fence.ids[0] != route.AnswerID(testCh, testTS) {
					t.Errorf("fenced ids %v; want the answer's", fence.ids)
				}
			})
		})
	}
}
