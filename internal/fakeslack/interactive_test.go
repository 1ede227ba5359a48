package fakeslack_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// buttonMessage is a message with a section and a Stop button, as slack-go sends it.
func buttonMessage(text, value string) slack.MsgOption {
	btn := slack.NewButtonBlockElement("stop", value, slack.NewTextBlockObject(slack.PlainTextType, "Stop", false, false))
	btn.Style = slack.StyleDanger
	return slack.MsgOptionBlocks(
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, text, false, false), nil, nil),
		slack.NewActionBlock("acts", btn))
}

func TestClickDeliversBlockActions(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	parent := srv.PostUserMessage("C1", "U1", "", "<@UBOT> hi")
	_, ts, err := api.PostMessageContext(ctxFor(t), "C1", slack.MsgOptionText("Hello", false), slack.MsgOptionTS(parent),
		buttonMessage("Hello", `{"ts":"1.2"}`))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := srv.Message("C1", ts)
	if b := m.Buttons(); len(b) != 1 || b[0].ActionID != "stop" || b[0].Text != "Stop" || b[0].Style != "danger" || m.SectionText() != "Hello" {
		t.Fatalf("buttons %+v, section %q", b, m.SectionText())
	}
	if _, err := srv.Click("C1", ts, "U2", "regenerate"); !errors.Is(err, fakeslack.ErrNoButton) {
		t.Errorf("click on a button the message does not show: %v, want ErrNoButton", err)
	}

	sm := runSocketMode(t, srv)
	nextEvent(t, sm, socketmode.EventTypeEventsAPI) // the mention
	id, err := srv.Click("C1", ts, "U2", "stop")
	if err != nil {
		t.Fatal(err)
	}
	evt := nextEvent(t, sm, socketmode.EventTypeInteractive)
	if evt.Request.EnvelopeID != id {
		t.Errorf("envelope %q, want %q", evt.Request.EnvelopeID, id)
	}
	cb := evt.Data.(slack.InteractionCallback)
	acts := cb.ActionCallback.BlockActions
	if cb.Type != slack.InteractionTypeBlockActions || cb.User.ID != "U2" || cb.Channel.ID != "C1" || cb.Team.ID == "" ||
		cb.Container.MessageTs != ts || cb.Container.ThreadTs != parent || cb.Message.Timestamp != ts ||
		len(acts) != 1 || acts[0].ActionID != "stop" || acts[0].Value != `{"ts":"1.2"}` || acts[0].BlockID != "acts" ||
		!strings.Contains(cb.ResponseURL, "/response/") {
		t.Errorf("callback %+v", cb)
	}
	if err := sm.AckCtx(ctxFor(t), id, nil); err != nil {
		t.Fatal(err)
	}
	// The click's response_url takes an ephemeral answer, like a slash command's.
	if _, _, err := api.PostMessageContext(ctxFor(t), "", slack.MsgOptionResponseURL(cb.ResponseURL, slack.ResponseTypeEphemeral),
		slack.MsgOptionText("only you", false)); err != nil {
		t.Fatal(err)
	}
	if p := srv.ResponseURLPosts(); len(p) != 1 || p[0].User != "U2" || p[0].Text != "only you" {
		t.Errorf("response_url posts %+v", p)
	}
}

func TestBlockLimits(t *testing.T) {
	api := newAPI(newServer(t, fakeslack.Config{}))
	tests := []struct {
		name string
		opt  slack.MsgOption
	}{
		{"section over 3000 characters", buttonMessage(strings.Repeat("é", 3001), "v")},
		{"button value over 2000 characters", buttonMessage("text", strings.Repeat("v", 2001))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := api.PostMessageContext(ctxFor(t), "C1", slack.MsgOptionText("fallback", false), tt.opt)
			var se slack.SlackErrorResponse
			if !errors.As(err, &se) || se.Err != "invalid_blocks" {
				t.Errorf("post = %v, want invalid_blocks", err)
			}
		})
	}
	// At the limits: accepted.
	if _, _, err := api.PostMessageContext(ctxFor(t), "C1", slack.MsgOptionText("fallback", false),
		buttonMessage(strings.Repeat("é", 3000), strings.Repeat("v", 2000))); err != nil {
		t.Errorf("post at the limits: %v", err)
	}
}
