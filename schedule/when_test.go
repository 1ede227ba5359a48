package schedule

import (
	"errors"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"every weekday at 9:00 Europe/Berlin", "every weekday at 09:00 Europe/Berlin"},
		{"every monday at 17:30", "every monday at 17:30 UTC"},
		{"every day at 8:00 UTC", "every day at 08:00 UTC"},
		{"Every Day At 8:00 utc", "every day at 08:00 UTC"},
		{"every weekdays at 23:59", "every weekday at 23:59 UTC"},
		{"every weekend at 0:00", "every weekend at 00:00 UTC"},
		{"every mon, wed and fri at 9am America/New_York", "every monday, wednesday, friday at 09:00 America/New_York"},
		{"every tuesdays and thursdays at 5:30pm", "every tuesday, thursday at 17:30 UTC"},
		{"every sunday at 12am", "every sunday at 00:00 UTC"},
		{"every sunday at 12pm", "every sunday at 12:00 UTC"},
		{"every saturday,sunday at 10:05", "every weekend at 10:05 UTC"},
		{"  every   friday   at 16:00  ", "every friday at 16:00 UTC"},
		{"every mon and tue and wed and thu and fri and sat and sun at 7:00", "every day at 07:00 UTC"},
	} {
		w, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if got := w.String(); got != c.want {
			t.Errorf("Parse(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, in := range []string{
		"", "every", "daily at 9:00", "every day", "every day at", "at 9:00", "every at 9:00",
		"every day at 24:00", "every day at 9:60", "every day at 9", "every day at 9:5", "every day at 13pm",
		"every day at 0am", "every day at -1:00", "every day at 9:00 Mars/Olympus", "every day at 9:00 ../etc/passwd",
		"every day at 9:00 /etc/localtime", "every day at 9:00 Local", "every day at 9:00 UTC extra",
		"every someday at 9:00", "every monday tuesday at 9:00", "every monday and at 9:00", "every , monday at 9:00",
		"every day at 9:00 at 10:00", "every day at +9:00", "every day at 009:00",
		"every day at 9:00 " + string(make([]byte, 300)),
	} {
		if w, err := Parse(in); !errors.Is(err, ErrWhen) {
			t.Errorf("Parse(%q) = %v, %v; want ErrWhen", in, w, err)
		}
	}
}

func TestNext(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		when, after, want string // times in RFC 3339
	}{
		// Monday 1 December 2025, 08:00 UTC is 09:00 in Berlin.
		{"every weekday at 9:00 Europe/Berlin", "2025-12-01T07:59:00Z", "2025-12-01T09:00:00+01:00"},
		{"every weekday at 9:00 Europe/Berlin", "2025-12-01T08:00:00Z", "2025-12-02T09:00:00+01:00"},
		{"every weekday at 9:00 Europe/Berlin", "2025-12-05T09:00:00Z", "2025-12-08T09:00:00+01:00"},
		{"every monday at 17:30", "2025-12-01T17:30:00Z", "2025-12-08T17:30:00Z"},
		{"every monday at 17:30", "2025-12-01T17:29:59Z", "2025-12-01T17:30:00Z"},
		{"every day at 8:00 UTC", "2025-12-31T23:00:00Z", "2026-01-01T08:00:00Z"},
		{"every weekend at 0:00", "2025-12-05T12:00:00Z", "2025-12-06T00:00:00Z"},
		// Berlin's clocks go forward at 02:00 on 29 March 2026: 02:30 does not exist that day.
		{"every day at 2:30 Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T03:30:00+02:00"},
		// And back at 03:00 on 25 October 2026: 02:30 comes twice, and runs once.
		{"every day at 2:30 Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T02:30:00+01:00"},
		{"every day at 2:30 Europe/Berlin", "2026-10-25T01:30:00Z", "2026-10-26T02:30:00+01:00"},
	} {
		w, err := Parse(c.when)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.when, err)
		}
		after, _ := time.Parse(time.RFC3339, c.after)
		want, _ := time.Parse(time.RFC3339, c.want)
		if got := w.Next(after); !got.Equal(want) {
			t.Errorf("%q.Next(%s) = %s, want %s", c.when, c.after, got.In(berlin), want.In(berlin))
		}
	}
}
