package redact

import "testing"

// FuzzRedact: any text is redacted without a panic, the placeholders themselves are never taken
// for a value (redacting the output again changes nothing), and a text with nothing to replace
// comes back as it was.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"jane@acme.io +1 415 555 0132 4111 1111 1111 1111 DE89 3704 0044 0532 0130 00",
		"xoxb-1234567890-abcdefghij Bearer abcdefghijklmnopqrstuvwxyz eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
		"-----BEGIN PRIVATE KEY-----\nabc\n", "(415) 555-0132", "+", "@", "((((", "DE89 ", "a@b.c.", "\xff@x.com",
	} {
		f.Add(s)
	}
	r, err := New(Kinds, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s := r.Session()
		out := s.Text(in)
		if again := r.Session().Text(out); again != out {
			t.Errorf("redacting %q twice: %q then %q", in, out, again)
		}
		if len(s.Counts()) == 0 && out != in {
			t.Errorf("nothing counted but %q became %q", in, out)
		}
	})
}
