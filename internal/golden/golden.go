// Package golden compares a test's output with a file in its package's testdata, and rewrites the
// file when the tests run with -update: the one golden-file helper of the module's tests.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// Check compares got with testdata/name.golden (or writes it with -update).
func Check(tb testing.TB, name, got string) {
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
