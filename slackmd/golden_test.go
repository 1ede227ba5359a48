package slackmd

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// golden compares got with testdata/name.golden (or writes it with -update).
func golden(tb testing.TB, name, got string) {
	tb.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		tb.Errorf("%s differs from the golden file (run go test -update and review the diff)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
