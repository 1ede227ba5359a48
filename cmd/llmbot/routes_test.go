package main

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/ask"
	"github.com/llmbot/llmbot/bot"
	"github.com/llmbot/llmbot/feedback"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/imagine"
	"github.com/llmbot/llmbot/pane"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/summarize"
	"github.com/llmbot/llmbot/usage"
)

// The route table is every message, command, button, shortcut, modal and event the bot serves,
// each once: its rows (kind, name, the feature access rules and metrics see) are those of
// testdata/routes.txt, and route.Table takes them all (no row without a name or a handler, none
// twice). A row lost or renamed changes what Slack can reach, so it shows here.
func TestRouteTable(t *testing.T) {
	log := zap.NewNop()
	replies := handlers.NewReplies(nil, nil, nil, nil, nil, log, handlers.ReplyOptions{})
	u := useCases{
		bot: &bot.Bot{},
		answering: answering{
			replies:   replies,
			summarize: summarize.New(nil, nil, nil, nil, replies, log, summarize.Options{}),
			approvals: approvals.New(nil, nil, log),
			pane:      pane.New(nil, nil, log),
		},
		imagine:  imagine.New(nil, nil, nil, log, imagine.Options{}),
		feedback: feedback.New(nil, nil, nil, log, feedback.Options{}),
		usage:    usage.New(nil, nil, log, usage.Options{}),
		ask:      ask.New(nil, nil, log, ask.Options{}),
	}
	rows := u.routes()
	if err := route.NewTable().Add(rows...); err != nil {
		t.Fatalf("the table refused a row: %v", err)
	}
	var got bytes.Buffer
	for _, r := range rows {
		fmt.Fprintf(&got, "%-8s %-26s %s\n", r.Kind, r.Name, cmp.Or(r.Feature, "-"))
	}
	golden := filepath.Join("testdata", "routes.txt")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("the route table differs from %s (run with -update):\n%s", golden, got.String())
	}
}
