// Command llmbot is a Slack bot (Socket Mode) that answers mentions, DMs and thread follow-ups
// with any OpenAI-compatible chat model, streaming the answer into Slack, and makes pictures with
// /imagine. It is configured by environment variables: run it with --help for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/doctor"
	"github.com/llmbot/llmbot/internal/nodump"
	"github.com/llmbot/llmbot/pace"
	"github.com/llmbot/llmbot/state"
	"github.com/llmbot/llmbot/tools"
)

// version is set at build time (the Dockerfile: -ldflags "-X main.version=$VERSION"); when it is
// not, versionString says what the binary's build information knows.
var version string

// versionString is the version of this binary: the one set at build time, else the module's
// version and, for a build from a git checkout, its commit ("(devel) 1a2b3c4d5e6f-dirty").
func versionString() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value[:min(12, len(s.Value))]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	return v
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // the first signal starts a graceful stop; a second one ends the process
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, doctor.ErrReported) { // doctor's checklist already said it
			fmt.Fprintln(os.Stderr, "llmbot:", err)
		}
		os.Exit(1)
	}
}

// run is the whole program: flags, configuration, logger, wiring, and the bot until ctx ends.
// It returns nil after a clean shutdown. Tests call it as main does, with their own environment.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// First: the programs the bot starts (stdio MCP servers) run as its user and must not read
	// its environment, which holds the tokens, through /proc.
	if err := nodump.Set(); err != nil {
		return err
	}
	fs := flag.NewFlagSet("llmbot", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a wrong flag is said once, by the error returned below
	markdown := fs.Bool("help-markdown", false, "print the settings table in Markdown and exit")
	showVersion := fs.Bool("version", false, "print the version and exit")
	help := fs.Bool("help", false, "print the settings and commands and exit")
	fs.BoolVar(help, "h", false, "the same as --help")
	// The load benchmark (cmd/llmbot-bench) compares the bot's pacing with two baselines on the
	// same binary. A flag, not a setting, and left out of --help: the baselines are there to be
	// measured against, not to be deployed.
	benchPolicy := fs.String("bench-edit-policy", string(pace.PolicyFair), "the edit policy, for the load benchmark")
	fs.Usage = func() {} // the help is printed on --help only; a wrong flag gets the error alone
	if len(args) > 0 {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w (run with --help)", err)
	}
	policy, err := pace.ParsePolicy(*benchPolicy)
	if err != nil {
		return fmt.Errorf("--bench-edit-policy: %w", err)
	}
	if *help {
		if err := printHelp(stdout); err != nil {
			return err
		}
		printCommands(stdout)
		return nil
	}
	if *markdown {
		return printHelpMarkdown(stdout)
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, "llmbot", versionString())
		return err
	}
	if fs.Arg(0) == "doctor" {
		cfg, problems := loadConfig()
		mcp, err := tools.LoadConfig(cfg.MCPConfig, os.Getenv)
		if err != nil {
			problems = append(problems, err.Error())
		}
		in := doctorInput(cfg, append(problems, cfg.problems()...))
		in.MCPServers = mcpServers(mcp)
		if len(in.Problems) == 0 { // the schedules are read with the bot token, from the state the settings name
			in.Schedules = doctorSchedules(cfg)
		}
		return doctor.Run(ctx, fs.Args()[1:], in, stdout, stderr)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unknown argument %q (run with --help)", fs.Arg(0))
	}

	cfg, problems := loadConfig()
	mcp, err := tools.LoadConfig(cfg.MCPConfig, os.Getenv) // its ${VAR}s come from the environment
	if err != nil {
		problems = append(problems, err.Error())
	}
	if err := problemsError(append(problems, cfg.problems()...)); err != nil {
		return err
	}
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	defer func() { _ = log.Sync() }()
	return start(ctx, cfg, mcp, policy, log)
}

// doctorInput is what `llmbot doctor` checks: the settings as the bot would run with them, and
// the problems a normal start would refuse to start with.
func doctorInput(cfg Config, problems []string) doctor.Input {
	_, headersErr := parseHeaders(cfg.LLMHeaders)
	overrides, _ := access.LoadOverrides(cfg.ChannelConfig) // a bad file is one of problems
	return doctor.Input{
		Problems:        tieredProblems(problems),
		SlackBotToken:   cfg.SlackBotToken,
		SlackAppToken:   cfg.SlackAppToken,
		SlackAPIURL:     cfg.SlackAPIURL,
		SlackHTTPClient: slackHTTPClient(),
		LLM:             cfg.llmConfig(),
		BadHeaders:      headersErr != nil,
		ChannelModels:   overrides.Models(),
		ReplyMode:       cfg.ReplyMode,
		AgentView:       cfg.AgentView,
		FollowUps:       cfg.FollowUps,
		Vision:          cfg.Vision,
		Search:          cfg.SlackSearch,
		RedisHost:       hostOf(cfg.RedisURL),
		ThreadCacheTTL:  cfg.ThreadCacheTTL,
		PingRedis: func(ctx context.Context) error {
			r, err := state.NewRedis(ctx, cfg.RedisURL, "llmbot-doctor:", "doctor", zap.NewNop())
			if err != nil {
				return err
			}
			return r.Close()
		},
		Controls: cfg.doctorControls(),
	}
}

// printCommands is the subcommand part of `llmbot --help`.
func printCommands(w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	fmt.Fprintln(w, "  llmbot doctor   check the settings, both Slack tokens, the granted scopes, Socket Mode and the")
	fmt.Fprintln(w, "                  models end to end; prints a checklist with the fix for each failure")
	fmt.Fprintln(w, "                  (docker run --rm --env-file .env IMAGE doctor; kubectl exec deploy/llmbot -- llmbot doctor)")
	fmt.Fprintln(w, "  llmbot --version")
	fmt.Fprintln(w, "                  print the version (also in the \"starting\" log line)")
}
