package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ, 100 on Linux.
const userHZ = 100

// botProcess is the bot binary running as a child process (or redis-server, for -replicas).
type botProcess struct {
	cmd    *exec.Cmd
	logs   string // stderr: the bot's logs, then the goroutine dump
	exited chan struct{}
	err    error // Wait's result, set before exited is closed
}

// startBot starts the binary with args and exactly env (nothing inherited), its stderr in logPath.
func startBot(path string, args, env []string, logPath string) (*botProcess, error) {
	if env == nil {
		env = []string{} // nil would inherit this process's environment
	}
	return startChild(path, args, env, logPath)
}

// startChild starts the program at path with args and env (nil: this process's environment), its
// stdout and stderr in logPath.
func startChild(path string, args, env []string, logPath string) (*botProcess, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout = f
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(path), err)
	}
	b := &botProcess{cmd: cmd, logs: logPath, exited: make(chan struct{})}
	go func() { // owned by b: ends when the process does, which stop guarantees
		b.err = cmd.Wait()
		f.Close()
		close(b.exited)
	}()
	return b, nil
}

func (b *botProcess) pid() int { return b.cmd.Process.Pid }

// running reports whether the process has not exited.
func (b *botProcess) running() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// dumpGoroutines sends SIGQUIT (the Go runtime prints every goroutine's stack to stderr and
// exits; the bot runs with GOTRACEBACK=all) and returns how many goroutines the dump lists, and
// how many of them are idle HTTP connections' read and write loops (kept by the HTTP clients'
// pools, not leaked). The process is killed if it has not exited within timeout.
func (b *botProcess) dumpGoroutines(timeout time.Duration) (total, httpConns int, err error) {
	if !b.running() {
		return 0, 0, fmt.Errorf("bot exited early: %v", b.err)
	}
	if err := b.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return 0, 0, err
	}
	if err := b.wait(timeout); err != nil {
		return 0, 0, err
	}
	data, err := os.ReadFile(b.logs)
	if err != nil {
		return 0, 0, err
	}
	total, httpConns = countGoroutines(data)
	if total == 0 {
		return 0, 0, fmt.Errorf("no goroutine dump in the bot's output (%v): %s", b.err, tail(data, 400))
	}
	return total, httpConns, nil
}

// stop kills the process (if it still runs) and waits for it, at most timeout.
func (b *botProcess) stop(timeout time.Duration) {
	if b.running() {
		_ = b.cmd.Process.Kill()
	}
	_ = b.wait(timeout)
}

func (b *botProcess) wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-b.exited:
		return nil
	case <-t.C:
		_ = b.cmd.Process.Kill()
		select {
		case <-b.exited:
		case <-time.After(5 * time.Second):
		}
		return fmt.Errorf("bot did not exit within %v; killed", timeout)
	}
}

var goroutineHeader = regexp.MustCompile(`(?m)^goroutine \d+( gp=\S+( m=\S+( mp=\S+)?)?)? \[`)

// countGoroutines counts the goroutine headers in a Go stack dump ("goroutine 12 [select]:", or with
// " gp=0x… m=… mp=0x…" before the status at GOTRACEBACK levels that print them).
// It also counts those running an HTTP connection's read or write loop.
func countGoroutines(dump []byte) (total, httpConns int) {
	starts := goroutineHeader.FindAllIndex(dump, -1)
	for i, s := range starts {
		end := len(dump)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		stack := dump[s[0]:end]
		if bytes.Contains(stack, []byte("net/http.(*persistConn).readLoop")) ||
			bytes.Contains(stack, []byte("net/http.(*persistConn).writeLoop")) {
			httpConns++
		}
	}
	return len(starts), httpConns
}

// logLines counts the bot's log lines (JSON lines before the dump) by level, and returns the
// first warning or error line (cut to 300 bytes) to show what went wrong.
func logLines(path string) (map[string]int, string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, ""
	}
	defer f.Close()
	out := map[string]int{}
	first := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(`{"level":"`)) {
			continue
		}
		rest := line[len(`{"level":"`):]
		if i := bytes.IndexByte(rest, '"'); i > 0 {
			level := string(rest[:i])
			out[level]++
			if first == "" && (level == "warn" || level == "error") {
				first = tail(line, 300) // the end holds the error
			}
		}
	}
	return out, first
}

// usage is what the kernel's scheduler counted for a process's threads.
type usage struct {
	cpu    time.Duration // time running
	wakeup int64         // times a thread was put on a CPU (-1: unknown): each is a wake-up or a preemption
}

// cpuUsage reads the process's CPU time and scheduling count: the sums over its threads of
// /proc/<pid>/task/<tid>/schedstat (nanoseconds running, and the number of times the thread was
// scheduled in). A Go process keeps its threads, so none of its time leaves with an exited
// thread. Where schedstat is missing it falls back to utime+stime of /proc/<pid>/stat, counted in
// 10 ms ticks: too coarse for short runs (a 400-token answer costs a few of them), and without
// the count.
//
// The count is the steadier figure on a shared VM: CPU time per wake-up varies with what else
// runs on the host, the number of wake-ups with what the bot does.
func cpuUsage(pid int) (usage, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err == nil {
		var sum usage
		ok := true
		for _, t := range tasks {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
			if errors.Is(err, os.ErrNotExist) {
				continue // the thread exited since the listing
			}
			var u usage
			if err == nil {
				u, err = parseSchedstat(string(data))
			}
			if err != nil {
				ok = false
				break
			}
			sum.cpu += u.cpu
			sum.wakeup += u.wakeup
		}
		if ok {
			return sum, nil
		}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, err
	}
	cpu, err := parseStatCPU(string(data))
	return usage{cpu: cpu, wakeup: -1}, err
}

// cpuTime is cpuUsage's CPU time.
func cpuTime(pid int) (time.Duration, error) {
	u, err := cpuUsage(pid)
	return u.cpu, err
}

// parseSchedstat reads a schedstat line: nanoseconds spent running, nanoseconds spent waiting to
// run, times scheduled in.
func parseSchedstat(line string) (usage, error) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return usage{}, errors.New("schedstat: too few fields")
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return usage{}, fmt.Errorf("schedstat: %w", err)
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return usage{}, fmt.Errorf("schedstat: %w", err)
	}
	return usage{cpu: time.Duration(ns), wakeup: n}, nil
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a /proc/<pid>/stat line. The command
// name (field 2) is in parentheses and may hold spaces, so fields are counted after its last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("/proc stat: too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// memKB reads a "Vm…:" line (VmRSS, VmHWM) of /proc/<pid>/status, in kB.
func memKB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseStatusKB(f, key)
}

func parseStatusKB(r io.Reader, key string) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != key {
			continue
		}
		fs := strings.Fields(val)
		if len(fs) == 0 {
			break
		}
		return strconv.ParseInt(fs[0], 10, 64)
	}
	return 0, fmt.Errorf("/proc status: no %s", key)
}

// buildBot builds ./cmd/llmbot into dir and returns the binary's path.
func buildBot(ctx context.Context, moduleRoot, dir string) (string, error) {
	out := dir + "/llmbot"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/llmbot")
	cmd.Dir = moduleRoot
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/llmbot: %w\n%s", err, msg)
	}
	return out, nil
}

// moduleRoot finds the directory of go.mod from the working directory up.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the llmbot module (run from the repository)")
	}
	return strings.TrimSuffix(mod, "/go.mod"), nil
}

// tail returns the end of data, at most n bytes.
func tail(data []byte, n int) string {
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}
