package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseSchedstat(t *testing.T) {
	if got, err := parseSchedstat("1107766458 619725671 957\n"); err != nil || got != (usage{cpu: 1107766458 * time.Nanosecond, wakeup: 957}) {
		t.Errorf("parseSchedstat = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "x 1 2", "1 2", "1 2 x"} {
		if _, err := parseSchedstat(bad); err == nil {
			t.Errorf("parseSchedstat(%q) accepted", bad)
		}
	}
}

// cpuTime of this process grows with work it does, in steps finer than /proc/<pid>/stat's 10 ms.
// A thread's schedstat is brought up to date at a scheduler tick or when the thread stops running,
// not while it runs: the loop spins for longer than a tick (4 ms at HZ=250) and the goroutine then
// sleeps, so the thread that spun is descheduled before the second reading.
func TestCPUTimeOfThisProcess(t *testing.T) {
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
		for i := range 10_000 {
			x += i % 7
		}
	}
	time.Sleep(10 * time.Millisecond)
	after, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("cpuTime did not grow (%v -> %v) over 30 ms of a busy loop (%d)", before, after, x)
	}
	if u, err := cpuUsage(os.Getpid()); err != nil || u.wakeup <= 0 {
		t.Errorf("cpuUsage = %+v, %v: want threads scheduled in at least once", u, err)
	}
}

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name string
		stat string
		want time.Duration
	}{
		{"plain", "4242 (llmbot) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 50 0 0 20 0 9 0 1000 1 2 3",
			2 * time.Second},
		{"name with spaces and parentheses", "7 (llm (bot) x) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 9 1 2 3",
			70 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.stat)
			if err != nil || got != tt.want {
				t.Errorf("parseStatCPU = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if _, err := parseStatCPU("4242 (llmbot) S 1 2"); err == nil {
		t.Error("a short stat line was accepted")
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tllmbot\nVmPeak:\t 1000 kB\nVmHWM:\t   23456 kB\nVmRSS:\t   12345 kB\n"
	tests := []struct {
		key  string
		want int64
	}{
		{"VmHWM", 23456},
		{"VmRSS", 12345},
	}
	for _, tt := range tests {
		got, err := parseStatusKB(strings.NewReader(status), tt.key)
		if err != nil || got != tt.want {
			t.Errorf("parseStatusKB(%s) = %d, %v; want %d", tt.key, got, err, tt.want)
		}
	}
	if _, err := parseStatusKB(strings.NewReader(status), "VmSwap"); err == nil {
		t.Error("a missing key was found")
	}
}

func TestCountGoroutines(t *testing.T) {
	dump := `SIGQUIT: quit
PC=0x48e761 m=0 sigcode=0

goroutine 0 gp=0xc68360 m=0 mp=0xc68f60 [idle]:
runtime.futex(...)

goroutine 1 gp=0xc000002380 m=nil [select, 2 minutes]:
main.run(...)

goroutine 7 [chan receive]:
net/http.(*persistConn).readLoop(...)
	created by net/http.(*Transport).dialConn in goroutine 6
`
	total, conns := countGoroutines([]byte(dump))
	if total != 3 || conns != 1 {
		t.Errorf("countGoroutines = %d, %d; want 3 goroutines, 1 of an HTTP connection", total, conns)
	}
}
