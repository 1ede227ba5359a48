package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

// TestProcessSIGTERM builds the real binary and stops it with SIGTERM mid-answer: it exits 0
// within the grace period, and the answer is closed with a note (no bare placeholder).
func TestProcessSIGTERM(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "llmbot")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	fs := fakeslack.New(fakeslack.Config{BotToken: botToken, AppToken: appToken})
	defer fs.Close()
	fl := fakellm.New()
	defer fl.Close()
	fl.SetAPIKey(llmKey)
	fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer).StallAfter(4) })

	var logs syncBuffer
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(),
		"SLACK_BOT_TOKEN="+botToken, "SLACK_APP_TOKEN="+appToken, "OPENAI_API_KEY="+llmKey,
		"SLACK_API_URL="+fs.URL(), "OPENAI_BASE_URL="+fl.URL(), "SHUTDOWN_GRACE=2s", "LOG_LEVEL=debug")
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	wait := func(what string, cond func() bool) {
		t.Helper()
		if err := fs.WaitFor(ctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v\n%s", what, err, logs.String())
		}
	}
	wait("connection", func() bool { return fs.Connections().Current == 1 })
	ts := fs.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	wait("partial answer", func() bool {
		m := fs.BotReplies("C1", ts)
		return len(m) == 1 && strings.HasPrefix(m[0].Text, "Four")
	})

	begin := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil { // an *exec.ExitError carries the status
			t.Errorf("exit after SIGTERM: %v, want status 0\n%s", err, logs.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("still running 15s after SIGTERM\n%s", logs.String())
	}
	if took := time.Since(begin); took > 8*time.Second {
		t.Errorf("exit took %v with a 2s grace period", took)
	}
	m := fs.BotReplies("C1", ts)
	if len(m) != 1 || !strings.Contains(m[0].Text, "Interrupted") || strings.Contains(m[0].Text, "Thinking") {
		t.Errorf("reply after SIGTERM %+v: want the partial answer with an interrupted note", m)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("a credential appears in the logs")
	}
}

// TestDoctorProcess builds the binary: `llmbot doctor` exits 0 when every check passes, and 1
// with only the checklist (nothing on stderr) when one fails.
func TestDoctorProcess(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "llmbot")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fs := fakeslack.New(fakeslack.Config{BotToken: botToken, AppToken: appToken})
	defer fs.Close()
	fl := fakellm.New()
	defer fl.Close()
	fl.SetAPIKey(llmKey)
	fl.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("ok") })
	doctor := func() (stdout, stderr string, code int) {
		cmd := exec.CommandContext(ctx, bin, "doctor")
		cmd.Env = []string{"HOME=" + t.TempDir(),
			"SLACK_BOT_TOKEN=" + botToken, "SLACK_APP_TOKEN=" + appToken, "OPENAI_API_KEY=" + llmKey,
			"OPENAI_BASE_URL=" + fl.URL(), "SLACK_API_URL=" + fs.URL(), "LLM_HEADERS=X-Extra=" + secret + "-header"}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}
	if out, errOut, code := doctor(); code != 0 || errOut != "" || !strings.Contains(out, "All checks passed.") {
		t.Errorf("all good: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	fl.SetAPIKey("sk-another-key-entirely")
	if out, errOut, code := doctor(); code != 1 || errOut != "" || !strings.Contains(out, "1 check failed (1 check skipped).") {
		t.Errorf("401: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
}
