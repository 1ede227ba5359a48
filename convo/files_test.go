package convo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/internal/golden"
	"github.com/llmbot/llmbot/llm"
)

// dumpParts shows a Result with its messages' parts, an image as its URL's first bytes.
func dumpParts(r Result) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "omitted=%d trigger_cut=%t files_left_out=%d foreign=%q\n", r.Omitted, r.TriggerCut, r.FilesLeftOut, r.Foreign)
	for _, m := range r.Messages {
		fmt.Fprintf(&sb, "\n--- %s\n%s\n", m.Role, m.Content)
		for _, p := range m.Parts {
			switch p.Type {
			case llm.PartImage:
				fmt.Fprintf(&sb, "+ image %.30s… (alt %q)\n", p.ImageURL, p.Alt)
			default:
				fmt.Fprintf(&sb, "+ text %q\n", p.Text)
			}
		}
	}
	return sb.String()
}

func fileMsg(ts, user, text string, files ...slack.File) slack.Message {
	m := slack.Message{Msg: slack.Msg{Timestamp: ts, User: user, Text: text, Files: files}}
	if len(files) > 0 {
		m.SubType = slack.MsgSubTypeFileShare
	}
	return m
}

func TestBuildFiles(t *testing.T) {
	shot := slack.File{ID: "F1", Name: "shot.png", Mimetype: "image/png", PrettyType: "PNG"}
	old := slack.File{ID: "F0", Name: "before.png", Mimetype: "image/png", PrettyType: "PNG"}
	logf := slack.File{ID: "F2", Name: "build.log", Mimetype: "text/plain", PrettyType: "Plain Text"}
	pdf := slack.File{ID: "F3", Name: "spec.pdf", Mimetype: "application/pdf", PrettyType: "PDF"}
	unread := slack.File{ID: "F4", Name: "notes.txt", Mimetype: "text/plain"}
	thread := []slack.Message{
		fileMsg("100.000100", "U01ALICE", "before the change", old),
		fileMsg("100.000200", "U01ALICE", "the log and the spec", logf, pdf),
		fileMsg("100.000300", "U01ALICE", "<@U0BOT> what changed?", shot, unread),
	}
	files := map[string]FileContent{
		"F0": {Image: "data:image/png;base64,AAAA-old", Tokens: 765},
		"F1": {Image: "data:image/png;base64,BBBB-new", Tokens: 765},
		"F2": {Text: "error: disk full"},
		"F3": {Note: "PDFs are not read"},
	}
	for _, tc := range []struct {
		golden string
		budget int
	}{
		{"build_files_read", 0},             // everything fits
		{"build_files_budget_newest", 1500}, // the newest picture fits, the older one does not
		{"build_files_budget_none", 600},    // not even the trigger's picture
	} {
		t.Run(tc.golden, func(t *testing.T) {
			opt := testOptions()
			opt.Files, opt.Budget = files, tc.budget
			golden.Check(t, tc.golden, dumpParts(Build(thread, thread[2], testNames, opt)))
		})
	}
}

// TestBuildWithoutFiles: without Options.Files a file is a note, and the request is the same
// string content as before files were read.
func TestBuildWithoutFiles(t *testing.T) {
	m := fileMsg("100.000300", "U01ALICE", "<@U0BOT> what is this?", slack.File{ID: "F1", Name: "shot.png", Mimetype: "image/png", PrettyType: "PNG"})
	r := Build(nil, m, testNames, testOptions())
	last := r.Messages[len(r.Messages)-1]
	if len(last.Parts) != 0 || !strings.Contains(last.Content, `[shared an image: "shot.png" (PNG)]`) {
		t.Errorf("trigger = %+v, want the note only", last)
	}
}
