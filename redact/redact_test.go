package redact

import (
	"maps"
	"regexp"
	"strings"
	"testing"
)

func all(t *testing.T, patterns ...Pattern) *Redactor {
	t.Helper()
	r, err := New(Kinds, patterns)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRedacts: real-looking values of each kind become their placeholders.
func TestRedacts(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"email", "write to jane.doe+billing@example.co.uk.", "write to [EMAIL 1]."},
		{"email in a Slack link", "<mailto:jane@acme.io|jane@acme.io>", "<mailto:[EMAIL 1]|[EMAIL 1]>"},
		{"two emails", "a@x.com, b@y.org and a@x.com", "[EMAIL 1], [EMAIL 2] and [EMAIL 1]"},
		{"international phone", "call +1 415 555 0132 now", "call [PHONE 1] now"},
		{"phone with dashes", "mobile: +49-171-2345678", "mobile: [PHONE 1]"},
		{"UK phone", "+44 20 7946 0958", "[PHONE 1]"},
		{"North American phone", "(415) 555-0132 or 415.555.0199", "[PHONE 1] or [PHONE 2]"},
		{"national phone", "Tel. 030 1234 5678", "Tel. [PHONE 1]"},
		{"card in groups", "card 4111 1111 1111 1111 exp 12/28", "card [CARD 1] exp 12/28"},
		{"card whole", "5555555555554444", "[CARD 1]"},
		{"card with dashes", "4012-8888-8888-1881.", "[CARD 1]."},
		{"Amex", "3782 822463 10005", "[CARD 1]"},
		{"IBAN in groups", "IBAN: DE89 3704 0044 0532 0130 00, thanks", "IBAN: [IBAN 1], thanks"},
		{"IBAN whole", "GB82WEST12345698765432", "[IBAN 1]"},
		{"IBAN then a number", "BE68 5390 0754 7034 2026 report", "[IBAN 1] 2026 report"},
		{"OpenAI key", "OPENAI_API_KEY=sk-proj-4f9Qe2Lx8aZk1Tn0bV7cYw3", "OPENAI_API_KEY=[SECRET 1]"},
		{"Slack token", "token xoxb-1234567890-0987654321-AbCdEfGhIjKl", "token [SECRET 1]"},
		{"GitHub token", "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R", "[SECRET 1]"},
		{"AWS key id", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "aws_access_key_id = [SECRET 1]"},
		{"Google key", "key=AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "key=[SECRET 1]"},
		{"JWT", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.Rq8IxqeX7eA6GgYxlcHdPFVRNFFZc5rEI3MQTZZbK3I",
			"[SECRET 1]"},
		{"bearer", "Authorization: Bearer abcDEF123456ghiJKL7890mnop", "Authorization: Bearer [SECRET 1]"},
		{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nok",
			"[SECRET 1]\nok"},
		{"several kinds", "jane@acme.io +1 415 555 0132 jane@acme.io 4111111111111111",
			"[EMAIL 1] [PHONE 1] [EMAIL 1] [CARD 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := all(t).Session().Text(tc.in); got != tc.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestLookAlikesSurvive: what a team writes all day that is shaped like a kind stays as it is.
func TestLookAlikesSurvive(t *testing.T) {
	for _, in := range []string{
		"released v1.2.3 and 10.0.19045.1234",
		"due 2026-12-02, or 02.12.2026, or 12/02/2026 at 12:30",
		"server 192.168.1.10 and 10.0.0.1:8080",
		"order #4000123412341235 and ORD-4111111111111111 and 1234567890123456",
		"tracking 4000 1234 5678 9011",
		"ext. 555-0132",
		"ISBN 978-3-16-148410-0",
		"total 1,234,567.89 EUR",
		"commit 3f786850e387550fdab836ed7e6dc881de23001b",
		"uuid 123e4567-e89b-12d3-a456-426614174000",
		"ping @here and <@U0123ABCD> and @scope/pkg",
		"user@localhost",
		"IBAN DE89 3704 0044 0532 0130 01",
		"DE89 is a code",
		"sk-learn, task-sk-abcdefghijklmnopqrstuvwxyz, AKIA123",
		"eyJ is how JWTs start",
		"Bearer of news",
		"<<<7f3a9c2e1b4d6a80 data from a message by \"Bob\">>>",
		"[EMAIL 1] and [PHONE 2] from earlier",
		"phone: 0800",
		"+1",
		"",
	} {
		if got := all(t).Session().Text(in); got != in {
			t.Errorf("Text(%q) = %q, want it unchanged", in, got)
		}
	}
}

// TestOnlyKindsAsked: a kind not asked for stays.
func TestOnlyKindsAsked(t *testing.T) {
	r, err := New([]Kind{Email}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := "jane@acme.io +1 415 555 0132 4111111111111111 sk-proj-4f9Qe2Lx8aZk1Tn0bV7cYw3"
	want := "[EMAIL 1] +1 415 555 0132 4111111111111111 sk-proj-4f9Qe2Lx8aZk1Tn0bV7cYw3"
	if got := r.Session().Text(in); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestSessionNumbersStable: placeholders are numbered per request, by first sight, across the
// texts of one session; a new session starts again at 1.
func TestSessionNumbersStable(t *testing.T) {
	r := all(t)
	s := r.Session()
	got := []string{s.Text("from b@y.org"), s.Text("to a@x.com, cc b@y.org"), s.Text("a@x.com")}
	want := []string{"from [EMAIL 1]", "to [EMAIL 2], cc [EMAIL 1]", "[EMAIL 2]"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("text %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if c := s.Counts(); !maps.Equal(c, map[Kind]int{Email: 4}) {
		t.Errorf("counts %v, want EMAIL 4", c)
	}
	if got := r.Session().Text("a@x.com"); got != "[EMAIL 1]" {
		t.Errorf("a new session: %q, want [EMAIL 1]", got)
	}
}

// TestPatterns: the team's patterns are replaced by their names, beside the built-in kinds.
func TestPatterns(t *testing.T) {
	ps, err := ParsePatterns("CUSTOMER=CUS-[0-9]{6}\n  EMPLOYEE=\\bE[0-9]{5}\\b")
	if err != nil {
		t.Fatal(err)
	}
	got := all(t, ps...).Session().Text("CUS-123456 (E12345, jane@acme.io) and CUS-123456")
	if want := "[CUSTOMER 1] ([EMPLOYEE 1], [EMAIL 1]) and [CUSTOMER 1]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{"customer=x", "X=(", "=x", "X="} {
		if _, err := ParsePatterns(in); err == nil {
			t.Errorf("ParsePatterns(%q): no error", in)
		}
	}
	if _, err := ParseKinds("email,postcode"); err == nil {
		t.Error("ParseKinds(postcode): no error")
	}
	if _, err := New([]Kind{"POSTCODE"}, nil); err == nil {
		t.Error("New(POSTCODE): no error")
	}
	if _, err := New(nil, []Pattern{{Name: "x", Re: regexp.MustCompile("x")}}); err == nil {
		t.Error("New(pattern x): no error")
	}
}

func TestParseKinds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Kind
	}{
		{"", nil},
		{"all", []Kind{Card, Email, IBAN, Phone, Secret}},
		{" Email , phone,email", []Kind{Email, Phone}},
	} {
		got, err := ParseKinds(tc.in)
		if err != nil || strings.Join(kindStrings(got), ",") != strings.Join(kindStrings(tc.want), ",") {
			t.Errorf("ParseKinds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func kindStrings(ks []Kind) []string {
	var s []string
	for _, k := range ks {
		s = append(s, string(k))
	}
	return s
}
