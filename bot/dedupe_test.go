package bot

import (
	"fmt"
	"testing"
	"time"
)

func TestSeenExpiresAfterTTL(t *testing.T) {
	s := newSeen(time.Minute, 100)
	t0 := time.Unix(1000, 0)
	if s.add("a", t0) {
		t.Fatal("new key reported as seen")
	}
	if !s.add("a", t0.Add(59*time.Second)) {
		t.Error("repeat within the TTL not reported")
	}
	if s.add("a", t0.Add(61*time.Second)) {
		t.Error("key still remembered after the TTL")
	}
}

func TestSeenBoundedBySize(t *testing.T) {
	s := newSeen(time.Hour, 100)
	t0 := time.Unix(1000, 0)
	for i := range 1000 {
		s.add(fmt.Sprint(i), t0)
	}
	if s.len() != 100 {
		t.Errorf("%d keys remembered, want the bound 100", s.len())
	}
	if s.has("0", t0) || !s.has("999", t0) || !s.has("900", t0) {
		t.Error("not the newest 100 keys kept")
	}
	if len(s.queue)-s.head > 200 {
		t.Errorf("queue holds %d entries for 100 keys", len(s.queue)-s.head)
	}
}
