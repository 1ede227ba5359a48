package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestQuotedValuesAreExplained: the README's `docker run --env-file .env` passes values
// verbatim, quotes included (docker does not strip them, unlike a shell or docker compose), so a
// .env written as SLACK_BOT_TOKEN="xoxb-..." gives the bot a token that starts with a quote. The
// message says so, once, rather than that the token "does not start with xoxb- (is it the other
// token?)", which would send a newcomer to copy again a token that was right.
func TestQuotedValuesAreExplained(t *testing.T) {
	env := validEnv()
	env["SLACK_BOT_TOKEN"] = `"xoxb-1-secret"`
	env["SLACK_APP_TOKEN"] = `'xapp-1-secret'`
	setEnv(t, env)
	err := run(context.Background(), []string{"llmbot"}, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("run accepted quoted tokens without a word")
	}
	for _, name := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"} {
		line := ""
		for _, l := range strings.Split(err.Error(), "\n") {
			if strings.Contains(l, name) {
				line = l
			}
		}
		if !strings.Contains(strings.ToLower(line), "quote") {
			t.Errorf("%s in quotes: message %q does not mention the quotes", name, line)
		}
	}
	if strings.Contains(err.Error(), "does not start with") {
		t.Errorf("the quotes are reported twice:\n%v", err)
	}
}

// TestQuotedFreeTextIsKept: free text may begin and end with a quotation of its own (a system
// prompt that opens with a motto and ends with a sign-off in quotes; a denial text quoting the
// channel). That is not the quoting of docker --env-file: the bot must start, with the text as
// written, not refuse to start and cut the quotes off.
func TestQuotedFreeTextIsKept(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		setting     func(Config) string // the setting name configures
	}{
		{"SYSTEM_PROMPT", `"Be brief, be kind" is our rule. When you are unsure, say "I don't know"`, systemPrompt},
		{"ACCESS_DENIED_TEXT", `'Sorry' is all I can say here: ask in '#it-help'`, accessDeniedText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := validEnv()
			env[tc.name] = tc.value
			setEnv(t, env)
			cfg, problems := loadConfig()
			if len(problems) > 0 {
				t.Errorf("%s=%s: problems %q, want none", tc.name, tc.value, problems)
			}
			if got := tc.setting(cfg); got != tc.value {
				t.Errorf("%s = %q, want %q as written", tc.name, got, tc.value)
			}
		})
	}
}

// TestEmptyQuotedFreeTextIsEmpty: SYSTEM_PROMPT and ACCESS_DENIED_TEXT may be quoted text, but a
// value of just two quotes (the usual way to unset a setting in an .env file, which docker
// --env-file and Kubernetes pass on as written) must not become the system prompt or the refusal:
// the setting is unset, or the quotes are reported.
func TestEmptyQuotedFreeTextIsEmpty(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		setting     func(Config) string // the setting name configures
	}{
		{"SYSTEM_PROMPT", `""`, systemPrompt},
		{"ACCESS_DENIED_TEXT", `''`, accessDeniedText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := validEnv()
			env[tc.name] = tc.value
			setEnv(t, env)
			cfg, problems := loadConfig()
			if got := tc.setting(cfg); got != "" && len(problems) == 0 {
				t.Errorf("%s=%s: the setting is %q (not the built-in default) and nothing is reported", tc.name, tc.value, got)
			}
		})
	}
}

// systemPrompt and accessDeniedText read the free-text settings of a Config.
func systemPrompt(c Config) string     { return c.SystemPrompt }
func accessDeniedText(c Config) string { return c.AccessDeniedText }
