package handlers

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/route"
)

// lagResult is what one simulated load run measured, in fake time.
type lagResult struct {
	meanLag, bestLag time.Duration
	finalDelayMax    time.Duration
	throttled        int
	wrong            int
}

// simulate runs n replies that start together, each streaming tokens words (first after a second, then
// one every 50 ms), against a fake Slack that enforces 50 chat.update a minute (burst 5) with 429s. Visible
// lag: for each token, the time from the model sending it to the first applied edit showing it (a token
// never shown counts until the end of the run).
func simulate(t *testing.T, n, tokens int, policy pace.Policy) lagResult {
	const perMinute, burst = 50.0, 5
	var res lagResult
	synctest.Test(t, func(t *testing.T) {
		fs := gatewaytest.NewSlack()
		fs.Limit = gatewaytest.NewLimiter(perMinute, burst)
		var ws []string
		for i := range tokens {
			ws = append(ws, fmt.Sprintf("w%d ", i))
		}
		steps := []llmtest.Step{{Wait: time.Second, Chunk: llm.Chunk{Content: ws[0]}}}
		for _, w := range ws[1:] {
			steps = append(steps, llmtest.Step{Wait: 50 * time.Millisecond, Chunk: llm.Chunk{Content: w}})
		}
		steps = append(steps, llmtest.Step{Chunk: llm.Chunk{FinishReason: "stop"}})
		opt := testOptions()
		// The model writes before a placeholder would be due, as in the load tool's scenario (the
		// product's default waits a second for it): every answer's first text is a post.
		opt.PlaceholderAfter = 2 * time.Second
		opt.Budgets.Edits = pace.NewScheduler(perMinute, burst, pace.WithPolicy(policy))
		r := NewReplies(fs, fs, fs, fs, &llmtest.Chat{Steps: steps}, zap.NewNop(), opt)
		for i := range n {
			fs.Threads[fmt.Sprint("C", i, "/", testTS)] = []slack.Message{mention("<@UBOT> go")}
		}
		t0 := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			ch := fmt.Sprint("C", i)
			req := route.ReplyRequest{Channel: ch, ChannelType: "channel", User: "U1", Team: "T1", TS: testTS, ThreadTS: testTS, Text: "<@UBOT> go"}
			wg.Go(func() {
				if err := r.Reply(t.Context(), req); err != nil && policy == pace.PolicyFair {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		end := time.Now()

		sent := func(k int) time.Time { return t0.Add(time.Second + time.Duration(k)*50*time.Millisecond) }
		last := sent(tokens - 1)
		var total time.Duration
		channel := map[string]string{} // message ts -> channel
		texts := map[string][]string{} // channel -> its messages' texts, in order
		for _, m := range fs.BotMessages(testTS) {
			channel[m.TS] = m.Channel
			texts[m.Channel] = append(texts[m.Channel], m.Text)
		}
		for _, ts := range texts {
			if strings.Join(strings.Fields(strings.Join(ts, " ")), " ") != strings.TrimSpace(strings.Join(ws, "")) {
				res.wrong++
			}
		}
		// Each answer's successful writes in order (edits, and posts of its text: an answer may go on in
		// a new message), by channel: how many words its messages showed together.
		writes := map[string][]gatewaytest.Call{}
		for _, c := range append(fs.CallsOf("update"), fs.CallsOf("post")...) {
			if c.Err == nil && c.Text != textThinking {
				writes[channel[c.TS]] = append(writes[channel[c.TS]], c)
			}
		}
		for _, ws := range writes {
			slices.SortStableFunc(ws, func(a, b gatewaytest.Call) int { return a.At.Compare(b.At) })
			words := map[string]int{} // message ts -> words it shows
			k := 0
			for _, w := range ws {
				words[w.TS] = len(strings.Fields(w.Text))
				shownNow := 0
				for _, n := range words {
					shownNow += n
				}
				for ; k < shownNow && k < tokens; k++ {
					total += w.At.Sub(sent(k))
				}
			}
			for ; k < tokens; k++ { // never shown (the final write was lost): counted until the run ended
				total += end.Sub(sent(k))
			}
			if d := ws[len(ws)-1].At.Sub(last); d > res.finalDelayMax {
				res.finalDelayMax = d
			}
		}
		res.meanLag = total / time.Duration(n*tokens)
		// Best possible: every reply gets an equal share, evenly spaced: a token waits half an interval.
		res.bestLag = time.Duration(float64(n) / (perMinute / 60) / 2 * float64(time.Second))
		res.throttled = fs.Limit.Throttled
	})
	return res
}

// TestVisibleLagUnderLoad simulates 1, 10 and 50 answers streaming at once under Slack's chat.update
// limit in fake time (deterministic: no machine speed is measured) and checks the fair policy against
// the best possible lag and the baselines, and that every answer's end shows within finalWithin of
// the model's last token (the end goes in a new message when no edit turn comes soon).
func TestVisibleLagUnderLoad(t *testing.T) {
	const finalWithin = 8 * time.Second
	for _, n := range []int{1, 10, 50} {
		fair := simulate(t, n, 400, pace.PolicyFair)
		every1s := simulate(t, n, 400, pace.PolicyEvery1s)
		every20 := simulate(t, n, 400, pace.PolicyEvery20Chunks)
		t.Logf("N=%d best %v | fair %v (%.2fx, final+%v, 429s %d, wrong %d) | every-1s %v (final+%v, 429s %d, wrong %d) | every-20-chunks %v (final+%v, 429s %d, wrong %d)",
			n, fair.bestLag, fair.meanLag, float64(fair.meanLag)/float64(fair.bestLag), fair.finalDelayMax, fair.throttled, fair.wrong,
			every1s.meanLag, every1s.finalDelayMax, every1s.throttled, every1s.wrong,
			every20.meanLag, every20.finalDelayMax, every20.throttled, every20.wrong)
		if fair.wrong != 0 {
			t.Errorf("N=%d: %d wrong final texts", n, fair.wrong)
		}
		if fair.throttled != 0 {
			t.Errorf("N=%d: fair policy got %d 429s", n, fair.throttled)
		}
		if fair.finalDelayMax > finalWithin {
			t.Errorf("N=%d: an answer's end showed %v after the model's last token, want within %v", n, fair.finalDelayMax, finalWithin)
		}
		if fair.meanLag > fair.bestLag*5/4 {
			t.Errorf("N=%d: fair mean lag %v is over 1.25x the best possible %v", n, fair.meanLag, fair.bestLag)
		}
		// A baseline is beaten when it shows text later on average, or loses answers (its lag then covers
		// only what it managed to show before giving up).
		for name, b := range map[string]lagResult{"every-1s": every1s, "every-20-chunks": every20} {
			if n > 1 && b.wrong == 0 && fair.meanLag >= b.meanLag {
				t.Errorf("N=%d: fair mean lag %v not below %s (%v)", n, fair.meanLag, name, b.meanLag)
			}
		}
	}
}
