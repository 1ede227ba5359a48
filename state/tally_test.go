package state

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"
)

func talliesAddGet(t *testing.T, w world) {
	ctx := t.Context()
	a := w.replica("a")
	day := Tally{Group: "usage:d:2026-12-02", TTL: time.Hour, Fields: map[string]int64{"u:U1:in": 100, "u:U1:out": 20}}
	month := Tally{Group: "usage:m:2026-12", TTL: time.Hour, Fields: map[string]int64{"u:U1:in": 100}}
	check(t, a.tallies.Add(ctx, day, month))
	check(t, a.tallies.Add(ctx, Tally{Group: day.Group, TTL: time.Hour, Fields: map[string]int64{"u:U1:in": 5, "m:gpt:in": 5}}))
	got, err := a.tallies.Get(ctx, day.Group, "u:U1:in", "u:U1:out", "u:U2:in")
	check(t, err)
	if want := []int64{105, 20, 0}; !slices.Equal(got, want) {
		t.Errorf("Get = %v, want %v", got, want)
	}
	all, err := a.tallies.All(ctx, day.Group)
	check(t, err)
	if want := map[string]int64{"u:U1:in": 105, "u:U1:out": 20, "m:gpt:in": 5}; !maps.Equal(all, want) {
		t.Errorf("All = %v, want %v", all, want)
	}
	none, err := a.tallies.Get(ctx, "usage:d:1999-01-01", "u:U1:in")
	check(t, err)
	if !slices.Equal(none, []int64{0}) {
		t.Errorf("Get of a missing group = %v, want [0]", none)
	}
	for _, bad := range []Tally{{Group: "", TTL: time.Hour}, {Group: "g", TTL: 0}} {
		if err := a.tallies.Add(ctx, bad); !errors.Is(err, errInvalid) {
			t.Errorf("Add(%+v) = %v, want an invalid argument", bad, err)
		}
	}
}

func talliesShared(t *testing.T, w world) {
	ctx := t.Context()
	a, b := w.replica("a"), w.replica("b")
	add := Tally{Group: "usage:d:2026-12-02", TTL: time.Hour, Fields: map[string]int64{"c:C1:in": 7}}
	check(t, a.tallies.Add(ctx, add))
	check(t, b.tallies.Add(ctx, add))
	for _, r := range []replica{a, b} {
		got, err := r.tallies.Get(ctx, add.Group, "c:C1:in")
		check(t, err)
		if got[0] != 14 {
			t.Errorf("%s sees %d, want 14", r.Self(), got[0])
		}
	}
}

// TestMemoryTalliesBounded: a group takes no field past MaxTallyFields, and a group ends with its TTL.
func TestMemoryTalliesBounded(t *testing.T) {
	m := newTestMemory(t, "a", "")
	k := m.Tallies()
	ctx := t.Context()
	fields := map[string]int64{}
	for i := range MaxTallyFields + 10 {
		fields["u:"+strconv.Itoa(i)] = 1
	}
	check(t, k.Add(ctx, Tally{Group: "g", TTL: time.Hour, Fields: fields}))
	all, err := k.All(ctx, "g")
	check(t, err)
	if len(all) != MaxTallyFields {
		t.Errorf("%d fields kept, want %d", len(all), MaxTallyFields)
	}
	check(t, k.Add(ctx, Tally{Group: "short", TTL: 50 * time.Millisecond, Fields: map[string]int64{"x": 1}}))
	time.Sleep(80 * time.Millisecond)
	got, err := k.Get(ctx, "short", "x")
	check(t, err)
	if got[0] != 0 {
		t.Errorf("after its TTL the group still counts %d", got[0])
	}
}

// TestMemoryTalliesKeptInDir: a Memory with a directory finds the tallies of its previous run.
func TestMemoryTalliesKeptInDir(t *testing.T) {
	dir := t.TempDir()
	first := newTestMemory(t, "a", dir)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	check(t, first.Tallies().Add(t.Context(), Tally{Group: "g", TTL: time.Hour, Fields: map[string]int64{"x": 3}}))
	cancel()
	check(t, <-done)
	check(t, first.Close())

	second := newTestMemory(t, "a", dir)
	t.Cleanup(func() { second.Close() })
	got, err := second.Tallies().Get(t.Context(), "g", "x")
	check(t, err)
	if got[0] != 3 {
		t.Errorf("after a restart the tally is %d, want 3", got[0])
	}
}

// TestRedisTallyReadBounded: a group that Redis holds past the bound a group has in memory (written
// there by someone else than the bot) is not read: a /usage read must not take the process's memory.
func TestRedisTallyReadBounded(t *testing.T) {
	srv := newRedisServer(t)
	r := newTestRedis(t, srv.url, srv.namespace(), "a")
	group := "usage:d:2026-12-02"
	fields := make(map[string]any, MaxTallyFields+1)
	for i := range MaxTallyFields + 1 {
		fields[fmt.Sprintf("u:U%d:in", i)] = 1
	}
	if err := r.c.HSet(t.Context(), r.key("tally:", group), fields).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Tallies().All(t.Context(), group); !errors.Is(err, ErrTooMany) || got != nil {
		t.Errorf("All = %d fields, %v; want none, ErrTooMany", len(got), err)
	}
}
