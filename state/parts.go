package state

// Each store is handed out by concern, so that each consumer holds only the part it uses: Keys (claims,
// marks, counters and token buckets: keys with a TTL), Answers (the journal of open answers and the fence of
// their writes), Inbox (messages between replicas). Leases and liveness stay with the store itself, which
// also runs the replica (Run) and closes it. A part is a view of its store: it holds no state of its own, so
// parts taken at any time all see the same store.

// RedisKeys are a Redis store's claims, marks, counters and token buckets.
type RedisKeys struct{ r *Redis }

// RedisAnswers is a Redis store's journal of open answers.
type RedisAnswers struct{ r *Redis }

// RedisInbox is a Redis store's messages between replicas.
type RedisInbox struct{ r *Redis }

// Keys are r's claims, marks, counters and token buckets.
func (r *Redis) Keys() RedisKeys { return RedisKeys{r} }

// Answers is r's journal of open answers.
func (r *Redis) Answers() RedisAnswers { return RedisAnswers{r} }

// Inbox is r's messages between replicas.
func (r *Redis) Inbox() RedisInbox { return RedisInbox{r} }

// MemoryKeys are a Memory's claims, marks, counters and token buckets.
type MemoryKeys struct{ m *Memory }

// MemoryAnswers is a Memory's journal of open answers.
type MemoryAnswers struct{ m *Memory }

// MemoryInbox is a Memory's messages to itself.
type MemoryInbox struct{ m *Memory }

// Keys are m's claims, marks, counters and token buckets.
func (m *Memory) Keys() MemoryKeys { return MemoryKeys{m} }

// Answers is m's journal of open answers.
func (m *Memory) Answers() MemoryAnswers { return MemoryAnswers{m} }

// Inbox is m's messages to itself.
func (m *Memory) Inbox() MemoryInbox { return MemoryInbox{m} }

// FallbackKeys are a Fallback's claims, marks, counters and token buckets.
type FallbackKeys struct{ f *Fallback }

// FallbackAnswers is a Fallback's journal of open answers.
type FallbackAnswers struct{ f *Fallback }

// FallbackInbox is a Fallback's messages between replicas.
type FallbackInbox struct{ f *Fallback }

// Keys are f's claims, marks, counters and token buckets.
func (f *Fallback) Keys() FallbackKeys { return FallbackKeys{f} }

// Answers is f's journal of open answers.
func (f *Fallback) Answers() FallbackAnswers { return FallbackAnswers{f} }

// Inbox is f's messages between replicas.
func (f *Fallback) Inbox() FallbackInbox { return FallbackInbox{f} }
