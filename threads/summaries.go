package threads

// Long threads: when a thread no longer fits the context budget, its oldest part (what convo.Build
// leaves out) is summarised by the model once, and the answers in that thread carry the summary and
// the recent messages in full. The summary is kept in this process's memory for the answers that
// follow, by thread, with a hash of what it summarises, so it is made again only when that part
// changes or when too many messages are left out beyond it.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/ttlcache"
	"github.com/llmbot/llmbot/llm"
)

// Chat streams a chat completion: the answers' own seam (metered, counted by the ledger).
type Chat interface {
	Stream(ctx context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error]
}

// SummaryOptions configure Summaries.
type SummaryOptions struct {
	TTL     time.Duration // how long a summary is kept; default 6 h
	Max     int           // how many summaries are kept; default 500
	Timeout time.Duration // the summary request's limit; default 30 s
	// Made, when set, is called once per summary made (metrics). It must not block.
	Made func()
}

// Summaries make and keep the summaries of long threads' oldest parts (handlers'
// ContextOptions.Summaries). Safe for concurrent use: two answers that need the same summary at
// once may both make it.
type Summaries struct {
	chat  Chat
	cache *ttlcache.Cache[threadSummary]
	opt   SummaryOptions
}

// maxSummaryBytes bounds a summary kept and replayed, whatever the model writes.
const maxSummaryBytes = 8 << 10

// NewSummaries returns an empty Summaries that ask chat for them.
func NewSummaries(chat Chat, opt SummaryOptions) *Summaries {
	if opt.TTL <= 0 {
		opt.TTL = 6 * time.Hour
	}
	if opt.Max <= 0 {
		opt.Max = 500
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	return &Summaries{chat: chat, cache: ttlcache.New[threadSummary](opt.Max, opt.TTL), opt: opt}
}

var errEmptySummary = errors.New("empty summary")

// threadSummary is the summary kept for a thread: its text, the ts of the newest message it
// stands for, and the hash of the messages it stands for (their ts and text).
type threadSummary struct {
	text, through, hash string
}

// maxBeyondSummary is how many messages may be left out between a thread's summary and the recent
// messages before the summary is made again, of all of them: a thread that goes on pushes its
// older messages out of the budget a few at a time, and a new summary for each answer would cost a
// model call each time.
const maxBeyondSummary = 20

// Summary returns a summary of earlier, the oldest messages of thread key, and the ts of the newest
// it stands for: the one kept when it still stands for the beginning of earlier (none of its
// messages changed) and few messages are left between it and the rest, or else one the model makes
// from req (through the answers' own seam) within the time limit.
func (s *Summaries) Summary(ctx context.Context, key string, earlier []slack.Message, req llm.ChatRequest) (convo.Summary, error) {
	if kept, ok := s.cache.Get(key); ok {
		i := slices.IndexFunc(earlier, func(m slack.Message) bool { return m.Timestamp == kept.through })
		if i >= 0 && len(earlier)-1-i <= maxBeyondSummary && summaryHash(earlier[:i+1]) == kept.hash {
			return convo.Summary{Text: kept.text, Through: kept.through}, nil
		}
	}
	text, err := s.make(ctx, req)
	if err != nil {
		return convo.Summary{}, err
	}
	through := earlier[len(earlier)-1].Timestamp
	s.cache.Put(key, threadSummary{text: text, through: through, hash: summaryHash(earlier)})
	if s.opt.Made != nil {
		s.opt.Made()
	}
	return convo.Summary{Text: text, Through: through}, nil
}

// make asks the model for a summary, bounded in time and bytes.
func (s *Summaries) make(ctx context.Context, req llm.ChatRequest) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opt.Timeout)
	defer cancel()
	var b strings.Builder
	for c, err := range s.chat.Stream(ctx, req) {
		if err != nil {
			return "", err
		}
		if b.Len() < maxSummaryBytes {
			b.WriteString(c.Content)
		}
	}
	text := strings.TrimSpace(strings.ToValidUTF8(clipBytes(b.String(), maxSummaryBytes), ""))
	if text == "" {
		return "", errEmptySummary
	}
	return text, nil
}

// clipBytes is s cut to at most n bytes.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// summaryHash is a hash of msgs' ts and text, so that an edit or a deletion among the messages a
// summary stands for makes a new one.
func summaryHash(msgs []slack.Message) string {
	h := sha256.New()
	for _, m := range msgs {
		h.Write([]byte(m.Timestamp + "\x00" + m.Text + "\x00"))
		if m.SubMessage != nil {
			h.Write([]byte(m.SubMessage.Text + "\x00"))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
