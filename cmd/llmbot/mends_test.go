package main

import "testing"

// TestEmptyQuotedFreeTextIsEmpty: SYSTEM_PROMPT and ACCESS_DENIED_TEXT may be quoted text, but a
// value of just two quotes (the usual way to unset a setting in an .env file, which docker
// --env-file and Kubernetes pass on as written) must not become the system prompt or the refusal:
// the setting is unset, or the quotes are reported.
func TestEmptyQuotedFreeTextIsEmpty(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"SYSTEM_PROMPT", `""`},
		{"ACCESS_DENIED_TEXT", `''`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := validEnv()
			env[tc.name] = tc.value
			cfg, problems := loadConfig(envFunc(env))
			got := cfg.SystemPrompt
			if tc.name == "ACCESS_DENIED_TEXT" {
				got = cfg.AccessDeniedText
			}
			if got != "" && len(problems) == 0 {
				t.Errorf("%s=%s: the setting is %q (not the built-in default) and nothing is reported", tc.name, tc.value, got)
			}
		})
	}
}
