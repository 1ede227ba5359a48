package state

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/internal/redistest"
	"github.com/llmbot/llmbot/internal/waittest"
)

// threadStore is what the three thread stores have in common.
type threadStore interface {
	Bump(ctx context.Context) (int64, error)
	Begin(ctx context.Context, key, root, gen string, onlyNew bool) (bool, error)
	Fill(ctx context.Context, key, gen string, leftOut int, msgs []ThreadMessage) (bool, error)
	Apply(ctx context.Context, key string, ops []ThreadOp) error
	Load(ctx context.Context, key string) (ThreadEntry, bool, error)
}

var (
	_ threadStore = (*MemoryThreads)(nil)
	_ threadStore = (*RedisThreads)(nil)
	_ threadStore = (*FallbackThreads)(nil)
)

// testThreadLimits are small, so that the bounds are reached by a few messages.
var testThreadLimits = ThreadLimits{TTL: time.Minute, Bytes: 100, Entries: 3, Total: 250}

// threadBackend makes the thread stores of one test: replica gives one more that shares what the
// backend shares (shared: a Redis namespace).
type threadBackend struct {
	name   string
	shared bool
	setup  func(t *testing.T) func(t *testing.T, lim ThreadLimits) func() threadStore
}

var threadBackends = []threadBackend{
	{name: "Memory", setup: func(*testing.T) func(*testing.T, ThreadLimits) func() threadStore {
		return func(t *testing.T, lim ThreadLimits) func() threadStore {
			return func() threadStore {
				m, err := NewMemoryThreads(lim)
				check(t, err)
				return m
			}
		}
	}},
	{name: "Redis", shared: true, setup: func(t *testing.T) func(*testing.T, ThreadLimits) func() threadStore {
		srv := newRedisServer(t)
		return func(t *testing.T, lim ThreadLimits) func() threadStore {
			ns := srv.namespace()
			return func() threadStore {
				s, err := newTestRedis(t, srv.url, ns, "r").Threads(lim)
				check(t, err)
				return s
			}
		}
	}},
	{name: "Fallback", shared: true, setup: func(t *testing.T) func(*testing.T, ThreadLimits) func() threadStore {
		srv := newRedisServer(t)
		return func(t *testing.T, lim ThreadLimits) func() threadStore {
			ns := srv.namespace()
			return func() threadStore {
				hooks := FallbackHooks{Failed: func(op string) { t.Errorf("Redis call %s failed", op) }}
				f := NewFallback(newTestRedis(t, srv.url, ns, "r"), newTestMemory(t, "r", ""), zap.NewNop(), hooks)
				s, err := f.Threads(lim)
				check(t, err)
				return s
			}
		}
	}},
}

// threadContract is what every thread store does.
var threadContract = []struct {
	name   string
	shared bool // needs two replicas that share entries
	run    func(t *testing.T, replica func() threadStore)
}{
	{"filled entry is done and ordered", false, threadFilled},
	{"fill of an older begin is refused", false, threadOlderFill},
	{"a begin only new leaves an entry held", false, threadBeginOnlyNew},
	{"changes during the fill win over it", false, threadChangesDuringFill},
	{"a thread not held is left alone", false, threadNotHeld},
	{"a put without a mark keeps the mark held", false, threadPutKeepsMark},
	{"bump makes entries stale", false, threadBump},
	{"bytes bound: root and newest kept", false, threadBytesBound},
	{"a read that left some out starts the entry", false, threadReadLeftOut},
	{"entries bound: least recently changed dropped", false, threadEntriesBound},
	{"total bound: least recently changed dropped", false, threadTotalBound},
	{"entries expire", false, threadExpire},
	{"replicas share entries and epochs", true, threadShared},
}

func TestThreadContract(t *testing.T) {
	for _, b := range threadBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			newStores := b.setup(t)
			for _, c := range threadContract {
				if c.shared && !b.shared {
					continue
				}
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					lim := testThreadLimits
					if c.name == "entries expire" {
						lim.TTL = 200 * time.Millisecond
					}
					c.run(t, newStores(t, lim))
				})
			}
		})
	}
}

// msg is a message of the tests: its body is its text.
func msg(ts, body, mark string) ThreadMessage {
	return ThreadMessage{TS: ts, Body: []byte(body), Mark: []byte(mark)}
}

// shown is an entry's messages as "ts=body[mark]" for comparisons.
func shown(e ThreadEntry) string {
	var b strings.Builder
	for _, m := range e.Messages {
		fmt.Fprintf(&b, "%s=%s", m.TS, m.Body)
		if len(m.Mark) > 0 {
			fmt.Fprintf(&b, "[%s]", m.Mark)
		}
		b.WriteString(" ")
	}
	return strings.TrimSpace(b.String())
}

// filled begins and fills key with msgs, failing t on an error.
func filled(t *testing.T, s threadStore, key, root string, leftOut int, msgs ...ThreadMessage) {
	t.Helper()
	ctx := t.Context()
	_, err := s.Begin(ctx, key, root, "g", false)
	check(t, err)
	ok, err := s.Fill(ctx, key, "g", leftOut, msgs)
	check(t, err)
	if !ok {
		t.Fatal("Fill refused")
	}
}

// load is Load, failing t on an error or when key is not held.
func load(t *testing.T, s threadStore, key string) ThreadEntry {
	t.Helper()
	e, ok, err := s.Load(t.Context(), key)
	check(t, err)
	if !ok {
		t.Fatalf("Load(%s): not held", key)
	}
	return e
}

func wantShown(t *testing.T, e ThreadEntry, want string) {
	t.Helper()
	if got := shown(e); got != want {
		t.Fatalf("entry holds %q, want %q", got, want)
	}
}

func threadFilled(t *testing.T, replica func() threadStore) {
	s := replica()
	filled(t, s, "C/1.1", "1000000001.000000", 0,
		msg("1000000003.000000", "c", ""), msg("1000000001.000000", "a", "m1"), msg("1000000002.000000", "b", ""))
	e := load(t, s, "C/1.1")
	if !e.Done || e.Epoch != e.Current || e.LeftOut != 0 {
		t.Fatalf("entry done %v, epoch %d of %d, left out %d; want done, current, 0", e.Done, e.Epoch, e.Current, e.LeftOut)
	}
	wantShown(t, e, "1000000001.000000=a[m1] 1000000002.000000=b 1000000003.000000=c")
}

func threadOlderFill(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	_, err := s.Begin(ctx, "k", "", "first", false)
	check(t, err)
	_, err = s.Begin(ctx, "k", "", "second", false)
	check(t, err)
	ok, err := s.Fill(ctx, "k", "first", 0, []ThreadMessage{msg("1.1", "old read", "")})
	check(t, err)
	if ok {
		t.Fatal("the first Begin's Fill was taken after a second Begin")
	}
	if e := load(t, s, "k"); e.Done || len(e.Messages) != 0 {
		t.Fatalf("entry done %v with %q after a refused fill", e.Done, shown(e))
	}
}

func threadBeginOnlyNew(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	begun, err := s.Begin(ctx, "k", "1.1", "g", true)
	check(t, err)
	if !begun {
		t.Fatal("Begin only new of a thread not held: not begun")
	}
	ok, err := s.Fill(ctx, "k", "g", 0, []ThreadMessage{msg("1.1", "q", "")})
	check(t, err)
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.2", "answer", "")}}))
	if !ok {
		t.Fatal("Fill refused")
	}
	// A second delivery of the thread's first message must not drop what came since.
	if begun, err = s.Begin(ctx, "k", "1.1", "again", true); err != nil || begun {
		t.Fatalf("Begin only new of a thread held = %v, %v; want left as it is", begun, err)
	}
	if ok, err = s.Fill(ctx, "k", "again", 0, []ThreadMessage{msg("1.1", "q", "")}); err != nil || ok {
		t.Fatalf("Fill of a Begin that did not begin = %v, %v; want refused", ok, err)
	}
	wantShown(t, load(t, s, "k"), "1.1=q 1.2=answer")
}

func threadChangesDuringFill(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	_, err := s.Begin(ctx, "k", "1.1", "g", false)
	check(t, err)
	check(t, s.Apply(ctx, "k", []ThreadOp{
		{Kind: ThreadPut, ThreadMessage: msg("1.2", "edited", "")},
		{Kind: ThreadDelete, ThreadMessage: msg("1.3", "", "")},
		{Kind: ThreadPut, ThreadMessage: msg("1.4", "new", "")},
	}))
	// The read began before the changes: it shows what they changed.
	ok, err := s.Fill(ctx, "k", "g", 0, []ThreadMessage{msg("1.1", "q", ""), msg("1.2", "before", ""), msg("1.3", "deleted", "")})
	check(t, err)
	if !ok {
		t.Fatal("Fill refused")
	}
	wantShown(t, load(t, s, "k"), "1.1=q 1.2=edited 1.4=new")
	// A deleted message is not put back by a late event either.
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.3", "late", "")}}))
	wantShown(t, load(t, s, "k"), "1.1=q 1.2=edited 1.4=new")
}

func threadNotHeld(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.1", "a", "m")}}))
	if _, ok, err := s.Load(ctx, "k"); err != nil || ok {
		t.Fatalf("Load after an Apply to a thread not held = %v, %v; want not held", ok, err)
	}
}

func threadPutKeepsMark(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	filled(t, s, "k", "1.1", 0, msg("1.1", "q", ""))
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.2", "answer", "done")}}))
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.2", "answer as Slack shows it", "")}}))
	wantShown(t, load(t, s, "k"), "1.1=q 1.2=answer as Slack shows it[done]")
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.2", "x", "other")}}))
	wantShown(t, load(t, s, "k"), "1.1=q 1.2=x[other]")
}

func threadBump(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	filled(t, s, "k", "", 0, msg("1.1", "a", ""))
	if e := load(t, s, "k"); e.Epoch != e.Current {
		t.Fatalf("fresh entry of epoch %d, store at %d", e.Epoch, e.Current)
	}
	n, err := s.Bump(ctx)
	check(t, err)
	if e := load(t, s, "k"); e.Epoch >= e.Current || e.Current != n {
		t.Fatalf("after Bump (%d): entry of epoch %d, store at %d; want older, %d", n, e.Epoch, e.Current, n)
	}
	filled(t, s, "k", "", 0, msg("1.1", "a", ""))
	if e := load(t, s, "k"); e.Epoch != n {
		t.Fatalf("entry begun after Bump of epoch %d, want %d", e.Epoch, n)
	}
}

func threadBytesBound(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	long := strings.Repeat("x", 40)
	filled(t, s, "k", "1.1", 0, msg("1.1", long, ""), msg("1.2", long, ""))
	// 120 bytes: over the 100, so the oldest after the root goes.
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.3", long, "")}}))
	e := load(t, s, "k")
	wantShown(t, e, "1.1="+long+" 1.3="+long)
	if e.LeftOut != 1 {
		t.Fatalf("left out %d, want 1", e.LeftOut)
	}
	// A change to a message left out stays out.
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.2", "edited", "")}}))
	wantShown(t, load(t, s, "k"), "1.1="+long+" 1.3="+long)
	// The newest is kept even alone over the bound.
	huge := strings.Repeat("y", 150)
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.4", huge, "")}}))
	wantShown(t, load(t, s, "k"), "1.1="+long+" 1.4="+huge)
}

func threadReadLeftOut(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	_, err := s.Begin(ctx, "k", "1.1", "g", false)
	check(t, err)
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.2", "an old one edited", "")}}))
	ok, err := s.Fill(ctx, "k", "g", 5, []ThreadMessage{msg("1.1", "q", ""), msg("1.7", "a", ""), msg("1.8", "b", "")})
	check(t, err)
	if !ok {
		t.Fatal("Fill refused")
	}
	e := load(t, s, "k")
	wantShown(t, e, "1.1=q 1.7=a 1.8=b")
	if e.LeftOut != 5 {
		t.Fatalf("left out %d, want 5", e.LeftOut)
	}
}

func threadEntriesBound(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	for _, k := range []string{"a", "b", "c"} {
		filled(t, s, k, "", 0, msg("1.1", k, ""))
		time.Sleep(2 * time.Millisecond) // changed at different times of Redis's clock
	}
	check(t, s.Apply(ctx, "a", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.2", "a again", "")}}))
	time.Sleep(2 * time.Millisecond)
	filled(t, s, "d", "", 0, msg("1.1", "d", "")) // 3 at most
	if _, ok, err := s.Load(ctx, "b"); err != nil || ok {
		t.Fatalf("Load(b), the least recently changed of 4 = %v, %v; want dropped", ok, err)
	}
	for _, k := range []string{"a", "c", "d"} {
		load(t, s, k)
	}
}

func threadTotalBound(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	body := strings.Repeat("x", 90)
	for _, k := range []string{"a", "b", "c"} { // 270 bytes in all, over the 250
		filled(t, s, k, "", 0, msg("1.1", body, ""))
		time.Sleep(2 * time.Millisecond)
	}
	if _, ok, err := s.Load(ctx, "a"); err != nil || ok {
		t.Fatalf("Load(a) past the total = %v, %v; want dropped", ok, err)
	}
	load(t, s, "b")
	load(t, s, "c")
}

func threadExpire(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	s := replica()
	filled(t, s, "k", "", 0, msg("1.1", "a", ""))
	// A change renews it.
	time.Sleep(120 * time.Millisecond)
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.2", "b", "")}}))
	time.Sleep(120 * time.Millisecond)
	load(t, s, "k")
	waittest.Eventually(t, 2*time.Second, "entry expired", func() bool {
		_, ok, err := s.Load(ctx, "k")
		return err == nil && !ok
	})
}

func threadShared(t *testing.T, replica func() threadStore) {
	ctx := t.Context()
	a, b := replica(), replica()
	filled(t, a, "k", "1.1", 0, msg("1.1", "q", ""))
	check(t, b.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.2", "from b's event", "")}}))
	wantShown(t, load(t, a, "k"), "1.1=q 1.2=from b's event")
	if _, err := b.Bump(ctx); err != nil {
		t.Fatal(err)
	}
	if e := load(t, a, "k"); e.Epoch >= e.Current {
		t.Fatal("b's Bump did not make a's entry stale")
	}
}

// TestFallbackThreadsPartition: while Redis cannot be reached nothing is held (every Load a miss),
// and the first call after it is back bumps the epoch: an edit that did not reach Redis must not
// leave trusted an entry that misses it (another replica, which Redis served all along, sees the
// bump too).
func TestFallbackThreadsPartition(t *testing.T) {
	ctx := t.Context()
	srv := redistest.New(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	f := NewFallback(newTestRedis(t, proxy.URL(), "t:", "r"), newTestMemory(t, "r", ""), zap.NewNop(), FallbackHooks{})
	f.timeout = 200 * time.Millisecond
	s, err := f.Threads(testThreadLimits)
	check(t, err)
	other, err := newTestRedis(t, srv.URL(), "t:", "o").Threads(testThreadLimits)
	check(t, err)
	filled(t, s, "k", "1.1", 0, msg("1.1", "q", ""))
	proxy.Cut()
	// An edit arrives while this replica cannot reach Redis: it cannot reach the entry.
	check(t, s.Apply(ctx, "k", []ThreadOp{{Kind: ThreadPut, ThreadMessage: msg("1.1", "edited", "")}}))
	if _, ok, err := s.Load(ctx, "k"); err != nil || ok {
		t.Fatalf("Load while Redis is away = %v, %v; want a miss", ok, err)
	}
	if !f.Degraded() {
		t.Fatal("not degraded after failed calls")
	}
	proxy.Restore()
	if !f.probe(ctx) { // what Run does while degraded: it catches the thread store up before serving from Redis
		t.Fatal("the probe failed once Redis was back")
	}
	for name, st := range map[string]threadStore{"this replica": s, "another": other} {
		if e := load(t, st, "k"); e.Epoch >= e.Current {
			t.Fatalf("%s: entry of epoch %d trusted at %d after an edit that missed it", name, e.Epoch, e.Current)
		}
	}
}
