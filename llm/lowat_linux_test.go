package llm

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
)

// rcvLowat reads c's SO_RCVLOWAT (-1 if it cannot).
func rcvLowat(c net.Conn) int {
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return -1
	}
	v := -1
	_ = raw.Control(func(fd uintptr) {
		if n, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT); err == nil {
			v = n
		}
	})
	return v
}

// During a coalescing pause the stream's socket wakes nobody for the packets that arrive
// (SO_RCVLOWAT well above what a pause gathers); before every read, and when the stream ends
// (the connection goes back to the pool for the next request), it is back to 1.
func TestStreamCoalesceQuietsTheSocketDuringPauses(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	srv.SetAPIKey(testKey)
	tokens := fakellm.Split(fakellm.Answer(60, 3))
	srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Tokens(tokens...).Paced(0, 5*time.Millisecond)
	})
	var want string
	for _, tok := range tokens {
		want += tok
	}
	var mu sync.Mutex
	var conns []net.Conn
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
		return c, err
	}}
	defer tr.CloseIdleConnections()
	c, err := New(Config{BaseURL: srv.URL(), APIKey: testKey, ChatModel: "m", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: tr}, StreamCoalesce: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	conn := func() net.Conn {
		mu.Lock()
		defer mu.Unlock()
		return conns[len(conns)-1]
	}

	quiet := false
	var timers sync.WaitGroup
	for range 2 { // the second stream reuses the connection: it must not wait for quietBytes
		var got string
		start := time.Now()
		for chunk, err := range c.Stream(t.Context(), hello) {
			if err != nil {
				t.Fatal(err)
			}
			got += chunk.Content
			if v := rcvLowat(conn()); chunk.Content != "" && v != 1 {
				t.Fatalf("SO_RCVLOWAT %d while the caller reads, want 1", v)
			}
			// Look at the socket during the next pause.
			timers.Add(1)
			time.AfterFunc(10*time.Millisecond, func() {
				defer timers.Done()
				if rcvLowat(conn()) >= 64<<10 { // quietBytes, or the kernel's cap (half of tcp_rmem's largest buffer)
					mu.Lock()
					quiet = true
					mu.Unlock()
				}
			})
		}
		if got != want {
			t.Fatalf("read %q, want %q", got, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("stream took %v", d)
		}
		timers.Wait()
		if v := rcvLowat(conn()); v != 1 {
			t.Errorf("SO_RCVLOWAT %d after the stream, want 1", v)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 {
		t.Errorf("%d connections dialled for two streams, want 1 (reused)", len(conns))
	}
	if !quiet {
		t.Error("SO_RCVLOWAT was never raised during a pause")
	}
}
