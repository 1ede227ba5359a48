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
	"slices"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/doctor"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

func TestDoctorHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	setEnv(t, nil)
	if err := run(context.Background(), []string{"llmbot", "doctor", "--help"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "Usage: llmbot doctor") {
		t.Errorf("doctor --help:\n%s", stdout.String())
	}
	stdout.Reset()
	setEnv(t, nil)
	if err := run(context.Background(), []string{"llmbot", "--help"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "llmbot doctor") {
		t.Errorf("--help does not mention the doctor:\n%s", stdout.String())
	}
	setEnv(t, nil)
	if err := run(context.Background(), []string{"llmbot", "doctor", "extra"}, &stdout, &stderr); err == nil {
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
	setEnv(t, env)
	startErr := run(t.Context(), []string{"llmbot"}, io.Discard, io.Discard)
	if startErr == nil {
		t.Fatal("a start with these settings did not stop")
	}
	var stdout bytes.Buffer
	setEnv(t, env)
	err := run(t.Context(), []string{"llmbot", "doctor"}, &stdout, io.Discard)
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
	setEnv(t, nil)
	if err := run(t.Context(), []string{"llmbot", "--help"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); strings.Contains(out, "EDIT_POLICY") || strings.Contains(out, "bench-edit-policy") {
		t.Errorf("--help names the benchmark's edit policy:\n%s", out)
	}
	setEnv(t, validEnv())
	err := run(t.Context(), []string{"llmbot", "--bench-edit-policy=fastest"}, io.Discard, io.Discard)
	if err == nil || !strings.HasPrefix(err.Error(), "--bench-edit-policy: ") {
		t.Errorf("a wrong policy: run = %v, want an error naming --bench-edit-policy", err)
	}
	e := startE2E(t, fakeslack.Config{}, nil, "--bench-edit-policy=every-20-chunks")
	e.waitFor(t, "the starting line with the policy", func() bool {
		return strings.Contains(e.logs.String(), `"edit_policy":"every-20-chunks"`)
	})
}

// TestDoctorGroupsProblemsByTier: doctor lists the settings' problems under the headings of their
// settings' tiers, in the tiers' order, whatever order the checks found them in (MCP_CONFIG's is
// found first, LOG_FORMAT's before MAX_QUEUED_REPLIES').
func TestDoctorGroupsProblemsByTier(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // the model checks are refused at once; without tokens nothing goes to Slack
	env := map[string]string{
		"OPENAI_BASE_URL":    dead.URL + "/v1",
		"REPLY_MODE":         "fast",
		"MCP_CONFIG":         filepath.Join(t.TempDir(), "missing.yaml"),
		"LOG_FORMAT":         "xml",
		"MAX_QUEUED_REPLIES": "-5",
	}
	var stdout bytes.Buffer
	setEnv(t, env)
	if err := run(t.Context(), []string{"llmbot", "doctor"}, &stdout, io.Discard); !errors.Is(err, doctor.ErrReported) {
		t.Errorf("doctor = %v, want its checklist's failure", err)
	}
	headingOf := map[string]string{} // the beginning of each problem line: the heading above it
	var headings []string
	heading := ""
	for _, line := range strings.Split(stdout.String(), "\n") {
		if h, ok := strings.CutSuffix(strings.TrimPrefix(line, "    "), ":"); ok && !strings.Contains(h, " ") && h != "" {
			heading = h
			headings = append(headings, h)
		}
		if p, ok := strings.CutPrefix(line, "    - "); ok {
			headingOf[p] = heading
		}
	}
	for _, tc := range []struct{ problem, heading string }{
		{"SLACK_BOT_TOKEN is missing", "Essentials"},
		{"SLACK_APP_TOKEN is missing", "Essentials"},
		{`REPLY_MODE: "fast"`, "Features"},
		{"MCP_CONFIG", "Features"},
		{"MAX_QUEUED_REPLIES: -5", "Limits"},
		{`LOG_FORMAT: "xml"`, "Operations"},
	} {
		found := false
		for p, h := range headingOf {
			if strings.HasPrefix(p, tc.problem) {
				found = true
				if h != tc.heading {
					t.Errorf("%s... is under %q, want %q", tc.problem, h, tc.heading)
				}
			}
		}
		if !found {
			t.Errorf("doctor does not list %s...:\n%s", tc.problem, stdout.String())
		}
	}
	if want := []string{"Essentials", "Features", "Limits", "Operations"}; !slices.Equal(headings, want) {
		t.Errorf("headings %q, want %q:\n%s", headings, want, stdout.String())
	}
}

// TestHelpGroupsByTier: --help and --help-markdown list each setting under the heading of its
// tier, the tiers in order.
func TestHelpGroupsByTier(t *testing.T) {
	for _, tc := range []struct {
		flag     string
		headings []string // as they appear, in order
	}{
		{"--help", []string{"\nEssentials: ", "\nFeatures: ", "\nLimits: ", "\nOperations: "}},
		{"--help-markdown", []string{"### Essentials\n", "\n### Features\n", "\n### Limits\n", "\n### Operations\n"}},
	} {
		var stdout bytes.Buffer
		setEnv(t, nil)
		if err := run(t.Context(), []string{"llmbot", tc.flag}, &stdout, io.Discard); err != nil {
			t.Fatal(err)
		}
		out := stdout.String()
		at := make([]int, len(tc.headings))
		for i, h := range tc.headings {
			at[i] = strings.Index(out, h)
		}
		if !slices.IsSorted(at) || at[0] < 0 {
			t.Fatalf("%s: headings at %v, want all, in order:\n%s", tc.flag, at, out)
		}
		for _, row := range []struct {
			name string
			tier int // index in headings
		}{
			{"SLACK_BOT_TOKEN", 0}, {"CHAT_MODEL", 0},
			{"REPLY_MODE", 1}, {"ALLOW_CHANNELS", 1}, {"MCP_CONFIG", 1},
			{"MAX_CONCURRENT_REPLIES", 2}, {"IMAGINE_DAILY_QUOTA", 2}, {"LLM_IDLE_TIMEOUT", 2},
			{"REDIS_URL", 3}, {"LOG_LEVEL", 3}, {"SHUTDOWN_GRACE", 3},
		} {
			i := strings.Index(out, "\n  "+row.name+" ")
			if tc.flag == "--help-markdown" {
				i = strings.Index(out, "\n| `"+row.name+"` |")
			}
			end := len(out)
			if row.tier+1 < len(at) {
				end = at[row.tier+1]
			}
			if i < at[row.tier] || i > end {
				t.Errorf("%s: %s is not under %q", tc.flag, row.name, strings.TrimSpace(tc.headings[row.tier]))
			}
		}
	}
}

// TestEverySettingHasATier: each setting names one of the tiers, so that it is listed.
func TestEverySettingHasATier(t *testing.T) {
	for _, s := range settings() {
		if !slices.ContainsFunc(tiers, func(t tier) bool { return t.Name == s.Tier }) {
			t.Errorf("%s: tier %q is none of the tiers", s.Name, s.Tier)
		}
	}
}
