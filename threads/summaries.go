package threads

// Long threads: when a thread no longer fits the context budget, its oldest part (what convo.Build
// leaves out) is summarised by the model once, and the answers in that thread carry the summary and
// the recent messages in full. The summary is kept for the answers that follow, by thread, with a
// hash of what it summarises, so it is made again only when that part changes or when too many
// messages are left out beyond it. With the thread cache (SummaryOptions.Cache) it is kept beside
// the thread's entry, in the cache's store (Redis when the replicas share it: one replica's summary
// serves the others), signed like the entries: what the model wrote from other people's messages
// goes before the model again, and whoever can write to Redis must not be able to plant it. One that
// does not open (forged, unsigned, over its bound) is ignored and made again. Without the cache, it
// is kept in this process's memory.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

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
	// Reused, when set, is called once per summary kept that served again (metrics). It must not
	// block.
	Reused func()
	// Cache, when set and its store keeps summaries (SummaryStore), is where the summaries are kept
	// (TTL and Max are then the store's); nil: in this process's memory.
	Cache *Cache
}

// SummaryStore keeps the summaries beside the thread entries (state.MemoryThreads,
// state.FallbackThreads): the caller's bytes, read no further than maxBytes.
type SummaryStore interface {
	PutSummary(ctx context.Context, key string, data []byte) error
	LoadSummary(ctx context.Context, key string, maxBytes int) ([]byte, bool, error)
}

// Summaries make and keep the summaries of long threads' oldest parts (handlers'
// ContextOptions.Summaries). Safe for concurrent use: two answers that need the same summary at
// once may both make it.
type Summaries struct {
	chat Chat
	kept summaryKeeper
	opt  SummaryOptions
}

// summaryKeeper is where Summaries keep theirs: memoryKeeper or storeKeeper.
type summaryKeeper interface {
	get(ctx context.Context, key string) (threadSummary, bool)
	put(ctx context.Context, key string, s threadSummary)
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
	var kept summaryKeeper = memoryKeeper{ttlcache.New[threadSummary](opt.Max, opt.TTL)}
	if c := opt.Cache; c != nil {
		if st, ok := c.opt.Store.(SummaryStore); ok {
			kept = storeKeeper{store: st, seal: c.seal, log: c.log}
		}
	}
	return &Summaries{chat: chat, kept: kept, opt: opt}
}

var errEmptySummary = errors.New("empty summary")

// threadSummary is the summary kept for a thread: its text, the ts of the newest message it
// stands for, the hash of the messages it stands for (their ts and text), how many they are, and
// when it was made.
type threadSummary struct {
	Text    string `json:"text"`
	Through string `json:"through"`
	Hash    string `json:"hash"`
	Count   int    `json:"count"`
	Made    int64  `json:"made"` // unix seconds
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
	if kept, ok := s.kept.get(ctx, key); ok {
		i := slices.IndexFunc(earlier, func(m slack.Message) bool { return m.Timestamp == kept.Through })
		if i >= 0 && len(earlier)-1-i <= maxBeyondSummary && summaryHash(earlier[:i+1]) == kept.Hash {
			if s.opt.Reused != nil {
				s.opt.Reused()
			}
			return convo.Summary{Text: kept.Text, Through: kept.Through}, nil
		}
	}
	text, err := s.make(ctx, req)
	if err != nil {
		return convo.Summary{}, err
	}
	through := earlier[len(earlier)-1].Timestamp
	s.kept.put(ctx, key, threadSummary{Text: text, Through: through, Hash: summaryHash(earlier), Count: len(earlier), Made: time.Now().Unix()})
	if s.opt.Made != nil {
		s.opt.Made()
	}
	return convo.Summary{Text: text, Through: through}, nil
}

// memoryKeeper keeps the summaries in this process's memory.
type memoryKeeper struct {
	c *ttlcache.Cache[threadSummary]
}

func (k memoryKeeper) get(_ context.Context, key string) (threadSummary, bool) { return k.c.Get(key) }
func (k memoryKeeper) put(_ context.Context, key string, s threadSummary)      { k.c.Put(key, s) }

// storeKeeper keeps the summaries in the thread cache's store, signed (seal, part 's' of the
// thread's key, no ts).
type storeKeeper struct {
	store SummaryStore
	seal  sealer
	log   *zap.Logger
}

// maxStoredSummary bounds a stored summary's read: its text, the rest of its record, its signature.
const maxStoredSummary = maxSummaryBytes*2 + 1024

func (k storeKeeper) get(ctx context.Context, key string) (threadSummary, bool) {
	data, ok, err := k.store.LoadSummary(ctx, key, maxStoredSummary)
	if err != nil || !ok {
		if err != nil {
			k.log.Debug("thread summary: load failed", zap.String("key", key), zap.Error(err))
		}
		return threadSummary{}, false
	}
	var s threadSummary
	body, err := k.seal.open(key, "", 's', data)
	if err == nil {
		err = json.Unmarshal(body, &s)
	}
	if err == nil && (len(s.Text) > maxSummaryBytes || s.Text == "") {
		err = errors.New("no text, or over its bound")
	}
	if err != nil {
		k.log.Warn("thread summary: one kept is not this bot's, or not whole; it is made again", zap.String("key", key), zap.Error(err))
		return threadSummary{}, false
	}
	return s, true
}

func (k storeKeeper) put(ctx context.Context, key string, s threadSummary) {
	body, err := json.Marshal(s)
	if err == nil {
		err = k.store.PutSummary(ctx, key, k.seal.seal(key, "", 's', body))
	}
	if err != nil {
		k.log.Debug("thread summary: not kept", zap.String("key", key), zap.Error(err))
	}
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

// Kept returns the summary kept as key when it stands for hash (what it summarises: the caller's
// hash of it), reused; else the one made (within the time limit, bounded as the threads' are),
// which is then kept as key. /summarize keeps the summary of a long period's older part so (key:
// the channel and that part's hash).
func (s *Summaries) Kept(ctx context.Context, key, hash string, made func(context.Context) (string, error)) (text string, reused bool, err error) {
	if kept, ok := s.kept.get(ctx, key); ok && kept.Hash == hash {
		if s.opt.Reused != nil {
			s.opt.Reused()
		}
		return kept.Text, true, nil
	}
	text, err = made(ctx)
	if err != nil {
		return "", false, err
	}
	text = strings.TrimSpace(strings.ToValidUTF8(clipBytes(text, maxSummaryBytes), ""))
	if text == "" {
		return "", false, errEmptySummary
	}
	s.kept.put(ctx, key, threadSummary{Text: text, Hash: hash, Made: time.Now().Unix()})
	if s.opt.Made != nil {
		s.opt.Made()
	}
	return text, false, nil
}
