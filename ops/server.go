// Package ops is what a team needs to run the bot: an HTTP listener with /healthz, /readyz and
// Prometheus /metrics, the readiness state behind /readyz, and Metrics, whose methods plug into
// the hooks of packages bot and llm and decorate the handlers' Chat and Imager and the Slack
// HTTP transport.
//
// The listener is off unless an address is configured (HEALTH_ADDR; the Kubernetes manifest
// sets :8080). Nothing here ever puts a token, a message text or a user id into a metric label
// or a response body.
package ops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Limits of the HTTP listener. Probes and scrapes are small and local: anything slow is cut.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 16 << 10
	scrapeTimeout     = 20 * time.Second // under writeTimeout, so a slow gather answers 503, not a cut
	scrapesAtOnce     = 4
	// ShutdownTimeout is how long Run waits for requests in progress once its context ends.
	ShutdownTimeout = 5 * time.Second
)

// Server is the operations HTTP listener: /healthz, /readyz and /metrics.
type Server struct {
	addr    string
	handler http.Handler
	log     *zap.Logger
}

// NewServer returns a Server for addr (host:port, e.g. ":8080"). ready reports whether the bot
// can do its work and, when not, why (Readiness.Ready); it is called on every /readyz request
// and must be quick. metrics is what /metrics exposes (Metrics.Registry); nil serves no /metrics.
func NewServer(addr string, ready func() (bool, string), metrics prometheus.Gatherer, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, reason := ready()
		switch {
		case !ok:
			writeText(w, http.StatusServiceUnavailable, "not ready: "+reason)
		case reason != "":
			writeText(w, http.StatusOK, "ready, degraded: "+reason)
		default:
			writeText(w, http.StatusOK, "ready")
		}
	})
	if metrics != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(metrics, promhttp.HandlerOpts{
			ErrorLog:            zap.NewStdLog(log),
			ErrorHandling:       promhttp.ContinueOnError, // a failing collector must not hide the others
			MaxRequestsInFlight: scrapesAtOnce,
			Timeout:             scrapeTimeout,
		}))
	}
	return &Server{addr: addr, handler: mux, log: log}
}

// Handler returns the server's routes (for tests and for mounting elsewhere).
func (s *Server) Handler() http.Handler { return s.handler }

// Run listens on the server's address and serves until ctx ends, then shuts down gracefully:
// it stops accepting connections and gives requests in progress ShutdownTimeout. It returns nil
// after a clean shutdown and an error when it cannot listen or serving fails. An empty address
// is an error: the listener is off when HEALTH_ADDR is unset, so the caller does not run it.
//
// The caller decides when probes stop being answered: to keep /healthz answering while the bot
// drains on SIGTERM, pass a context that ends after the bot has stopped.
func (s *Server) Run(ctx context.Context) error {
	ln, err := s.Listen(ctx)
	if err != nil {
		return fmt.Errorf("health listener: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Listen opens the server's address for Serve: a caller that must know at start-up that the
// address can be had (the bot stops with a message if not) listens first, then serves.
func (s *Server) Listen(ctx context.Context) (net.Listener, error) {
	if s.addr == "" {
		return nil, errors.New("no address (HEALTH_ADDR is empty: do not start the listener)")
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", s.addr)
}

// Serve is Run on a listener the caller opened; Serve closes it.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          zap.NewStdLog(s.log),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s.log.Info("health listener started", zap.String("addr", ln.Addr().String()))
	served := make(chan error, 1) // size 1: the serving goroutine never waits for us
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served: // Serve failed on its own (ErrServerClosed cannot happen: only we shut down)
		return fmt.Errorf("health listener: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("health listener shutdown: %w", err)
	}
	s.log.Info("health listener stopped")
	return nil
}

// writeText answers with a short plain-text body.
func writeText(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body + "\n"))
}
