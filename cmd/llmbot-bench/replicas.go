package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/redisping"
)

// With -replicas K the bot runs as K processes against the one fake Slack, which spreads the
// envelopes over their Socket Mode connections in turn, as Slack spreads them over an app's
// connections. They share their state (dedupe, thread leases, Slack's budgets) through one
// redis-server started for the scenario, unless -no-redis asks for replicas that share nothing,
// as they ran before Redis.

// fleet is the bot's processes in one scenario, in the order they connected: replica i holds the
// fake Slack's connection i+1.
type fleet []*botProcess

// startFleet starts k bot processes with env, one after the other, and waits for each one's
// Socket Mode connection before starting the next, so that all k take envelopes when the
// questions come. Each has its own STATE_DIR, new for the scenario: as each pod has its own
// emptyDir, a folder shared by the replicas would let one read another's local journal as its
// own; and a folder kept from the scenario before would hold the answers still open when its bot
// was stopped, which the next bot would try to close in a fake Slack that never had them.
// logPath(i) names replica i's log file. On an error every process started is stopped.
func startFleet(ctx context.Context, path string, args, env []string, k int, logPath func(i int) string, slack *fakeslack.Server) (fleet, error) {
	var bots fleet
	for i := range k {
		dir := strings.TrimSuffix(logPath(i), ".log") + "-state"
		e := append(append([]string{}, env...), "STATE_DIR="+dir)
		bot, err := startBot(path, args, e, logPath(i))
		if err != nil {
			bots.stop(10 * time.Second)
			return nil, err
		}
		bots = append(bots, bot)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = slack.WaitFor(cctx, func() bool { return slack.Connections().Current > i || !bot.running() })
		cancel()
		if err != nil || !bot.running() {
			bots.stop(10 * time.Second)
			return nil, fmt.Errorf("bot %d of %d did not connect to the fake Slack (log: %s): %v", i+1, k, logPath(i), err)
		}
	}
	return bots, nil
}

// spreader returns how question i is posted: with one replica as Slack would send it (the fake's
// turn), with several with all its events to one replica's connection, question i to the
// (i mod k)-th. The fake's own turn spreads envelopes, not questions, and a mention comes as two
// envelopes (app_mention, then message.channels, which the bot leaves to the app_mention): with
// two replicas every app_mention would go to the first one, which would then write every answer.
// Slack promises no pattern; an even split of the questions is the load a deployment of k
// replicas is sized for.
func spreader(slack *fakeslack.Server, k int) (func(i int, m fakeslack.UserMessage) (string, error), error) {
	if k <= 1 {
		return func(_ int, m fakeslack.UserMessage) (string, error) { return slack.Post(m), nil }, nil
	}
	var conns []int
	for _, c := range slack.Conns() {
		if c.TakesEnvelopes {
			conns = append(conns, c.ID)
		}
	}
	if len(conns) != k {
		return nil, fmt.Errorf("%d of the %d replicas' connections take envelopes", len(conns), k)
	}
	return func(i int, m fakeslack.UserMessage) (string, error) {
		return slack.Via(conns[i%k]).Post(m)
	}, nil
}

// stop stops every process.
func (f fleet) stop(timeout time.Duration) {
	for _, b := range f {
		b.stop(timeout)
	}
}

// exited returns an error naming the first process that has exited, or nil while all run.
func (f fleet) exited() error {
	for i, b := range f {
		if !b.running() {
			if len(f) == 1 {
				return fmt.Errorf("bot exited during the run: %v", b.err)
			}
			return fmt.Errorf("bot %d of %d exited during the run (log: %s): %v", i+1, len(f), b.logs, b.err)
		}
	}
	return nil
}

// usage is the sum of the processes' CPU time and scheduling counts (-1 when any is unknown).
func (f fleet) usage() (usage, []usage, error) {
	var sum usage
	each := make([]usage, len(f))
	for i, b := range f {
		u, err := cpuUsage(b.pid())
		if err != nil {
			return usage{}, nil, err
		}
		each[i] = u
		sum.cpu += u.cpu
		if u.wakeup < 0 || sum.wakeup < 0 {
			sum.wakeup = -1
		} else {
			sum.wakeup += u.wakeup
		}
	}
	return sum, each, nil
}

// memKB is the sum of the processes' "Vm…:" line (VmRSS, VmHWM), in kB, and each one's.
func (f fleet) memKB(key string) (int64, []int64, error) {
	var sum int64
	each := make([]int64, len(f))
	for i, b := range f {
		kb, err := memKB(b.pid(), key)
		if err != nil {
			return 0, nil, err
		}
		each[i] = kb
		sum += kb
	}
	return sum, each, nil
}

// redisServer is a redis-server child process for one scenario: on a free loopback port, without
// persistence, its files in its own folder.
type redisServer struct {
	proc *botProcess
	port int
}

// Bounds of the start: a server not answering PING within redisStartTimeout is a failure, and one
// that dies at once (its port taken between our probe and its bind) is started again on another
// port a few times.
const (
	redisStartTimeout  = 10 * time.Second
	redisStartAttempts = 3
)

// startRedis starts the redis-server binary at path with its folder and log in dir, and waits
// until it answers PING.
func startRedis(ctx context.Context, path, dir string) (*redisServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "redis.log")
	var lastErr error
	for range redisStartAttempts {
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir}
		// Its environment is this process's: redis-server needs nothing from it, and nothing there is
		// the bot's.
		p, err := startChild(path, args, nil, logPath)
		if err != nil {
			return nil, err
		}
		r := &redisServer{proc: p, port: port}
		if lastErr = redisping.Wait(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), p.exited, redisStartTimeout); lastErr == nil {
			return r, nil
		}
		p.stop(5 * time.Second)
		lastErr = fmt.Errorf("redis-server on port %d: %w (log: %s)", port, lastErr, logPath)
	}
	return nil, lastErr
}

// url is the server's address as the bot's REDIS_URL.
func (r *redisServer) url() string { return "redis://127.0.0.1:" + strconv.Itoa(r.port) + "/0" }

func (r *redisServer) pid() int { return r.proc.pid() }

func (r *redisServer) stop() { r.proc.stop(10 * time.Second) }

// freePort asks the kernel for a free loopback port. Another process may take it before
// redis-server binds it; startRedis then tries another.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// findRedis returns the path of redis-server, or an error that says what to do without it.
func findRedis() (string, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("-replicas above 1 needs redis-server on PATH (Debian: apt-get install redis-server), or -no-redis for replicas that share nothing")
	}
	return path, nil
}
