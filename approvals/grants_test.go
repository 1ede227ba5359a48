package approvals

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"
)

// marks are the shared marks in memory (as the state package keeps them in Redis).
type marks struct {
	mu  sync.Mutex
	set map[string]bool
}

func (m *marks) Mark(_ context.Context, key string, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.set[key] = true
	return nil
}

func (m *marks) Marked(_ context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.set[key], nil
}

// TestToolAllowedForTheThreadOnEveryReplica: "Allow for this thread" given on one replica holds on
// the other (the shared marks): the thread's next answer may be the other's.
func TestToolAllowedForTheThreadOnEveryReplica(t *testing.T) {
	shared := &marks{set: map[string]bool{}}
	key := []byte("the replicas' grant key")
	a, b := New(shared, key, nil), New(shared, key, nil)
	if b.ThreadAllowed("C1", "1700000000.000001", "U1", "wiki/search") {
		t.Fatal("allowed before anyone allowed it")
	}
	a.AllowThread("C1", "1700000000.000001", "U1", "wiki/search")
	if !b.ThreadAllowed("C1", "1700000000.000001", "U1", "wiki/search") {
		t.Error("allowed for the thread on one replica, not on the other")
	}
	if b.ThreadAllowed("C1", "1700000000.000001", "U2", "wiki/search") {
		t.Error("allowed for another person")
	}
}

// TestToolAllowedForTheThreadNotByAForgedMark: the shared marks live in Redis, where anyone who can
// write could add one. A mark the replicas did not name with their key grants nothing: the asker is
// asked as before.
func TestToolAllowedForTheThreadNotByAForgedMark(t *testing.T) {
	const thread, user, tool = "1700000000.000001", "U1", "wiki/search"
	key := "C1" + "/" + thread + "/" + user + "/" + tool
	shared := &marks{set: map[string]bool{}}
	replica := New(shared, []byte("the replicas' grant key"), nil)
	forger := New(shared, []byte("a key guessed by whoever writes to Redis"), nil)
	for _, mark := range []string{"tool-allowed:" + key, "tool-allowed:" + "C1" + "/" + thread + "/" + user + "/*"} {
		shared.set[mark] = true
	}
	forger.AllowThread("C1", thread, user, tool)
	if replica.ThreadAllowed("C1", thread, user, tool) {
		t.Errorf("marks %v, none named with the replicas' key, allowed %s for the thread", slices.Sorted(maps.Keys(shared.set)), tool)
	}
}
