package summarize

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestKeptResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newKeptResults(3, time.Hour)
		var ids []string
		for i := range 4 {
			ids = append(ids, k.put(keptResult{User: "U1", Channel: "C1", Post: fmt.Sprint("summary ", i)}))
			time.Sleep(time.Minute)
		}
		if len(ids[0]) != 32 || ids[0] == ids[1] {
			t.Errorf("ids %q: want distinct random ones", ids)
		}
		if _, ok := k.get(ids[0]); ok {
			t.Error("the oldest is still kept beyond the bound of 3")
		}
		if r, ok := k.get(ids[1]); !ok || r.Post != "summary 1" {
			t.Errorf("get = %+v, %v", r, ok)
		}

		// Taken once: a second click finds nothing; a failed post puts it back.
		r, ok := k.take(ids[2])
		if !ok || r.Post != "summary 2" {
			t.Fatalf("take = %+v, %v", r, ok)
		}
		if _, ok := k.take(ids[2]); ok {
			t.Error("taken twice")
		}
		k.putBack(ids[2], r)
		if _, ok := k.get(ids[2]); !ok {
			t.Error("not kept again after putBack")
		}

		// An hour after it was kept, a result is gone; one put back later lives on.
		time.Sleep(time.Hour - 3*time.Minute)
		got := []bool{}
		for _, id := range ids[1:] {
			_, ok := k.get(id)
			got = append(got, ok)
		}
		if want := "[false true true]"; fmt.Sprint(got) != want {
			t.Errorf("kept after an hour: %v, want %s", got, want)
		}
		if _, ok := k.take(ids[1]); ok {
			t.Error("an expired result taken")
		}
		time.Sleep(time.Hour)
		k.put(keptResult{})
		if n := len(k.m); n != 1 {
			t.Errorf("%d results held after all expired, want 1 (the new one)", n)
		}
	})
}
