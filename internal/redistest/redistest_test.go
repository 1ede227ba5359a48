package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/redisping"
)

func TestStopAndRestartOnTheSamePort(t *testing.T) {
	s := New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := redisping.Ping(ctx, s.Addr()); err != nil {
		t.Fatalf("PING after New: %v", err)
	}
	addr := s.Addr()
	s.Stop()
	if err := redisping.Ping(ctx, addr); err == nil {
		t.Fatal("PING answered after Stop")
	}
	s.Stop() // idempotent
	s.Restart()
	if s.Addr() != addr {
		t.Fatalf("restarted on %s, want %s", s.Addr(), addr)
	}
	if err := redisping.Ping(ctx, addr); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
}

func TestStartGivesAURLAndAStop(t *testing.T) {
	url, stop := Start(t)
	if len(url) < len("redis://127.0.0.1:1") || url[:18] != "redis://127.0.0.1:" {
		t.Fatalf("url = %q", url)
	}
	addr := url[len("redis://"):]
	stop()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := redisping.Ping(ctx, addr); err == nil {
		t.Fatal("PING answered after stop")
	}
}

func TestSkipsWithoutRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(RequireEnv, "")
	var sub *testing.T
	t.Run("without", func(t *testing.T) {
		sub = t
		New(t)
		t.Error("New returned without redis-server on PATH")
	})
	if !sub.Skipped() {
		t.Fatal("not skipped")
	}
}

func TestServerWithAPassword(t *testing.T) {
	s := New(t, "--requirepass", "secret")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := redisping.Ping(ctx, s.Addr()); err != nil {
		t.Fatalf("PING: %v", err)
	}
}

func TestProxyCutsItsClientsOffAndLetsThemBack(t *testing.T) {
	s := New(t)
	p := NewProxy(t, s.Addr())
	addr := p.URL()[len("redis://"):]
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := redisping.Ping(ctx, addr); err != nil {
		t.Fatalf("PING through the proxy: %v", err)
	}
	p.Cut()
	if err := redisping.Ping(ctx, addr); err == nil {
		t.Fatal("PING answered through a cut proxy")
	}
	if err := redisping.Ping(ctx, s.Addr()); err != nil {
		t.Fatalf("PING to the server while the proxy is cut: %v; want it to serve the others", err)
	}
	p.Restore()
	if err := redisping.Ping(ctx, addr); err != nil {
		t.Fatalf("PING through the restored proxy: %v", err)
	}
}
