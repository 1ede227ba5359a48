package state

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// now is the time recorded in the journal: UTC and without the monotonic reading, so an Answer reads back the
// same from every store (JSON files and Redis hashes keep neither).
func now() time.Time { return time.Now().UTC() }

// opened is a as Open records it: owned by self, updated now, started now unless it says when.
func opened(a Answer, self string) (Answer, error) {
	if a.ID == "" {
		return Answer{}, fmt.Errorf("open answer: empty id: %w", errInvalid)
	}
	for _, ts := range a.Messages {
		if err := validTS(ts); err != nil {
			return Answer{}, err
		}
	}
	a.Owner = self
	a.Updated = now()
	if a.Started.IsZero() {
		a.Started = a.Updated
	}
	a.Started = a.Started.UTC()
	a.Messages = slices.Clone(a.Messages)
	if len(a.Messages) == 0 {
		a.Messages = nil // as every store reads an empty list back
	}
	return a, nil
}

// validTS refuses a message ts that could not be stored: Redis keeps an answer's messages comma-separated.
func validTS(ts string) error {
	if ts == "" || strings.Contains(ts, ",") {
		return fmt.Errorf("message ts %q: %w", ts, errInvalid)
	}
	return nil
}

// expired is an answer not touched for answerTTL: Redis has dropped it, and Memory treats it the same.
func expired(a Answer) bool { return time.Since(a.Updated) > answerTTL }

// sortAnswers orders answers oldest first, so every store lists orphans in the same order.
func sortAnswers(as []Answer) {
	slices.SortFunc(as, func(a, b Answer) int {
		return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.ID, b.ID))
	})
}

// positive refuses a TTL Redis would refuse (PX wants at least 1 ms).
func positive(op string, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%s: ttl %v under 1ms: %w", op, ttl, errInvalid)
	}
	return nil
}

// emission is a bucket's time between tokens (GCRA's emission interval), in whole microseconds as Redis
// counts them.
func emission(perMinute float64, burst int) (time.Duration, error) {
	if !(perMinute > 0) || math.IsInf(perMinute, 0) || burst < 1 {
		return 0, fmt.Errorf("take: %v a minute, burst %d: %w", perMinute, burst, errInvalid)
	}
	d := time.Duration(float64(time.Minute) / perMinute).Truncate(time.Microsecond)
	return max(d, time.Microsecond), nil
}

// Hash fields of an answer in Redis.
const (
	fID, fTeam, fChannel, fThread, fTS, fAsker, fMode = "id", "team", "channel", "thread_ts", "ts", "asker", "mode"
	fMessages, fOwner, fStarted, fUpdated             = "messages", "owner", "started", "updated"
)

// toHash is a as the fields of its Redis hash.
func toHash(a Answer) []any {
	return []any{
		fID, a.ID, fTeam, a.Team, fChannel, a.Channel, fThread, a.ThreadTS, fTS, a.TS, fAsker, a.Asker,
		fMode, a.Mode, fMessages, strings.Join(a.Messages, ","), fOwner, a.Owner,
		fStarted, a.Started.Format(time.RFC3339Nano), fUpdated, a.Updated.Format(time.RFC3339Nano),
	}
}

// fromHash is the answer in a Redis hash's fields.
func fromHash(h map[string]string) (Answer, error) {
	a := Answer{
		ID: h[fID], Team: h[fTeam], Channel: h[fChannel], ThreadTS: h[fThread], TS: h[fTS], Asker: h[fAsker],
		Mode: h[fMode], Owner: h[fOwner],
	}
	if m := h[fMessages]; m != "" {
		a.Messages = strings.Split(m, ",")
	}
	var err1, err2 error
	a.Started, err1 = time.Parse(time.RFC3339Nano, h[fStarted])
	a.Updated, err2 = time.Parse(time.RFC3339Nano, h[fUpdated])
	if err1 != nil || err2 != nil || a.ID == "" {
		return Answer{}, fmt.Errorf("answer %q: damaged record", a.ID)
	}
	return a, nil
}
