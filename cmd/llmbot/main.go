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
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // the first signal starts a graceful stop; a second one ends the process
	err := run(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errReported) { // doctor's checklist already said it
			fmt.Fprintln(os.Stderr, "llmbot:", err)
		}
		os.Exit(1)
	}
}

// run is the whole program: flags, configuration, logger, wiring, and the bot until ctx ends.
// It returns nil after a clean shutdown. Tests call it as main does, with their own environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("llmbot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	markdown := fs.Bool("help-markdown", false, "print the settings table in Markdown and exit")
	fs.Usage = func() { _ = printHelp(stdout); printCommands(stdout) }
	if len(args) > 0 {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *markdown {
		return printHelpMarkdown(stdout)
	}
	if fs.Arg(0) == "doctor" {
		return doctor(ctx, fs.Args()[1:], getenv, stdout, stderr)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unknown argument %q (run with --help)", fs.Arg(0))
	}

	cfg, problems := loadConfig(getenv)
	if err := problemsError(append(problems, cfg.problems()...)); err != nil {
		return err
	}
	log := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	defer func() { _ = log.Sync() }()
	return start(ctx, cfg, log)
}
