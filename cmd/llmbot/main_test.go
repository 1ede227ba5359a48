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
	"github.com/llmbot/llmbot/internal/fakeslack"
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

// TestBenchEditPolicy: the edit policy is the load benchmark's flag, not a setting: neither the
// settings nor --help name it, a wrong one stops the bot before it starts, and the one given is
// the policy the bot runs with.
func TestBenchEditPolicy(t *testing.T) {
	for _, s := range settings() {
		if s.Name == "EDIT_POLICY" {
			t.Error("EDIT_POLICY is a setting of the bot")
		}
	}
	var stdout bytes.Buffer
	if err := run(t.Context(), []string{"llmbot", "--help"}, envFunc(nil), &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); strings.Contains(out, "EDIT_POLICY") || strings.Contains(out, "bench-edit-policy") {
		t.Errorf("--help names the benchmark's edit policy:\n%s", out)
	}
	err := run(t.Context(), []string{"llmbot", "--bench-edit-policy=fastest"}, envFunc(validEnv()), io.Discard, io.Discard)
	if err == nil || !strings.HasPrefix(err.Error(), "--bench-edit-policy: ") {
		t.Errorf("a wrong policy: run = %v, want an error naming --bench-edit-policy", err)
	}
	e := startE2E(t, fakeslack.Config{}, nil, "--bench-edit-policy=every-20-chunks")
	e.waitFor(t, "the starting line with the policy", func() bool {
		return strings.Contains(e.logs.String(), `"edit_policy":"every-20-chunks"`)
	})
}
