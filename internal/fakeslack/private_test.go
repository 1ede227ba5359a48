package fakeslack_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// A response_url post with blocks is an ephemeral message with buttons its person can press: the
// click's payload says is_ephemeral and carries no message, as Slack's does, and the click's own
// response_url replaces or deletes that message.
func TestResponseURLBlocksAreClickableEphemeralMessages(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	sm := runSocketMode(t, srv)
	nextEvent(t, sm, socketmode.EventTypeHello) // connected: a command sent before may fail
	respURL := srv.SlashCommand("C1", "U1", "/summarize", "")
	ack := nextEvent(t, sm, socketmode.EventTypeSlashCommand)
	if err := sm.AckCtx(ctxFor(t), ack.Request.EnvelopeID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostMessageContext(ctxFor(t), "", slack.MsgOptionResponseURL(respURL, slack.ResponseTypeEphemeral),
		slack.MsgOptionText("The summary", false), buttonMessage("The summary", "id-1")); err != nil {
		t.Fatal(err)
	}
	posts := srv.ResponseURLPosts()
	if len(posts) != 1 || posts[0].TS == "" || posts[0].Text != "The summary" || len(posts[0].Buttons()) != 1 || posts[0].Buttons()[0].Value != "id-1" {
		t.Fatalf("response_url posts %+v: want one ephemeral message with the button", posts)
	}
	ts := posts[0].TS
	if m, ok := srv.Private("C1", ts, "U1"); !ok || m.SectionText() != "The summary" {
		t.Errorf("U1 sees %+v, %v", m, ok)
	}
	if _, ok := srv.Private("C1", ts, "U2"); ok {
		t.Error("someone else sees the ephemeral message")
	}
	if _, err := srv.Click("C1", ts, "U2", "stop"); !errors.Is(err, fakeslack.ErrNoButton) {
		t.Errorf("click by someone who does not see the message: %v, want ErrNoButton", err)
	}

	id, err := srv.Click("C1", ts, "U1", "stop")
	if err != nil {
		t.Fatal(err)
	}
	evt := nextEvent(t, sm, socketmode.EventTypeInteractive)
	cb := evt.Data.(slack.InteractionCallback)
	if evt.Request.EnvelopeID != id || !cb.Container.IsEphemeral || cb.Container.MessageTs != ts || cb.Channel.ID != "C1" ||
		cb.Message.Timestamp != "" || len(cb.ActionCallback.BlockActions) != 1 || cb.ActionCallback.BlockActions[0].Value != "id-1" {
		t.Errorf("callback %+v: want an ephemeral container and no message", cb)
	}
	var raw map[string]any
	if err := json.Unmarshal(evt.Request.Payload, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["message"]; ok {
		t.Error("a click on an ephemeral message carries the message")
	}
	if err := sm.AckCtx(ctxFor(t), id, nil); err != nil {
		t.Fatal(err)
	}

	// The click's response_url replaces the clicked message, then deletes it.
	if _, _, err := api.PostMessageContext(ctxFor(t), "", slack.MsgOptionReplaceOriginal(cb.ResponseURL),
		slack.MsgOptionResponseURL(cb.ResponseURL, slack.ResponseTypeEphemeral), slack.MsgOptionText("Posted.", false)); err != nil {
		t.Fatal(err)
	}
	if m, ok := srv.Private("C1", ts, "U1"); !ok || m.Text != "Posted." || len(m.Buttons()) != 0 {
		t.Errorf("after replace_original U1 sees %+v, %v: want the new text without buttons", m, ok)
	}
	if _, _, err := api.PostMessageContext(ctxFor(t), "", slack.MsgOptionDeleteOriginal(cb.ResponseURL)); err != nil {
		t.Fatal(err)
	}
	if m, ok := srv.Private("C1", ts, "U1"); ok {
		t.Errorf("after delete_original U1 sees %+v", m)
	}
	if n := len(srv.Messages("C1")); n != 0 {
		t.Errorf("%d channel messages, want none (all of it was private)", n)
	}
}

func TestResponseURLRefusals(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	for _, tc := range []struct {
		name, body, err string
	}{
		{"no text nor blocks", `{"response_type":"ephemeral"}`, "no_text"},
		{"a section over 3000 characters", `{"text":"t","blocks":[{"type":"section","text":{"type":"mrkdwn","text":"` +
			strings.Repeat("x", 3001) + `"}}]}`, "invalid_blocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			respURL := srv.SlashCommand("C1", "U1", "/summarize", "")
			resp, err := http.Post(respURL, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var answer struct {
				OK    bool
				Error string
			}
			if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusBadRequest || answer.Error != tc.err {
				t.Errorf("answer %d %+v (%v), want 400 %s", resp.StatusCode, answer, err, tc.err)
			}
		})
	}
}

// A message shortcut arrives as Slack sends it: a message_action payload with the callback_id, the
// message and a response_url.
func TestMessageShortcut(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	parent := srv.PostUserMessage("C1", "U1", "", "a long discussion")
	reply := srv.PostUserMessage("C1", "U2", parent, "with replies")
	if _, err := srv.MessageShortcut("C1", "1.000001", "U2", "llmbot_summarize_thread"); !errors.Is(err, fakeslack.ErrNoMessage) {
		t.Errorf("shortcut on no message: %v, want ErrNoMessage", err)
	}
	sm := runSocketMode(t, srv)
	nextEvent(t, sm, socketmode.EventTypeEventsAPI)
	nextEvent(t, sm, socketmode.EventTypeEventsAPI)
	id, err := srv.MessageShortcut("C1", reply, "U3", "llmbot_summarize_thread")
	if err != nil {
		t.Fatal(err)
	}
	evt := nextEvent(t, sm, socketmode.EventTypeInteractive)
	cb := evt.Data.(slack.InteractionCallback)
	if evt.Request.EnvelopeID != id || cb.Type != slack.InteractionTypeMessageAction || cb.CallbackID != "llmbot_summarize_thread" ||
		cb.User.ID != "U3" || cb.Channel.ID != "C1" || cb.Message.Timestamp != reply || cb.Message.ThreadTimestamp != parent ||
		cb.Message.Text != "with replies" || cb.MessageTs != reply || !strings.Contains(cb.ResponseURL, "/response/") || cb.TriggerID == "" {
		t.Errorf("callback %+v", cb)
	}
}

// A message posted with a Time is history from before: its ts is of that time, it takes its
// place in conversations.history, and no event is sent for it.
func TestPastMessages(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	now := srv.PostUserMessage("C1", "U1", "", "today")
	day := 24 * time.Hour
	old := srv.Post(fakeslack.UserMessage{Channel: "C1", User: "U2", Text: "two days ago", Time: time.Now().Add(-2 * day)})
	srv.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", ThreadTS: old, Text: "a reply then", Time: time.Now().Add(-2*day + time.Minute)})
	if n := len(srv.Envelopes()); n != 1 {
		t.Errorf("%d envelopes, want 1 (today's message only)", n)
	}
	texts := func(since time.Time) []string {
		t.Helper()
		p := &slack.GetConversationHistoryParameters{ChannelID: "C1"}
		if !since.IsZero() {
			us := since.UnixMicro()
			p.Oldest = fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
		}
		h, err := api.GetConversationHistoryContext(ctxFor(t), p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range h.Messages {
			out = append(out, m.Text)
		}
		return out
	}
	if got := strings.Join(texts(time.Time{}), "|"); got != "today|two days ago" {
		t.Errorf("history %q, want the newest first", got)
	}
	if got := strings.Join(texts(time.Now().Add(-day)), "|"); got != "today" {
		t.Errorf("history of the last day %q", got)
	}
	if m, _ := srv.Message("C1", old); m.ThreadTS != old || old >= now {
		t.Errorf("past message %+v (ts %s, today's %s): want a thread parent older than today's", m, old, now)
	}
}
