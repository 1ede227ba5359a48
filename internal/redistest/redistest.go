// Package redistest runs a real redis-server for tests: on a free loopback port, without persistence, in a
// temporary directory, killed when the test ends. A test can stop it and start it again on the same port to
// play an outage.
//
// Tests that need Redis are skipped where redis-server is not installed, unless LLMBOT_REQUIRE_REDIS=1 (as in
// CI), which makes its absence a failure: a skipped test there would hide the shared state from CI.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/redisping"
)

// RequireEnv, set to 1, makes a missing redis-server a test failure instead of a skip.
const RequireEnv = "LLMBOT_REQUIRE_REDIS"

// Bounds of the waits: a server not answering PING within startTimeout is a failure, and a server that dies
// at once (its port taken between our probe and its bind) is started again on another port a few times.
const (
	startTimeout  = 10 * time.Second
	startAttempts = 3
)

// Server is one redis-server process for one test. Its port stays the same across Stop and Restart.
type Server struct {
	t    testing.TB
	bin  string
	args []string // more arguments for redis-server
	dir  string
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// Start starts a redis-server for t and returns its URL and a function that stops it (idempotent; it is also
// stopped when t ends). It skips t when redis-server is not installed (see RequireEnv).
func Start(t testing.TB) (url string, stop func()) {
	t.Helper()
	s := New(t)
	return s.URL(), s.Stop
}

// New starts a redis-server for t, stopped when t ends, with args added to its command line (such as
// "--requirepass", "secret"). It skips t when redis-server is not installed (see RequireEnv).
func New(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not found: install Debian's redis-server (apt-get install redis-server) or set " +
			RequireEnv + "=1 to make this a failure"
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal("redis-server not found, and " + RequireEnv + "=1: install Debian's redis-server (apt-get install redis-server)")
		}
		t.Skip(msg)
	}
	s := &Server{t: t, bin: bin, args: args, dir: t.TempDir()}
	// Registered after TempDir, so it runs first: the server is gone before its directory is removed.
	t.Cleanup(s.Stop)
	var lastErr error
	for range startAttempts {
		s.port, lastErr = freePort()
		if lastErr != nil {
			continue
		}
		if lastErr = s.start(); lastErr == nil {
			return s
		}
	}
	t.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Stop kills the server and waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart starts the server again on the same port (after Stop; a running server is stopped first) and
// waits until it answers. It comes back empty: nothing is saved.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("redistest: restart redis-server on port %d: %v", s.port, err)
	}
}

// start runs redis-server on s.port and waits until it answers PING, or fails when it exits or stays silent.
func (s *Server) start() error {
	logFile := filepath.Join(s.dir, "redis.log")
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", logFile,
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	done := make(chan struct{})
	go func() { // owned by s: Stop and the failure path below wait for it
		_ = cmd.Wait()
		close(done)
	}()
	if err := redisping.Wait(context.Background(), s.Addr(), done, startTimeout); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%w (log: %s)", err, tail(logFile))
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

// freePort asks the kernel for a free loopback port. Another process may take it before redis-server binds
// it; New then tries another.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is the end of the server's log, for a start that failed.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "none"
	}
	const max = 600
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimSpace(string(b))
}
