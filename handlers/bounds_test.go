package handlers

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
)

// TestAnswerPanicIsANote: a panic in code an answer runs, in its own goroutine or in the writer's,
// ends that answer with a short note where it stands (and Regenerate), not the process.
func TestAnswerPanicIsANote(t *testing.T) {
	const boom = "renderer met bytes it cannot take"
	words := llmtest.Deltas(numbered(30), 200*time.Millisecond)
	tests := []struct {
		name  string
		steps []llmtest.Step
		set   func(*gatewaytest.Slack)
	}{
		{"in the answer's goroutine, reading the model's stream", append(slices.Clip(words[:10]), llmtest.Step{Panic: boom}), func(*gatewaytest.Slack) {}},
		{"in the writer's goroutine", words, func(f *gatewaytest.Slack) { f.UpdateErr = panicOnce(boom) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newReplyTest(t, tt.steps, testOptions())
				tt.set(rt.slack)
				err := rt.r.Reply(t.Context(), rt.req)
				var pe *panicError
				if !errors.As(err, &pe) {
					t.Fatalf("Reply = %v, want the panic as an error", err)
				}
				ms := rt.slack.BotMessages(testTS)
				if len(ms) == 0 {
					t.Fatal("no message: the asker is left with silence")
				}
				last := ms[len(ms)-1]
				if last.Mark.Note != textPanicked || last.Mark.Kind != convo.MarkError {
					t.Errorf("last message = %q %+v, want the note %q", last.Text, last.Mark, textPanicked)
				}
			})
		})
	}
}

// panicOnce is a hook that panics with v at its first call, and lets the later ones through.
func panicOnce(v any) gatewaytest.Hook {
	var done atomic.Bool
	return func(int, gatewaytest.Call) error {
		if done.CompareAndSwap(false, true) {
			panic(v)
		}
		return nil
	}
}

// TestAnswerLengthCap: a model that does not stop is cut at maxAnswerBytes, its stream closed, and
// the answer says why it ends there.
func TestAnswerLengthCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chunk := strings.Repeat("é", 500) + " " // 1,001 bytes, two-byte runes: the cut must not split one
		var steps []llmtest.Step
		for range 200 {
			steps = append(steps, llmtest.Step{Wait: 10 * time.Millisecond, Chunk: llm.Chunk{Content: chunk}})
		}
		rt := newReplyTest(t, steps, testOptions())
		if err := rt.r.Reply(t.Context(), rt.req); err != nil {
			t.Fatalf("Reply = %v", err)
		}
		var shown strings.Builder
		ms := rt.slack.BotMessages(testTS)
		for _, m := range ms {
			shown.WriteString(strings.TrimSuffix(m.Text, convo.NoteSuffix(m.Mark.Note, 0)))
		}
		if last := ms[len(ms)-1]; last.Mark.Note != textCapped {
			t.Errorf("last note = %q, want %q", last.Mark.Note, textCapped)
		}
		if n := strings.Count(shown.String(), "é"); n < maxAnswerBytes/2-600 || n > maxAnswerBytes/2 {
			t.Errorf("answer shows %d of the model's characters, want about %d", n, maxAnswerBytes/2)
		}
		if rt.chat.Yielded() >= len(steps) {
			t.Errorf("the model's stream was read to its end (%d chunks)", rt.chat.Yielded())
		}
	})
}

func TestCapAnswer(t *testing.T) {
	long := strings.Repeat("a", maxAnswerBytes)
	tests := []struct {
		name, prefix, answer string
		want                 int // bytes of answer kept
		cut                  bool
	}{
		{"short", "", "hello", 5, false},
		{"exactly the limit", "", long, maxAnswerBytes, false},
		{"one over", "", long + "b", maxAnswerBytes, true},
		{"after a prefix", strings.Repeat("p", 100), long, maxAnswerBytes - 100, true},
		{"prefix over the limit", long + "p", "more", 0, true},
		{"not inside a rune", "", long[1:] + "é", maxAnswerBytes - 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := capAnswer(tt.prefix, tt.answer)
			if len(got) != tt.want || cut != tt.cut {
				t.Errorf("capAnswer = %d bytes, %v; want %d, %v", len(got), cut, tt.want, tt.cut)
			}
		})
	}
}
