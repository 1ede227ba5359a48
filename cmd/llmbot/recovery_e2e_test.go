package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/redistest"
)

// burstAnswer is long enough to be written in several steps under load (a first text, then the
// rest by an edit or a continuation post), and ends with a sentence that shows it is whole.
const burstAnswer = "Token buckets refill at a steady rate.\n\nEach write takes one token, and a write that finds none waits.\n\n" +
	"Slack answers a write beyond its limit with a 429 and a Retry-After.\n\nThat is the whole answer."

// TestCrashAfterABurstLeavesFinishedAnswersAlone: two replicas on one Redis answer a burst of
// questions over ten channels; once every answer shows whole (some still tidying a stale Stop
// button, the edit budget being spent), both processes are stopped (kill -9, or SIGTERM) and a new
// replica starts. Past the liveness TTL and an orphan scan, every answer is untouched (no
// "Interrupted" note, no write at all) and the journal is empty.
//
// N = 50 questions (5 per channel), as in the field report: enough for the edit budget (50 a minute for the workspace) to
// be behind, so answers end by a continuation post with Stop buttons still to tidy (what left
// finished answers open in the journal), while the test stays under a minute; SIGKILL and SIGTERM run
// side by side.
func TestCrashAfterABurstLeavesFinishedAnswersAlone(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			const channels, perChannel = 10, 5
			srv := redistest.New(t)
			rs := newReplicaSet(t, "REDIS_URL="+srv.URL())
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
			t.Cleanup(cancel)
			rs.ctx = ctx
			rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
				return fakellm.Text(burstAnswer).Paced(200*time.Millisecond, 30*time.Millisecond)
			})
			a, b := rs.start(), rs.start()
			type question struct{ channel, ts string }
			var qs []question
			for i := range channels * perChannel {
				ch := fmt.Sprintf("C%02d", i%channels)
				p := []*replica{a, b}[i%2]
				ts, err := rs.fs.Via(p.conn).Post(fakeslack.UserMessage{Channel: ch, User: "U1", Text: fmt.Sprintf("<@UBOT> question %d", i)})
				if err != nil {
					t.Fatal(err)
				}
				qs = append(qs, question{ch, ts})
			}
			whole := func(q question) bool {
				return strings.Contains(joinedReplies(rs.fs, q.channel, q.ts), "That is the whole answer.")
			}
			asked := time.Now()
			rs.wait("every answer whole", func() bool {
				for _, q := range qs {
					if !whole(q) {
						return false
					}
				}
				return true
			})
			t.Logf("%d answers whole %v after the burst", len(qs), time.Since(asked).Round(100*time.Millisecond))
			stale := 0
			for _, q := range qs {
				replies := rs.fs.BotReplies(q.channel, q.ts)
				for _, m := range replies[:len(replies)-1] {
					stale += len(m.Buttons())
				}
			}
			t.Logf("stale Stop buttons when the replicas stop: %d", stale)
			for _, p := range []*replica{a, b} {
				stopReplica(t, p, sig)
			}
			writes := len(rs.fs.Writes())
			rs.start()
			time.Sleep(20 * time.Second) // the liveness TTL (15 s) and an orphan scan (every 5 s)
			for _, w := range rs.fs.WritesSince(writes) {
				t.Errorf("a write after the replicas stopped: %+v", w)
			}
			for _, q := range qs {
				if got := joinedReplies(rs.fs, q.channel, q.ts); strings.Contains(got, "nterrupted") || !whole(q) {
					t.Errorf("answer in %s to %s: %q; want it whole and untouched", q.channel, q.ts, got)
				}
			}
			if n := openAnswers(t, srv.URL()); n != 0 {
				t.Errorf("%d answers still open in the journal; want none", n)
			}
		})
	}
}

// stopReplica ends p with sig and waits for it to exit.
func stopReplica(t *testing.T, p *replica, sig syscall.Signal) {
	t.Helper()
	if sig == syscall.SIGKILL {
		p.kill()
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		p.exited <- nil // for the cleanup's kill
	case <-time.After(15 * time.Second):
		t.Fatalf("a replica still runs 15 s after %v", sig)
	}
}

// joinedReplies is the bot's replies in the thread of ts in channel, joined.
func joinedReplies(fs *fakeslack.Server, channel, ts string) string {
	var parts []string
	for _, m := range fs.BotReplies(channel, ts) {
		parts = append(parts, m.Text)
	}
	return strings.Join(parts, "\n")
}

// openAnswers counts the open answers in the journal in Redis (every namespace's set of open ids).
func openAnswers(t *testing.T, url string) int {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := c.Keys(ctx, "*answer:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range keys {
		if typ, err := c.Type(ctx, k).Result(); err == nil && typ == "hash" { // not a claim (a string)
			n++
		}
	}
	return n
}

// TestReplicaCutOffFromRedisStopsWriting: replica A writes a slow answer and is cut off from Redis (a
// network partition: B still reaches it). B takes A for dead and closes the answer as interrupted;
// A, fenced from half its liveness TTL on, writes nothing over B's note, neither while cut off nor
// once it reaches Redis again (the answer is B's now), though its model goes on answering.
func TestReplicaCutOffFromRedisStopsWriting(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	rs := newReplicaSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	rs.ctx = ctx
	words := strings.Repeat("word ", 64) + "end."
	rs.fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(words).Paced(200*time.Millisecond, 500*time.Millisecond) // about 30 s
	})
	a := rs.start("REDIS_URL=" + proxy.URL())
	rs.start("REDIS_URL=" + srv.URL())
	ts := rs.ask(a, "count slowly")
	rs.wait("a partial answer", func() bool { return strings.Contains(rs.answer(ts), "word word") })
	proxy.Cut()
	cut := time.Now()
	rs.wait("the answer closed by the other replica", func() bool { return strings.Contains(rs.answer(ts), "Interrupted") })
	t.Logf("closed %v after the cut", time.Since(cut).Round(100*time.Millisecond))
	noted := len(rs.fs.Writes())
	proxy.Restore()
	rs.wait("the cut-off replica back on Redis and done with its model", func() bool {
		logs := a.logs.String()
		return strings.Contains(logs, "Redis answers again") && strings.Contains(logs, `"msg":"reply done"`)
	})
	for _, w := range rs.fs.WritesSince(noted) {
		if w.ThreadTS == ts {
			t.Errorf("a write over the closed answer: %+v", w)
		}
	}
	if got := rs.answer(ts); !strings.Contains(got, "Interrupted") || strings.Contains(got, "end.") {
		t.Errorf("answer %q; want what it showed when cut off, with the interrupted note", got)
	}
}
