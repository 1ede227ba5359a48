package main

import "testing"

// TestEmptyQuotedFreeTextIsEmpty: with text:"true" the quotes around SYSTEM_PROMPT and
// ACCESS_DENIED_TEXT are kept as written. An .env that "unsets" them the usual way
// (SYSTEM_PROMPT="" or ”), read by docker --env-file or a Kubernetes value, now gives the model
// the system prompt `""` instead of the built-in one (no bot name, date or Markdown rule) and tells
// refused people `”`, without a word at start-up; before, the quotes were reported and dropped.
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
