package schedule

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap/zaptest"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/summarize"
)

func TestSummaryPeriod(t *testing.T) {
	for _, c := range []struct {
		prompt  string
		period  time.Duration
		summary bool
		refused bool
	}{
		{"summarize", 24 * time.Hour, true, false},
		{"summarize 7d", 7 * 24 * time.Hour, true, false},
		{" Summarise 12 hours ", 12 * time.Hour, true, false},
		{"/summarize 2w", 14 * 24 * time.Hour, true, false},
		{"summarize 1 day", 24 * time.Hour, true, false},
		{"summarize 30d", 30 * 24 * time.Hour, true, false},
		{"summarize 31d", 0, false, true},
		{"summarize 0h", 0, false, true},
		{"summarize 5 fortnights", 0, false, true},
		{"summarize 200", 0, false, true},
		{"summarize 99999999h", 0, false, true},
		{"summarize the release thread", 0, false, false},
		{"what is new?", 0, false, false},
	} {
		period, ok, err := SummaryPeriod(c.prompt)
		_, refused := IsRefusal(err)
		if period != c.period || ok != c.summary || refused != c.refused || (err != nil) != c.refused {
			t.Errorf("SummaryPeriod(%q) = %v, %v, %v; want %v, %v, refused %v", c.prompt, period, ok, err, c.period, c.summary, c.refused)
		}
	}
}

// bot dispatches what the asker submits to the summaries' route as the bot's loop does: Accept, then
// Run when it says so; what Run returns stays with the loop, as the bot's does, not the submitter's.
type bot struct{ summaries route.Handler }

func (b bot) Submit(ctx context.Context, req *route.Request) error {
	if req.Kind != route.Event || req.Name != EventSummary {
		return fmt.Errorf("no route %s %s", req.Kind, req.Name)
	}
	if d := b.summaries.Accept(req); d.Run {
		_ = b.summaries.Run(ctx, req) // its failure was the handler's to tell
	}
	return nil
}

// summaryChat answers every request with answer, or fails with err, and keeps the requests.
type summaryChat struct {
	mu     sync.Mutex
	reqs   []llm.ChatRequest
	answer string
	err    error
}

func (c *summaryChat) Stream(_ context.Context, req llm.ChatRequest) iter.Seq2[llm.Chunk, error] {
	c.mu.Lock()
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	return func(yield func(llm.Chunk, error) bool) {
		if c.err != nil {
			yield(llm.Chunk{}, c.err)
			return
		}
		if yield(llm.Chunk{Content: c.answer}, nil) {
			yield(llm.Chunk{FinishReason: "stop"}, nil)
		}
	}
}

func (c *summaryChat) got() []llm.ChatRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]llm.ChatRequest(nil), c.reqs...)
}

// TestSummaryScheduleRuns: at its occurrence, a summary schedule has summarize read its period of the
// channel (not what is older) and posts the summary there publicly, naming the schedule and its
// creator; when the model fails, nothing is posted and the creator is told privately.
func TestSummaryScheduleRuns(t *testing.T) {
	for _, c := range []struct {
		name     string
		chatErr  error
		wantPost string // in the one public post; "": none
		wantTold string // in the one private note to the creator; "": none
	}{
		{"posts the summary", nil, "*Summary of the last 2 days in this channel* (1 message):\n\n• Bob shipped the release.", ""},
		{"tells the creator when it fails", &llm.Error{Kind: llm.KindInvalid, Message: "bad model"}, "", "could not be written in <#C1>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := gatewaytest.NewSlack()
				chat := &summaryChat{answer: "- Bob shipped the release.", err: c.chatErr}
				say := func(user, text string, ago time.Duration) {
					var m slack.Message
					m.User, m.Text, m.Timestamp = user, text, convo.TS(time.Now().Add(9*time.Hour-ago))
					fs.TopLevel["C1"] = append(fs.TopLevel["C1"], m)
				}
				say("U2", "an old plan", 3*24*time.Hour)
				say("U2", "release shipped", 24*time.Hour)
				log := zaptest.NewLogger(t)
				sum := summarize.New(fs, fs, gateway.NewNames(fs, nil, "UBOT"), chat, nil, log,
					summarize.Options{BotUserID: "UBOT", BotID: "BBOT", BotName: "llmbot"})
				m := memoryStore(t, "")
				s := NewSchedules(m.Records(), testKey, limits)
				sc := mustAdd(t, s, "C1", "U1", "every day at 9:00 | summarize 2d", time.Now())
				tell, o := &fakeTeller{}, &outcomes{}
				asker := NewAsker(fs, bot{summaries: s.SummaryHandler(sum, fs, tell, log)})
				stop := running(t, newTestRunner(t, s, m.Keys(), asker, tell, o, time.Hour))
				defer stop()

				time.Sleep(9*time.Hour + time.Second)
				synctest.Wait()
				var posts []string
				for _, p := range fs.CallsOf("post") {
					if p.Thread != "" || p.Mark.Kind != convo.MarkSummary {
						t.Errorf("post %+v, want a top-level summary", p)
					}
					posts = append(posts, p.Text)
				}
				wantPosts := 0
				if c.wantPost != "" {
					wantPosts = 1
				}
				if len(posts) != wantPosts || (wantPosts == 1 && (!strings.HasPrefix(posts[0], SummaryHeader(sc)) || !strings.Contains(posts[0], c.wantPost))) {
					t.Fatalf("posts %q, want %d saying %q under %q", posts, wantPosts, c.wantPost, SummaryHeader(sc))
				}
				reqs := chat.got()
				if len(reqs) != 1 {
					t.Fatalf("%d model requests, want 1", len(reqs))
				}
				if tr := reqs[0].Messages[len(reqs[0].Messages)-1].Content; !strings.Contains(tr, "release shipped") || strings.Contains(tr, "old plan") {
					t.Errorf("transcript is not the last 2 days:\n%s", tr)
				}
				notes := tell.got()
				if c.wantTold == "" && len(notes) != 0 || c.wantTold != "" && (len(notes) != 1 || notes[0].user != "U1" || !strings.Contains(notes[0].text, c.wantTold)) {
					t.Errorf("private notes %+v, want %q to U1", notes, c.wantTold)
				}
			})
		})
	}
}

// A summary's prompt with a period that is none is refused when the schedule is added.
func TestAddRefusesABadSummaryPeriod(t *testing.T) {
	s := NewSchedules(memoryStore(t, "").Records(), testKey, limits)
	_, err := s.Add(t.Context(), "T1", "C1", "U1", "every monday at 9:00 | summarize 45d", time.Now())
	if why, ok := IsRefusal(err); !ok || !strings.Contains(why, "up to 30 days") {
		t.Fatalf("Add = %v, want a refusal naming the bound", err)
	}
	if errors.Is(err, ErrWhen) {
		t.Fatal("refused for its schedule, not its period")
	}
}
