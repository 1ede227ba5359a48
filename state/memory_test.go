package state

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/internal/waittest"
)

// crashChildEnv names the journal directory of the child process of TestCrashedProcessLeavesOrphans.
const crashChildEnv = "STATE_TEST_CRASH_CHILD_DIR"

// TestCrashChild is the child of TestCrashedProcessLeavesOrphans (it does nothing on its own): a process
// that opens an answer in a journal directory, says so, and waits to be killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		return
	}
	m := start(t, newTestMemory(t, "crashed", dir)).runner.(*Memory) // runs until the process is killed
	waittest.Eventually(t, 5*time.Second, "the child holds its lock", func() bool {
		held, err := lockHeld(m.replicaLock("crashed"))
		return err == nil && held
	})
	a := testAnswer("C1/1700000000.000200")
	check(t, m.Answers().Open(t.Context(), a))
	check(t, m.Answers().AddMessage(t.Context(), a.ID, "1700000001.000100"))
	fmt.Println("ready")
	<-t.Context().Done() // killed first; -test.timeout ends it if the parent is gone
}

func TestCrashedProcessLeavesOrphans(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	check(t, err)
	check(t, cmd.Start())
	ready := make(chan bool, 1) // the reader's one answer; it ends when the child does
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
			}
		}
		close(ready)
	}()
	// kill ends the child as a crash would, and waits for it and for the reader (before Wait, which closes
	// the pipe the reader reads).
	var once sync.Once
	kill := func() {
		once.Do(func() {
			_ = cmd.Process.Kill() // SIGKILL: nothing of the child's runs again (one that ended needs none)
			for range ready {
			}
			_ = cmd.Wait() // killed: its error says so
		})
	}
	t.Cleanup(kill)
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the child ended without opening its answer")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the child did not open its answer within 20s")
	}

	next := start(t, newTestMemory(t, "restarted", dir))
	if !next.alive("crashed") {
		t.Fatal("the child is not alive while it runs")
	}
	if o := next.orphans(); len(o) != 0 {
		t.Fatalf("orphans while the child runs: %+v", o)
	}

	kill()

	orphans := next.orphans()
	want := testAnswer("C1/1700000000.000200")
	want.Owner, want.Messages = "crashed", []string{"1700000001.000100"}
	if len(orphans) != 1 {
		t.Fatalf("orphans after the crash = %+v, want the child's answer", orphans)
	}
	sameAnswer(t, orphans[0], want)
	if _, err := os.Stat(filepath.Join(dir, "replicas", "crashed.lock")); !os.IsNotExist(err) {
		t.Fatalf("the dead child's lock file is still there (%v)", err)
	}
	a, ok, err := next.Adopt(t.Context(), want.ID)
	if err != nil || !ok || a.Owner != "restarted" {
		t.Fatalf("Adopt = %+v, %v, %v", a, ok, err)
	}
}

func TestRunRemovesDeadReplicasLocks(t *testing.T) {
	dir := t.TempDir()
	check(t, os.MkdirAll(filepath.Join(dir, "replicas"), 0o700))
	dead := filepath.Join(dir, "replicas", "gone.lock")
	check(t, os.WriteFile(dead, nil, 0o600))
	m := start(t, newTestMemory(t, "me", dir))
	waittest.Eventually(t, 3*time.Second, "the dead replica's lock file removed", func() bool {
		_, err := os.Stat(dead)
		return os.IsNotExist(err)
	})
	own := filepath.Join(dir, "replicas", "me.lock")
	if _, err := os.Stat(own); err != nil {
		t.Fatalf("own lock file: %v", err)
	}
	m.stop()
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Fatalf("own lock file after Run: %v", err)
	}
}

func TestJournalDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	m := start(t, newTestMemory(t, "me", dir))
	for _, d := range []string{dir, filepath.Join(dir, "answers"), filepath.Join(dir, "replicas")} {
		fi, err := os.Stat(d)
		check(t, err)
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
	check(t, m.Open(t.Context(), testAnswer("C1/1")))
	answers := filepath.Join(dir, "answers")
	debris := filepath.Join(answers, tempPrefix+"123")
	check(t, os.WriteFile(debris, []byte(`{"ID":`), 0o600))
	check(t, os.WriteFile(filepath.Join(answers, "damaged.json"), []byte(`{"ID":`), 0o600))
	if o := m.orphans(); len(o) != 0 {
		t.Fatalf("orphans = %+v", o)
	}
	if _, err := os.Stat(debris); !os.IsNotExist(err) {
		t.Fatalf("a crash's temporary file is still there (%v)", err)
	}
	entries, err := os.ReadDir(answers)
	check(t, err)
	if len(entries) != 2 { // the answer, and the damaged file left for a person
		t.Fatalf("answers directory holds %d files, want 2", len(entries))
	}
}

func TestNewMemoryRefusesBadIDs(t *testing.T) {
	for _, self := range []string{"", ".", "..", "a/b", `a\b`} {
		if _, err := NewMemory(self, t.TempDir(), nil); !isInvalid(err) {
			t.Errorf("NewMemory(%q): %v, want errInvalid", self, err)
		}
	}
}

// TestMemorySweepsExpired: a long-running process does not keep what has expired.
func TestMemorySweepsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newTestMemory(t, "me", "")
		ctx := context.Background()
		for i := range 100 {
			key := fmt.Sprint(i)
			_, _ = m.Keys().Claim(ctx, key, time.Second)
			_ = m.Keys().Mark(ctx, key, time.Second)
			_, _ = m.Keys().Add(ctx, key, 1, time.Second)
			_, _ = m.Lease(ctx, key)
			_, _ = m.Keys().Take(ctx, key, 60, 1)
			_ = m.Keys().Pause(ctx, key, time.Now().Add(time.Second))
		}
		time.Sleep(LeaseTTL + time.Second)
		_, _ = m.Keys().Claim(ctx, "late", time.Second)
		m.mu.Lock()
		defer m.mu.Unlock()
		if n := len(m.keys) + len(m.leases) + len(m.buckets) + len(m.pauses); n != 1 {
			t.Fatalf("%d entries left after they all expired, want the late claim", n)
		}
	})
}
