//go:build linux

package nodump

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test runs this binary again in two roles: the bot (roleEnv "bot", which makes itself
// non-dumpable when setEnv is "1" and then starts a child) and the child it starts (roleEnv
// "child", with only PATH and HOME of its own, as a stdio MCP server), which tries to read the
// bot's /proc/<pid>/environ.
const (
	roleEnv   = "NODUMP_TEST_ROLE"
	setEnv    = "NODUMP_TEST_SET"
	pidEnv    = "NODUMP_TEST_PID"
	secretEnv = "NODUMP_TEST_SECRET"
	secret    = "xoxb-secret-of-the-bot"
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "bot":
		os.Exit(bot())
	case "child":
		fmt.Print(readParent(os.Getenv(pidEnv)))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// bot is the bot's role: it prints whether it is dumpable and what its child could read.
func bot() int {
	if os.Getenv(setEnv) == "1" {
		if err := Set(); err != nil {
			fmt.Print(err)
			return 1
		}
	}
	dumpable, err := Dumpable()
	if err != nil {
		fmt.Print(err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Print(err)
		return 1
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), roleEnv + "=child", pidEnv + "=" + strconv.Itoa(os.Getpid())}
	out, err := child.Output()
	if err != nil {
		fmt.Print(err)
		return 1
	}
	fmt.Printf("dumpable=%v child read: %s", dumpable, out)
	return 0
}

// readParent is what a child gets of the environment of process pid: "the secret",
// "permission denied", or another outcome.
func readParent(pid string) string {
	env, err := os.ReadFile("/proc/" + pid + "/environ")
	switch {
	case errors.Is(err, fs.ErrPermission) && errors.Is(err, syscall.EACCES):
		return "permission denied"
	case err != nil:
		return err.Error()
	case strings.Contains(string(env), secret):
		return "the secret"
	}
	return "the environment without the secret"
}

// A program the bot starts runs as the bot's user. Once the bot is non-dumpable, that program
// cannot read the bot's /proc/<pid>/environ (EACCES), where the Slack and model tokens are; a
// dumpable bot's child can. Run as root, the test runs the bot as nobody (uid 65534): root's
// CAP_SYS_PTRACE reads any process's environment, non-dumpable or not.
func TestChildCannotReadTheEnvironment(t *testing.T) {
	exe, cred := runnable(t)
	for _, tc := range []struct {
		set  string
		want string
	}{
		{"0", "dumpable=true child read: the secret"},
		{"1", "dumpable=false child read: permission denied"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/", roleEnv + "=bot", setEnv + "=" + tc.set, secretEnv + "=" + secret}
		cmd.Dir = filepath.Dir(exe)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.Output()
		cancel()
		if err != nil || string(out) != tc.want {
			t.Errorf("bot with Set %s: %q, %v; want %q", tc.set, out, err, tc.want)
		}
	}
}

// runnable is this test binary where the user the bot's role runs as may run it, and that
// user: this process's own, or nobody's when this process is root (a copy of the binary in a
// directory anyone may read).
func runnable(t *testing.T) (string, *syscall.Credential) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		return exe, nil
	}
	dir, err := os.MkdirTemp("", "nodump")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "nodump.test")
	if err := copyFile(exe, copied); err != nil {
		t.Fatal(err)
	}
	return copied, &syscall.Credential{Uid: 65534, Gid: 65534}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
