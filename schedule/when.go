package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// When is a recurrence: on some days of the week, at one time of day, in one time zone.
//
// Its grammar, read case-insensitively (README, "Scheduled prompts"):
//
//	every <days> at <time> [<zone>]
//	<days>  day | weekday | weekend | <name> {("," | "and") <name>}
//	<name>  monday ... sunday, mon ... sun, or their plurals (mondays)
//	<time>  H:MM or HH:MM on 24 hours (9:00, 17:30), or with am/pm (9am, 5:30pm)
//	<zone>  an IANA time zone (Europe/Berlin, America/New_York) or UTC; UTC when left out
//
// A time that a zone skips on the day its clocks go forward runs at the same time after the jump (02:30
// runs at 03:30); one the zone has twice when they go
// back runs once (Go's time.Date picks which).
type When struct {
	Days   [7]bool // by time.Weekday
	Hour   int
	Minute int
	Zone   *time.Location
}

// ErrWhen is wrapped by Parse's errors, whose text says what is wrong to the person who wrote it.
var ErrWhen = errors.New("not a schedule")

// dayNames are the words of <days>, each with its days.
var dayNames = map[string][]time.Weekday{
	"day":     {time.Sunday, time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday},
	"weekday": {time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday},
	"weekend": {time.Saturday, time.Sunday},
	"monday":  {time.Monday}, "mon": {time.Monday},
	"tuesday": {time.Tuesday}, "tue": {time.Tuesday}, "tues": {time.Tuesday},
	"wednesday": {time.Wednesday}, "wed": {time.Wednesday},
	"thursday": {time.Thursday}, "thu": {time.Thursday}, "thurs": {time.Thursday},
	"friday": {time.Friday}, "fri": {time.Friday},
	"saturday": {time.Saturday}, "sat": {time.Saturday},
	"sunday": {time.Sunday}, "sun": {time.Sunday},
}

// maxWhen bounds the text Parse reads: a schedule is a short phrase.
const maxWhen = 200

// Parse reads s in the grammar of When.
func Parse(s string) (When, error) {
	if len(s) > maxWhen {
		return When{}, fmt.Errorf("%w: longer than %d characters", ErrWhen, maxWhen)
	}
	f := strings.Fields(strings.ToLower(strings.NewReplacer(",", " , ").Replace(s)))
	if len(f) < 4 || f[0] != "every" {
		return When{}, fmt.Errorf(`%w: write it as "every <days> at <time> [zone]", such as "every weekday at 9:00 Europe/Berlin"`, ErrWhen)
	}
	at := indexOf(f, "at")
	if at < 2 || at+1 >= len(f) || at+3 < len(f) {
		return When{}, fmt.Errorf(`%w: write it as "every <days> at <time> [zone]"`, ErrWhen)
	}
	var w When
	if err := w.parseDays(f[1:at]); err != nil {
		return When{}, err
	}
	var err error
	if w.Hour, w.Minute, err = parseClock(f[at+1]); err != nil {
		return When{}, err
	}
	w.Zone = time.UTC
	if at+2 < len(f) {
		// Zone names are case-sensitive: take the word as written.
		orig := strings.Fields(strings.NewReplacer(",", " , ").Replace(s))
		if w.Zone, err = zone(orig[at+2]); err != nil {
			return When{}, err
		}
	}
	return w, nil
}

func indexOf(f []string, word string) int {
	for i, w := range f {
		if w == word {
			return i
		}
	}
	return -1
}

// parseDays reads <days>: names separated by "," or "and".
func (w *When) parseDays(words []string) error {
	expectName := true
	for _, word := range words {
		if !expectName {
			if word != "," && word != "and" {
				return fmt.Errorf(`%w: separate days with "," or "and", not %q`, ErrWhen, word)
			}
			expectName = true
			continue
		}
		days, ok := dayNames[word]
		if !ok {
			days, ok = dayNames[strings.TrimSuffix(word, "s")]
		}
		if !ok {
			return fmt.Errorf(`%w: %q is no day (day, weekday, weekend, monday ... sunday)`, ErrWhen, word)
		}
		for _, d := range days {
			w.Days[d] = true
		}
		expectName = false
	}
	if expectName {
		return fmt.Errorf("%w: a day is missing", ErrWhen)
	}
	return nil
}

// parseClock reads <time>.
func parseClock(s string) (hour, minute int, err error) {
	bad := fmt.Errorf(`%w: %q is no time of day (9:00, 17:30, 9am, 5:30pm)`, ErrWhen, s)
	half := 0 // 0: 24 hours; 1: am; 2: pm
	switch {
	case strings.HasSuffix(s, "am"):
		s, half = strings.TrimSuffix(s, "am"), 1
	case strings.HasSuffix(s, "pm"):
		s, half = strings.TrimSuffix(s, "pm"), 2
	}
	h, m, hasMinutes := strings.Cut(s, ":")
	if !hasMinutes && half == 0 {
		return 0, 0, bad
	}
	if hour, err = number(h, 2); err != nil {
		return 0, 0, bad
	}
	if hasMinutes {
		if len(m) != 2 {
			return 0, 0, bad
		}
		if minute, err = number(m, 2); err != nil || minute > 59 {
			return 0, 0, bad
		}
	}
	switch {
	case half == 0 && hour > 23, half != 0 && (hour < 1 || hour > 12):
		return 0, 0, bad
	case half == 1 && hour == 12:
		hour = 0
	case half == 2 && hour != 12:
		hour += 12
	}
	return hour, minute, nil
}

// number reads at most digits decimal digits.
func number(s string, digits int) (int, error) {
	if s == "" || len(s) > digits || strings.Trim(s, "0123456789") != "" {
		return 0, ErrWhen
	}
	return strconv.Atoi(s)
}

// zone loads a time zone by its IANA name.
func zone(name string) (*time.Location, error) {
	if strings.EqualFold(name, "utc") {
		return time.UTC, nil
	}
	// LoadLocation reads files by the name: a name with dots or a leading slash is no zone anyone means.
	if strings.Contains(name, "..") || strings.HasPrefix(name, "/") || strings.EqualFold(name, "local") {
		return nil, fmt.Errorf("%w: %q is no time zone", ErrWhen, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %q is no time zone (such as Europe/Berlin or UTC)", ErrWhen, name)
	}
	return loc, nil
}

// Next is the first occurrence strictly after t.
func (w When) Next(t time.Time) time.Time {
	loc := w.Zone
	if loc == nil {
		loc = time.UTC
	}
	lt := t.In(loc)
	// Eight days cover every week day; one more covers a time the day's clock change moved.
	for i := range 9 {
		c := time.Date(lt.Year(), lt.Month(), lt.Day()+i, w.Hour, w.Minute, 0, 0, loc)
		if c.After(t) && w.Days[c.Weekday()] {
			return c
		}
	}
	return time.Time{} // no day at all: Parse never makes such a When
}

// String is w in its grammar, in a canonical form: "every weekday at 09:00 Europe/Berlin".
func (w When) String() string {
	zone := "UTC"
	if w.Zone != nil {
		zone = w.Zone.String()
	}
	return fmt.Sprintf("every %s at %02d:%02d %s", w.days(), w.Hour, w.Minute, zone)
}

func (w When) days() string {
	var b [7]bool
	for _, c := range []struct {
		name string
		days []time.Weekday
	}{{"day", dayNames["day"]}, {"weekday", dayNames["weekday"]}, {"weekend", dayNames["weekend"]}} {
		for i := range b {
			b[i] = false
		}
		for _, d := range c.days {
			b[d] = true
		}
		if b == w.Days {
			return c.name
		}
	}
	var names []string
	for _, d := range []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday, time.Sunday} {
		if w.Days[d] {
			names = append(names, strings.ToLower(d.String()))
		}
	}
	return strings.Join(names, ", ")
}
