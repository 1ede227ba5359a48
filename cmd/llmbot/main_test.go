package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/doctor"
)

func TestDoctorHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"llmbot", "doctor", "--help"}, envFunc(nil), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "Usage: llmbot doctor") {
		t.Errorf("doctor --help:\n%s", stdout.String())
	}
	stdout.Reset()
	if err := run(context.Background(), []string{"llmbot", "--help"}, envFunc(nil), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "llmbot doctor") {
		t.Errorf("--help does not mention the doctor:\n%s", stdout.String())
	}
	if err := run(context.Background(), []string{"llmbot", "doctor", "extra"}, envFunc(nil), &stdout, &stderr); err == nil {
		t.Error("doctor accepted an unknown argument")
	}
}

// TestDoctorChecksTheBotsSettings: `llmbot doctor` is given the settings a normal start reads:
// each problem that stops a start is a line of its settings check, and the models CHANNEL_CONFIG
// names are asked too.
func TestDoctorChecksTheBotsSettings(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // the model checks are refused at once; without tokens nothing goes to Slack
	path := filepath.Join(t.TempDir(), "channels.yaml")
	if err := os.WriteFile(path, []byte("channels:\n  C0123ABCD:\n    model: model-a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"OPENAI_BASE_URL": dead.URL + "/v1", "TEMPERATURE": "7", "REPLY_MODE": "fast", "CHANNEL_CONFIG": path,
	}
	startErr := run(t.Context(), []string{"llmbot"}, envFunc(env), io.Discard, io.Discard)
	if startErr == nil {
		t.Fatal("a start with these settings did not stop")
	}
	var stdout bytes.Buffer
	err := run(t.Context(), []string{"llmbot", "doctor"}, envFunc(env), &stdout, io.Discard)
	if !errors.Is(err, doctor.ErrReported) {
		t.Errorf("doctor = %v, want its checklist's failure", err)
	}
	out := stdout.String()
	_, problems, _ := strings.Cut(startErr.Error(), "\n")
	for _, p := range strings.Split(problems, "\n") {
		if want := "    - " + strings.TrimPrefix(p, "  - ") + "\n"; !strings.Contains(out, want) {
			t.Errorf("doctor's checklist lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "Chat model model-a (CHANNEL_CONFIG: C0123ABCD)") {
		t.Errorf("doctor did not ask the CHANNEL_CONFIG model:\n%s", out)
	}
}
