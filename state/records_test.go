package state

import (
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"
)

func recordsLifecycle(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	if _, ok, err := a.rec.Get(ctx, "things", "x"); err != nil || ok {
		t.Fatalf("Get before Put = %v, %v; want nothing", ok, err)
	}
	check(t, a.rec.Put(ctx, "things", "x", []byte("one")))
	check(t, a.rec.Put(ctx, "things", "y", []byte("two")))
	check(t, a.rec.Put(ctx, "things", "x", []byte("three")))
	check(t, a.rec.Put(ctx, "others", "x", []byte("else")))
	v, ok, err := a.rec.Get(ctx, "things", "x")
	if err != nil || !ok || string(v) != "three" {
		t.Fatalf("Get(x) = %q, %v, %v; want three", v, ok, err)
	}
	check(t, a.rec.Delete(ctx, "things", "y"))
	check(t, a.rec.Delete(ctx, "things", "never"))
	got, err := a.rec.List(ctx, "things")
	check(t, err)
	if want := map[string][]byte{"x": []byte("three")}; !maps.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("List = %q, want %q", got, want)
	}
}

// recordsShared: a record one replica writes is read by another (with a directory: the next process).
func recordsShared(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	check(t, a.rec.Put(ctx, "things", "x", []byte("one")))
	a.stop()
	b := w.replica("b")
	v, ok, err := b.rec.Get(ctx, "things", "x")
	if err != nil || !ok || string(v) != "one" {
		t.Fatalf("b: Get(x) = %q, %v, %v; want one", v, ok, err)
	}
}

func recordsBounded(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	for _, c := range []struct {
		coll, id string
		size     int
	}{{"bad/coll", "x", 1}, {"things", "a b", 1}, {"things", "x", MaxRecordSize + 1}, {"", "x", 1}} {
		if err := a.rec.Put(ctx, c.coll, c.id, []byte(strings.Repeat("v", c.size))); !errors.Is(err, errInvalid) {
			t.Errorf("Put(%q, %q, %d bytes) = %v, want errInvalid", c.coll, c.id, c.size, err)
		}
	}
	for i := range MaxRecords {
		check(t, a.rec.Put(ctx, "full", strconv.Itoa(i), []byte("v")))
	}
	if err := a.rec.Put(ctx, "full", "one-more", []byte("v")); !errors.Is(err, ErrFull) {
		t.Fatalf("Put beyond MaxRecords = %v, want ErrFull", err)
	}
	check(t, a.rec.Put(ctx, "full", "0", []byte("again")))
}
