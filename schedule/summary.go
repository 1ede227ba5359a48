package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// EventSummary names the route of a scheduled summary's run: the request SlackAsker submits for a
// schedule whose prompt is a summary, so that it passes the access rules as its creator's. Slack
// sends no event of that name (the bot makes requests only of the events it knows).
const EventSummary = "scheduled_summary"

// Summaries writes the summary of a channel's last period, as mrkdwn to post there, for user
// (summarize.Summarizer).
type Summaries interface {
	Summary(ctx context.Context, channel, user string, period time.Duration) (string, error)
}

// Bounds of a scheduled summary's period: /summarize's.
const (
	summaryDefault = 24 * time.Hour
	summaryMax     = 30 * 24 * time.Hour
)

// summaryRE is a summary prompt: "summarize", "summarise" or "/summarize", and a period ("7d",
// "12 hours", "2w") or none.
var (
	summaryRE     = regexp.MustCompile(`^/?summari[sz]e(?:\s+(\d{1,6})\s*([a-z]+))?$`)
	summaryLikeRE = regexp.MustCompile(`^/?summari[sz]e\s+\d`)
)

// summaryUnits are the period's units.
var summaryUnits = map[string]time.Duration{
	"h": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// SummaryPeriod reads a prompt that asks for a summary of the channel's last period ("summarize
// 7d"; "summarize" alone is the last 24 hours): ok false for any other prompt, which is asked as
// written; an error (a Refusal) for a summary whose period is not one (zero, over 30 days, no unit).
func SummaryPeriod(prompt string) (period time.Duration, ok bool, err error) {
	p := strings.ToLower(strings.TrimSpace(prompt))
	m := summaryRE.FindStringSubmatch(p)
	if m == nil {
		if summaryLikeRE.MatchString(p) {
			return 0, false, refuse("Write a summary's period as hours, days or weeks, up to 30 days: `summarize 7d`.")
		}
		return 0, false, nil
	}
	if m[1] == "" {
		return summaryDefault, true, nil
	}
	n, _ := strconv.Atoi(m[1]) // at most six digits
	unit, known := summaryUnits[m[2]]
	if !known || n == 0 || time.Duration(n) > summaryMax/unit {
		return 0, false, refuse("Write a summary's period as hours, days or weeks, up to 30 days: `summarize 7d`.")
	}
	return time.Duration(n) * unit, true, nil
}

// SummaryHandler runs scheduled summaries (the route EventSummary): the summary of the schedule's
// period in its channel, written by sum for its creator, posted there publicly under a line that
// says whose schedule it is. A failure is told to the creator privately.
func (s *Schedules) SummaryHandler(sum Summaries, post Poster, tell Teller, log *zap.Logger) route.Handler {
	h := &summaryRun{s: s, sum: sum, post: post, tell: tell, log: log}
	return route.Funcs{AcceptFunc: func(*route.Request) route.Decision { return route.Decision{Run: true} }, RunFunc: h.run}
}

type summaryRun struct {
	s    *Schedules
	sum  Summaries
	post Poster
	tell Teller
	log  *zap.Logger
}

func (h *summaryRun) run(ctx context.Context, req *route.Request) error {
	sc, ok, err := h.s.get(ctx, req.Text)
	if err != nil {
		return err
	}
	// Deleted since it was asked, or not the schedule of this channel and person: nothing runs.
	if !ok || sc.Channel != req.Channel || sc.Creator != req.User {
		return nil
	}
	period, ok, _ := SummaryPeriod(sc.Prompt) // Add checked it
	if !ok {
		return nil
	}
	text, err := h.sum.Summary(ctx, sc.Channel, sc.Creator, period)
	if err == nil {
		_, err = h.post.Post(ctx, sc.Channel, "", gateway.Msg{Text: SummaryHeader(sc) + "\n\n" + text,
			Mark: convo.Mark{Kind: convo.MarkSummary}})
	}
	if err == nil {
		return nil
	}
	h.log.Error("schedule: summary failed", zap.String("schedule", sc.ID), zap.String("channel", sc.Channel), zap.Error(err))
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
	defer cancel()
	note := fmt.Sprintf("Your scheduled summary `%s` (%s) could not be written in <#%s> this time.", sc.ID, sc.When, sc.Channel)
	if terr := h.tell.Tell(tctx, sc.Channel, sc.Creator, note); terr != nil {
		h.log.Warn("schedule: telling the creator that a summary failed", zap.Error(terr))
	}
	return fmt.Errorf("scheduled summary %s: %w", sc.ID, err)
}

// SummaryHeader is the line a scheduled summary starts with: which schedule, whose.
func SummaryHeader(sc Schedule) string {
	return fmt.Sprintf("Scheduled summary `%s` of <@%s> (%s):", sc.ID, sc.Creator, sc.When)
}

// get returns schedule id (false: none, or not sealed under the key).
func (s *Schedules) get(ctx context.Context, id string) (Schedule, bool, error) {
	sealed, ok, err := s.rec.Get(ctx, collSchedules, id)
	if err != nil || !ok {
		return Schedule{}, false, wrapGet(err)
	}
	b, ok := state.Unseal(s.key, collSchedules, id, sealed)
	var sc Schedule
	if !ok || json.Unmarshal(b, &sc) != nil || sc.ID != id {
		return Schedule{}, false, nil
	}
	return sc, true, nil
}

func wrapGet(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("get schedule: %w", err)
}
