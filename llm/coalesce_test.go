package llm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
)

// socket is a connection's receive buffer: writes accumulate, and a Read returns everything
// buffered (waiting while nothing is), as a TCP socket does. It counts the Reads.
type socket struct {
	mu     sync.Mutex
	buf    []byte
	closed bool
	ready  chan struct{} // size 1: data or EOF may be there
	reads  int
	// records: a Read returns at most one write, however many are buffered, as a TLS
	// connection returns one record per Read (and a server flushes one record per event).
	records bool
	sizes   []int       // with records: the sizes of the writes not yet read
	times   []time.Time // when each Read returned data
}

func newSocket() *socket { return &socket{ready: make(chan struct{}, 1)} }

func (s *socket) write(b string) {
	s.mu.Lock()
	s.buf = append(s.buf, b...)
	s.sizes = append(s.sizes, len(b))
	s.mu.Unlock()
	s.signal()
}

func (s *socket) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

func (s *socket) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *socket) Read(p []byte) (int, error) {
	for {
		s.mu.Lock()
		if len(s.buf) > 0 {
			q := p
			if s.records && len(q) > s.sizes[0] {
				q = q[:s.sizes[0]]
			}
			n := copy(q, s.buf)
			s.buf = s.buf[n:]
			for left := n; left > 0; {
				k := min(left, s.sizes[0])
				if s.sizes[0] -= k; s.sizes[0] == 0 {
					s.sizes = s.sizes[1:]
				}
				left -= k
			}
			s.reads++
			s.times = append(s.times, time.Now())
			s.mu.Unlock()
			return n, nil
		}
		if s.closed {
			s.mu.Unlock()
			return 0, io.EOF
		}
		s.mu.Unlock()
		<-s.ready
	}
}

// coalescedRead streams tokens (one every `every`) through an idleReader with coalesce until EOF, in 64-byte reads, and returns
// what it read and how many Reads reached the socket.
func coalescedRead(t *testing.T, coalesce time.Duration, tokens int, every time.Duration) (string, int) {
	t.Helper()
	return coalescedReadFrom(t, newSocket(), coalesce, tokens, every)
}

func coalescedReadFrom(t *testing.T, sock *socket, coalesce time.Duration, tokens int, every time.Duration) (string, int) {
	t.Helper()
	go func() { // the model: one token every `every`
		for range tokens {
			time.Sleep(every)
			sock.write("tok ")
		}
		sock.close()
	}()
	c := &Client{cfg: Config{IdleTimeout: time.Hour}}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	r := c.watch(ctx, sock, cancel, coalesce)
	r.partial = sock.records // as Stream marks a TLS HTTP/1.x body
	defer r.stop()
	var got []byte
	p := make([]byte, 64)
	for {
		n, err := r.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return string(got), sock.reads
}

// With StreamCoalesce the events that arrive within the interval are read together: 100 tokens
// 10 ms apart take about one Read per 100 ms instead of 100, and every byte still arrives.
func TestStreamCoalesceReadsLessOften(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		text, plain := coalescedRead(t, 0, 100, 10*time.Millisecond)
		ctext, coalesced := coalescedRead(t, 100*time.Millisecond, 100, 10*time.Millisecond)
		if text != ctext || len(text) != 400 {
			t.Fatalf("read %d bytes plain and %d coalesced, want the same 400", len(text), len(ctext))
		}
		if plain != 100 {
			t.Errorf("plain: %d socket reads, want one per token (100)", plain)
		}
		// One Read per 100 ms, the first and the last.
		if coalesced > 12 {
			t.Errorf("coalesced: %d socket reads, want about one per 100 ms", coalesced)
		}
		t.Logf("socket reads: %d plain, %d coalesced (100 ms)", plain, coalesced)
	})
}

// A backlog larger than net/http's default 4 KB read buffer (a fast model, a long pause) is read in
// large reads after a pause: about 250 KB sent at once arrives in a few batches after the first
// token's. With 4 KB reads, a chunk header split across two reads ended a read short and the rest
// waited for the next pause.
func TestStreamCoalesceReadsABacklogAtOnce(t *testing.T) {
	tokens := make([]string, 1000)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("%03d%s ", i, strings.Repeat("x", 200))
	}
	srv := newSSEServer(t, func(w http.ResponseWriter, r *http.Request, send func(string) bool) {
		for i, tok := range tokens {
			if i == 1 {
				time.Sleep(10 * time.Millisecond) // the client catches up and pauses; the rest arrives meanwhile
			}
			send(fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", tok))
		}
		send("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	c, _ := newTestClient(t, srv.URL, func(c *Config) { c.StreamCoalesce = 40 * time.Millisecond })
	var got strings.Builder
	batches, last := 0, time.Time{}
	for chunk, err := range c.Stream(t.Context(), hello) {
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		if now.Sub(last) > 15*time.Millisecond { // pauses are at least 20 ms
			batches++
		}
		last = now
		got.WriteString(chunk.Content)
	}
	if got.String() != strings.Join(tokens, "") {
		t.Fatalf("read %d bytes, want %d", got.Len(), len(strings.Join(tokens, "")))
	}
	if batches > 6 { // the first token, then 64 KB or more per pause; net/http's 4 KB reads gave 9 here (about 26 KB per pause)
		t.Errorf("%d batches for about 250 KB, want a few", batches)
	}
	t.Logf("%d batches", batches)
}

// Over TLS a Read returns one record (one event) even when many have arrived: the reads that find
// data waiting go on without a pause, so the stream is not held to one event per interval (which
// would have taken 100 x 100 ms = 10 s here instead of about 1 s).
func TestStreamCoalesceReadsEveryRecordWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		text, reads := coalescedReadFrom(t, &socket{ready: make(chan struct{}, 1), records: true}, 100*time.Millisecond, 100, 10*time.Millisecond)
		if len(text) != 400 {
			t.Fatalf("read %d bytes, want 400", len(text))
		}
		if d := time.Since(start); d > 1200*time.Millisecond {
			t.Errorf("100 tokens over 1 s, one record each, took %v to read, want at most 1.2 s", d)
		}
		t.Logf("%d socket reads in %v", reads, time.Since(start))
	})
}

// A read that filled its buffer leaves more waiting: the next one does not pause.
func TestStreamCoalesceDoesNotPauseWhileDataIsBuffered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sock := newSocket()
		sock.write(string(make([]byte, 200)))
		c := &Client{cfg: Config{IdleTimeout: time.Hour}}
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		r := c.watch(ctx, sock, cancel, time.Second)
		defer r.stop()
		start := time.Now()
		p := make([]byte, 64)
		for read := 0; read < 200; {
			n, err := r.Read(p)
			if err != nil {
				t.Fatal(err)
			}
			read += n
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("reading 200 buffered bytes in 64-byte reads took %v, want no pause", d)
		}
	})
}

// Cancelling the stream ends a pause at once.
func TestStreamCoalescePauseEndsWithTheContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sock := newSocket()
		time.AfterFunc(10*time.Millisecond, func() { sock.write("tok ") }) // the Read waits for it: caught up
		c := &Client{cfg: Config{IdleTimeout: time.Hour}}
		ctx, cancel := context.WithCancelCause(t.Context())
		r := c.watch(ctx, sock, cancel, time.Minute)
		defer r.stop()
		if _, err := r.Read(make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.AfterFunc(time.Second, func() { cancel(errStreamDone) })
		_, err := r.Read(make([]byte, 64))
		if !errors.Is(err, context.Canceled) || time.Since(start) != time.Second {
			t.Errorf("Read in a pause cancelled after 1s: %v after %v", err, time.Since(start))
		}
	})
}

// A coalesced stream from a real (loopback) server yields the same answer, and a stall is still
// found by the idle timeout, which does not count the pauses.
func TestStreamCoalesceAgainstFakeLLM(t *testing.T) {
	srv := fakellm.New()
	defer srv.Close()
	srv.SetAPIKey(testKey)
	tokens := fakellm.Split(fakellm.Answer(120, 7))
	srv.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		if r.Messages[len(r.Messages)-1].Content == "stall" {
			return fakellm.Tokens("Hel", "lo").StallAfter(1)
		}
		return fakellm.Tokens(tokens...).Paced(0, 2*time.Millisecond)
	})
	var want string
	for _, tok := range tokens {
		want += tok
	}
	for _, coalesce := range []time.Duration{0, 50 * time.Millisecond} {
		c, err := New(Config{BaseURL: srv.URL(), APIKey: testKey, ChatModel: "m", MaxRetries: -1,
			IdleTimeout: time.Second, StreamCoalesce: coalesce}) // tokens every 2 ms: a second of silence is a stall even on a loaded CI machine
		if err != nil {
			t.Fatal(err)
		}
		r := collect(t, c.Stream(t.Context(), hello))
		if r.Err != nil || r.Content != want || r.Finish != "stop" {
			t.Errorf("coalesce %v: %s, want the whole answer", coalesce, show(r))
		}
		stalled := collect(t, c.Stream(t.Context(), ChatRequest{Messages: []Message{{Role: RoleUser, Content: "stall"}}}))
		if stalled.Err == nil || stalled.Err.Kind != KindTimeout || stalled.Content != "Hel" {
			t.Errorf("coalesce %v, stall: %s, want a timeout after Hel", coalesce, show(stalled))
		}
	}
}

// bodyTransport answers every request with 200, an event stream, and sock as the body; with
// tls, as an HTTP/1.1 response over TLS.
type bodyTransport struct {
	sock *socket
	tls  bool
}

func (b bodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(b.sock), Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	if b.tls {
		resp.TLS = &tls.ConnectionState{}
	}
	return resp, nil
}

// A stream over TLS with HTTP/1.1 (one record per Read) is read as fast as it comes: 40 events
// 50 ms apart end 2 s after the first, not 4 s (one record per 100 ms pause, the backlog growing).
func TestStreamCoalesceOverTLSWithHTTP1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sock := &socket{ready: make(chan struct{}, 1), records: true}
		c, err := New(Config{BaseURL: "https://model.test/v1", APIKey: testKey, ChatModel: "m", MaxRetries: -1,
			StreamCoalesce: 100 * time.Millisecond, HTTPClient: &http.Client{Transport: bodyTransport{sock: sock, tls: true}}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for range 40 {
				time.Sleep(50 * time.Millisecond)
				sock.write(`data: {"choices":[{"index":0,"delta":{"content":"tok "}}]}` + "\n\n")
			}
			sock.write(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
			sock.close()
		}()
		start := time.Now()
		r := collect(t, c.Stream(t.Context(), hello))
		if r.Err != nil || len(r.Content) != 160 || r.Finish != "stop" {
			t.Fatalf("stream: %s, want 40 tokens, stop", show(r))
		}
		if d := time.Since(start); d > 2100*time.Millisecond {
			t.Errorf("40 events over 2 s read in %v, want at most 2.1 s", d)
		}
	})
}

// Once the finish reason is read, the rest of the stream (the usage chunk, [DONE], the end) is
// read as it comes: the end of the answer, and with it the reply's final edit, is not held back
// by a pause.
func TestStreamCoalesceEndsWithTheFinishReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sock := newSocket()
		c, err := New(Config{BaseURL: "http://model.test/v1", APIKey: testKey, ChatModel: "m", MaxRetries: -1,
			StreamCoalesce: time.Minute, HTTPClient: &http.Client{Transport: bodyTransport{sock: sock}}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(10 * time.Millisecond) // the Read waits for it: caught up, so the next one would pause
			sock.write(`data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
			time.Sleep(10 * time.Millisecond)
			sock.write(`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}` + "\n\n")
			time.Sleep(10 * time.Millisecond)
			sock.write("data: [DONE]\n\n")
			sock.close()
		}()
		start := time.Now()
		r := collect(t, c.Stream(t.Context(), hello))
		if r.Err != nil || r.Content != "Hi" || r.Finish != "stop" {
			t.Fatalf("stream: %s, want Hi, stop", show(r))
		}
		if d := time.Since(start); d != 30*time.Millisecond {
			t.Errorf("the stream ended after %v, want 30ms (when [DONE] came), not a pause of a minute later", d)
		}
	})
}

// Streams read at the same instants (multiples of StreamCoalesce), whenever they started, so a
// bot reading many wakes up once per interval for all of them; the pause after data stays
// between half and one and a half intervals.
func TestStreamCoalesceAlignsStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const coalesce = 100 * time.Millisecond
		socks := []*socket{newSocket(), newSocket()}
		var wg sync.WaitGroup
		for i, sock := range socks {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 37 * time.Millisecond) // the second starts later
				if text, _ := coalescedReadFrom(t, sock, coalesce, 50, 10*time.Millisecond); len(text) != 200 {
					t.Errorf("stream %d: read %d bytes, want 200", i, len(text))
				}
			})
		}
		wg.Wait()
		for i, sock := range socks {
			if len(sock.times) < 4 || len(sock.times) > 8 {
				t.Errorf("stream %d: %d reads of 50 tokens over 500 ms, want about one per 100 ms", i, len(sock.times))
			}
			for k, at := range sock.times[1:] { // the first read waits for the first token
				if at.Sub(at.Truncate(coalesce)) != 0 {
					t.Errorf("stream %d: read %d at %v, not on a multiple of %v", i, k+1, at.Format("15:04:05.000"), coalesce)
				}
				if gap := at.Sub(sock.times[k]); gap < coalesce/2 || gap > coalesce*3/2 {
					t.Errorf("stream %d: read %d came %v after the one before, want %v to %v", i, k+1, gap, coalesce/2, coalesce*3/2)
				}
			}
		}
	})
}
