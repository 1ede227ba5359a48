package access_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/llm"
)

// A picture taken just before midnight UTC whose job fails just after must not be given back
// out of the new day's count: Refund's contract says "a refund after the day changed does
// nothing". Otherwise a person who starts a job at 23:59 and another at 00:00 gets limit+1
// pictures on the new day.
func TestQuotaRefundAfterMidnightLeavesNewDayAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		day := time.Now().UTC().Truncate(24 * time.Hour)
		sleepUntil(day.Add(24*time.Hour - 10*time.Second)) // 23:59:50 UTC

		q := access.NewQuota(1, 0)
		d, day1 := q.Take("U0ALICE") // day 1's job starts
		if !d.Allowed {
			t.Fatalf("day 1 picture refused: %+v", d)
		}
		sleepUntil(day.Add(24*time.Hour + 10*time.Second)) // 00:00:10, day 2
		if d, _ := q.Take("U0ALICE"); !d.Allowed {         // day 2's first picture
			t.Fatalf("day 2 picture refused: %+v", d)
		}
		sleepUntil(day.Add(24*time.Hour + 30*time.Second))
		q.Refund(day1) // day 1's job fails now: its picture belongs to day 1

		if got := q.Remaining("U0ALICE"); got != 0 {
			t.Errorf("Remaining on day 2 after its 1 of 1 and a refund of day 1's picture = %d, want 0", got)
		}
		if d, _ := q.Take("U0ALICE"); d.Allowed {
			t.Errorf("a second picture on day 2 with a quota of 1 was allowed")
		}
	})
}

// nopImager, nopUploader and nopResponder let a real handlers.Imagine run.
type nopImager struct{}

func (nopImager) Image(context.Context, llm.ImageRequest) (*llm.Image, error) {
	return &llm.Image{Data: []byte("png"), Format: "png"}, nil
}

type nopUploader struct{}

func (nopUploader) UploadImage(context.Context, handlers.Upload) error { return nil }

type nopResponder struct{}

func (nopResponder) Respond(context.Context, string, string) error { return nil }

// A person whose daily quota is used up is told so every time they try, not, from the second
// try on, that they "already have 1 images in progress": the quota refusal comes after the
// wrapped Imagine.Accept has reserved a per-user place, which nobody gives back (it stays taken
// for 30 s).
func TestGuardQuotaRefusalDoesNotHoldImaginePlace(t *testing.T) {
	im := handlers.NewImagine(nopImager{}, nopUploader{}, nopResponder{}, nil, handlers.ImagineOptions{MaxPerUser: 1})
	h := guarded(t, im.Handler(), access.Rules{}, access.NewQuota(1, 0), &denials{})

	first := imagine("C0ART", "U0ALICE", "a fox")
	if d := h.Accept(first); !d.Run {
		t.Fatalf("first picture not started: %+v", d)
	}
	if err := h.Run(t.Context(), first); err != nil {
		t.Fatalf("first picture: %v", err)
	}
	for try := 2; try <= 3; try++ {
		d := h.Accept(imagine("C0ART", "U0ALICE", "a fox"))
		if d.Run {
			t.Fatalf("try %d started past the quota", try)
		}
		if !strings.Contains(d.Say, "for today") {
			t.Errorf("try %d told %q, want the quota message (no image is in progress)", try, d.Say)
		}
	}
}

// A CHANNEL_CONFIG whose entries are all commented out ("channels:" followed only by comments,
// what an operator gets by commenting out the example) is a file kept for later, like
// "channels: {}". It is refused instead, and the bot will not start, with an error that says
// the file has "no channels key" although it has one.
func TestParseOverridesChannelsKeyWithOnlyComments(t *testing.T) {
	data := []byte("channels:\n  # C0123ABCD:\n  #   model: gpt-5.4\n")
	o, err := access.ParseOverrides(data, "channels.yaml")
	if err != nil {
		t.Fatalf("ParseOverrides = %v; want no overrides, as for channels: {}", err)
	}
	if o.Len() != 0 {
		t.Errorf("Len = %d, want 0", o.Len())
	}
}
