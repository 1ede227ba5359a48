package feedback

import (
	"errors"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/route"
)

// Each side of the pair carries its rating and the answer it is on; a value the bot did not make
// is refused.
func TestValuesParseBack(t *testing.T) {
	ref := route.ReplyRef{ThreadTS: "1700000000.000001", TS: "1700000000.000002"}
	good, bad := Values(ref.Value())
	tests := []struct {
		name  string
		value string
		good  bool
	}{
		{"👍", good, true},
		{"👎", bad, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, r, err := Parse(tt.value)
			if err != nil || g != tt.good || r != ref {
				t.Errorf("Parse(%s) = %v, %+v, %v, want %v, %+v", tt.value, g, r, err, tt.good, ref)
			}
		})
	}
	if g, b := Values("not a reference"); g != "" || b != "" {
		t.Errorf("Values of a foreign value = %q, %q, want none", g, b)
	}
	if _, _, err := Parse("{"); !errors.Is(err, route.ErrBadValue) {
		t.Errorf("Parse({) = %v, want route.ErrBadValue", err)
	}
}

// A 👍 is counted and runs nothing; a 👎 is counted, runs at once (the modal's trigger lasts 3
// seconds) and is posted to the feedback channel by the person's id, not a mention.
func TestRatingsCountedAndBadOnesPosted(t *testing.T) {
	type rating struct {
		good         bool
		place, model string
	}
	fs := gatewaytest.NewSlack()
	var rated []rating
	f := New(nil, fs, nil, zaptest.NewLogger(t), Options{Channel: "CFEEDBACK",
		Model: func(string) string { return "gpt-test" },
		Rated: func(good bool, place, model string) { rated = append(rated, rating{good, place, model}) }})
	good, bad := Values(route.ReplyRef{ThreadTS: "1700000000.000001", TS: "1700000000.000002"}.Value())
	click := func(value string) *route.Request {
		return &route.Request{Kind: route.Action, Name: Action, Channel: "C1", User: "U2", MessageTS: "1700000000.000003", Text: value}
	}
	h := f.Handler()
	if d := h.Accept(click(good)); d.Run {
		t.Errorf("👍: %+v, want nothing to run", d)
	}
	req := click(bad)
	if d := h.Accept(req); !d.Run || !d.Now {
		t.Fatalf("👎: %+v, want it run at once", d)
	}
	if err := h.Run(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	want := []rating{{true, "channel", "gpt-test"}, {false, "channel", "gpt-test"}}
	if len(rated) != len(want) || rated[0] != want[0] || rated[1] != want[1] {
		t.Errorf("rated %+v, want %+v", rated, want)
	}
	posts := fs.CallsOf("post")
	if len(posts) != 1 || posts[0].Text != "👎 from user U2 on an answer in <#C1> (gpt-test)." {
		t.Errorf("feedback channel posts %+v, want the 👎 by the person's id", posts)
	}
}
