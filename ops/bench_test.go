package ops_test

import (
	"testing"
	"time"

	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/ops"
)

// A 500-chunk stream read directly and through MeteredChat: the decorator's cost per stream.
func BenchmarkChatStream(b *testing.B) {
	steps := make([]step, 500)
	for i := range steps {
		steps[i] = step{chunk: llm.Chunk{Content: "tok "}}
	}
	steps[len(steps)-1].chunk.Usage = &llm.Usage{PromptTokens: 1000, CompletionTokens: 500}
	chat := &fakeChat{steps: steps}
	m := ops.NewMetrics()
	metered := m.Chat(chat, "gpt-bench")
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			chat.got = chat.got[:0]
			_, _ = drain(chat.Stream(b.Context(), llm.ChatRequest{}))
		}
	})
	b.Run("metered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			chat.got = chat.got[:0]
			_, _ = drain(metered.Stream(b.Context(), llm.ChatRequest{}))
		}
	})
}

// One Slack call recorded (label checks, two counters, a histogram).
func BenchmarkSlackCall(b *testing.B) {
	m := ops.NewMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.SlackCall("chat.update", 200, nil, 80*time.Millisecond)
	}
}
