// Package schedule is the use case of scheduled prompts: a channel's recurring prompts, set from Slack
// with "/llmbot schedule", each run as if its creator had asked in that channel. Schedules keeps them
// in the shared state (bounded per channel and per person); Runner runs each occurrence once across
// replicas (a claim keyed by the schedule and the occurrence), catches up an occurrence missed while no
// replica ran if it comes back within a window, and skips it with a log line after that.
package schedule

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmbot/llmbot/state"
)

// Collections of the shared state's records.
const (
	collSchedules = "schedules"     // id -> Schedule
	collLast      = "schedule-last" // id -> the last occurrence handled (RFC 3339), written by Runner
)

// MaxPrompt bounds a scheduled prompt, in characters.
const MaxPrompt = 2000

// Schedule is one recurring prompt of a channel.
type Schedule struct {
	ID      string    `json:"id"`
	Team    string    `json:"team"`
	Channel string    `json:"channel"`
	Creator string    `json:"creator"`
	When    string    `json:"when"` // When's canonical text
	Prompt  string    `json:"prompt"`
	Created time.Time `json:"created"`
}

// Records is the part of the shared state that keeps documents until deleted (state's Records).
type Records interface {
	Put(ctx context.Context, coll, id string, val []byte) error
	Get(ctx context.Context, coll, id string) ([]byte, bool, error)
	Delete(ctx context.Context, coll, id string) error
	List(ctx context.Context, coll string) (map[string][]byte, error)
}

// Limits bound the schedules.
type Limits struct {
	PerChannel int // schedules in one channel
	PerPerson  int // schedules one person created, in all channels
}

// Schedules are the channels' scheduled prompts, kept in the shared state.
type Schedules struct {
	rec    Records
	key    []byte
	limits Limits
}

// NewSchedules returns the schedules kept in rec, sealed under key (state.Seal; the wiring derives it
// from the bot token): a schedule asks the model as its creator, so one that anyone with write access
// to Redis made up must never run.
func NewSchedules(rec Records, key []byte, limits Limits) *Schedules {
	return &Schedules{rec: rec, key: key, limits: limits}
}

// Refusal is an error whose text is meant for the person who asked (a limit, a bad schedule).
type Refusal struct{ Text string }

func (r *Refusal) Error() string { return r.Text }

func refuse(format string, args ...any) error { return &Refusal{Text: fmt.Sprintf(format, args...)} }

// Add creates a schedule in channel for creator from its text: "<when> | <prompt>".
func (s *Schedules) Add(ctx context.Context, team, channel, creator, text string, now time.Time) (Schedule, error) {
	whenText, prompt, ok := strings.Cut(text, "|")
	prompt = strings.TrimSpace(prompt)
	if !ok || prompt == "" {
		return Schedule{}, refuse("Write the schedule, a `|`, then the prompt: `every weekday at 9:00 Europe/Berlin | what changed yesterday?`")
	}
	if n := utf8.RuneCountInString(prompt); n > MaxPrompt {
		return Schedule{}, refuse("That prompt has %d characters; a scheduled prompt has at most %d.", n, MaxPrompt)
	}
	w, err := Parse(whenText)
	if err != nil {
		return Schedule{}, &Refusal{Text: err.Error() + "."}
	}
	if _, _, err := SummaryPeriod(prompt); err != nil {
		return Schedule{}, err
	}
	all, err := s.all(ctx)
	if err != nil {
		return Schedule{}, err
	}
	if err := s.withinLimits(all, channel, creator); err != nil {
		return Schedule{}, err
	}
	sc := Schedule{
		ID: newID(), Team: team, Channel: channel, Creator: creator, When: w.String(), Prompt: prompt,
		Created: now.UTC().Truncate(time.Second),
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return Schedule{}, fmt.Errorf("add schedule: %w", err)
	}
	if err := s.rec.Put(ctx, collSchedules, sc.ID, state.Seal(s.key, collSchedules, sc.ID, b)); err != nil {
		return Schedule{}, fmt.Errorf("add schedule: %w", err)
	}
	return sc, nil
}

func (s *Schedules) withinLimits(all []Schedule, channel, creator string) error {
	var inChannel, byCreator int
	for _, sc := range all {
		if sc.Channel == channel {
			inChannel++
		}
		if sc.Creator == creator {
			byCreator++
		}
	}
	switch {
	case inChannel >= s.limits.PerChannel:
		return refuse("This channel has %d scheduled prompts, the most it may have: delete one first (`/llmbot schedule list`).", inChannel)
	case byCreator >= s.limits.PerPerson:
		return refuse("You have %d scheduled prompts, the most one person may have: delete one first.", byCreator)
	}
	return nil
}

// newID is a short random id, easy to type in "/llmbot schedule delete <id>".
func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// All returns every schedule, oldest first. A record that does not read as a schedule, or was not
// sealed under the key for its id, is left out.
func (s *Schedules) All(ctx context.Context) ([]Schedule, error) { return s.all(ctx) }

func (s *Schedules) all(ctx context.Context) ([]Schedule, error) {
	recs, err := s.rec.List(ctx, collSchedules)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out := make([]Schedule, 0, len(recs))
	for id, sealed := range recs {
		b, ok := state.Unseal(s.key, collSchedules, id, sealed)
		var sc Schedule
		if !ok || json.Unmarshal(b, &sc) != nil || sc.ID != id || sc.Channel == "" || sc.Creator == "" {
			continue
		}
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b Schedule) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// In returns channel's schedules, oldest first.
func (s *Schedules) In(ctx context.Context, channel string) ([]Schedule, error) {
	all, err := s.all(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(sc Schedule) bool { return sc.Channel != channel }), nil
}

// Delete removes schedule id of channel. mayDelete says whether the person asking may delete it (its
// creator always may).
func (s *Schedules) Delete(ctx context.Context, channel, id string, mayDelete func(Schedule) bool) (Schedule, error) {
	id = strings.TrimSpace(id)
	in, err := s.In(ctx, channel)
	if err != nil {
		return Schedule{}, err
	}
	i := slices.IndexFunc(in, func(sc Schedule) bool { return sc.ID == id })
	switch {
	case i < 0:
		return Schedule{}, refuse("This channel has no scheduled prompt %q (`/llmbot schedule list` shows them).", id)
	case !mayDelete(in[i]):
		return Schedule{}, refuse("Only <@%s>, who created it, may delete that scheduled prompt.", in[i].Creator)
	}
	if err := s.rec.Delete(ctx, collSchedules, id); err != nil {
		return Schedule{}, fmt.Errorf("delete schedule: %w", err)
	}
	if err := s.rec.Delete(ctx, collLast, id); err != nil {
		return Schedule{}, fmt.Errorf("delete schedule: %w", err)
	}
	return in[i], nil
}

// Next is sc's next occurrence after t (zero if its When does not parse).
func (sc Schedule) Next(t time.Time) time.Time {
	w, err := Parse(sc.When)
	if err != nil {
		return time.Time{}
	}
	return w.Next(t)
}

// lasts are when each schedule's occurrences were last handled, by id (none: never), read in one call
// for a tick. A value that is no time is none: the occurrences since the schedule's creation count.
func (s *Schedules) lasts(ctx context.Context) (map[string]time.Time, error) {
	recs, err := s.rec.List(ctx, collLast)
	if err != nil {
		return nil, fmt.Errorf("list last runs: %w", err)
	}
	out := make(map[string]time.Time, len(recs))
	for id, b := range recs {
		if t, err := time.Parse(time.RFC3339, string(b)); err == nil {
			out[id] = t
		}
	}
	return out, nil
}

func (s *Schedules) setLast(ctx context.Context, id string, t time.Time) error {
	return s.rec.Put(ctx, collLast, id, []byte(t.UTC().Format(time.RFC3339)))
}

// IsRefusal reports whether err is meant for the person, and its text.
func IsRefusal(err error) (string, bool) {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Text, true
	}
	return "", false
}
