package fakeslack_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// slackError is the Slack error code of err ("" for nil; err.Error() when it is no Slack error).
func slackError(err error) string {
	var se slack.SlackErrorResponse
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se):
		return se.Err
	}
	return err.Error()
}

// startStream starts a native stream in reply to parent in C1 with "Hel", appends "lo", and
// returns its ts.
func startStream(t *testing.T, api *slack.Client, parent string) string {
	t.Helper()
	_, ts, err := api.StartStreamContext(ctxFor(t), "C1", slack.MsgOptionTS(parent), slack.MsgOptionMarkdownText("Hel"),
		slack.MsgOptionRecipientUserID("U1"), slack.MsgOptionRecipientTeamID("T1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.AppendStreamContext(ctxFor(t), "C1", ts, slack.MsgOptionMarkdownText("lo")); err != nil {
		t.Fatal(err)
	}
	return ts
}

// A stream its bot abandoned (it crashed mid-answer) shows the text streamed so far; once Slack
// ends it, no stream call works on it any more, and chat.update finishes the message.
func TestAbandonedStreamIsReadableAndCanBeFinished(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	ctx := ctxFor(t)
	parent := srv.PostUserMessage("C1", "U1", "", "<@UBOT> stream please")
	ts := startStream(t, api, parent)

	replies := func() []slack.Message {
		t.Helper()
		msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
			ChannelID: "C1", Timestamp: parent, IncludeAllMetadata: true})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("replies = %+v, %v", msgs, err)
		}
		return msgs
	}
	if m := replies()[1]; m.Timestamp != ts || m.Text != "Hello" || m.Metadata.EventType != "" {
		t.Errorf("streaming message read = %+v, want the text so far and no metadata", m.Msg)
	}
	_, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("taken over", false))
	if got := slackError(err); got != "streaming_state_conflict" {
		t.Errorf("update while streaming: %q, want streaming_state_conflict", got)
	}

	if !srv.ExpireStream("C1", ts) {
		t.Fatal("ExpireStream of a streaming message = false")
	}
	if srv.ExpireStream("C1", ts) {
		t.Error("ExpireStream of an ended stream = true")
	}
	if m, _ := srv.Message("C1", ts); m.Streaming || !m.StreamExpired || m.Text != "Hello" {
		t.Errorf("expired stream = %+v", m)
	}
	_, _, err = api.AppendStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText(" more"))
	if got := slackError(err); got != "message_not_in_streaming_state" {
		t.Errorf("append after the stream ended: %q", got)
	}
	_, _, err = api.StopStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText(" end"))
	if got := slackError(err); got != "message_not_in_streaming_state" {
		t.Errorf("stop after the stream ended: %q", got)
	}

	meta := slack.SlackMetadata{EventType: "llmbot_message", EventPayload: map[string]any{"kind": "answer"}}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("Hello, finished elsewhere", false),
		slack.MsgOptionMetadata(meta)); err != nil {
		t.Fatalf("update of the abandoned stream: %v", err)
	}
	if m := replies()[1]; m.Text != "Hello, finished elsewhere" || m.Metadata.EventType != "llmbot_message" || m.Metadata.EventPayload["kind"] != "answer" {
		t.Errorf("finished message = %+v, metadata %+v", m.Msg, m.Metadata)
	}
}

// Config.StreamExpiry ends a stream that old without a call, Config.StreamIdleExpiry one that
// long without an append: Slack ends streams after about five minutes (which of the two is not
// known).
func TestStreamExpiry(t *testing.T) {
	tests := []struct {
		name       string
		expiry     time.Duration
		idle       time.Duration
		wait       time.Duration
		appendErr  string
		updateErr  string
		expired    bool
		streaming  bool
		textBefore string
	}{
		{"within the expiry", time.Minute, 0, 0, "", "streaming_state_conflict", false, true, "Hello more"},
		{"past the expiry", 50 * time.Millisecond, 0, 100 * time.Millisecond, "message_not_in_streaming_state", "", true, false, "Hello"},
		{"within the idle expiry", 0, time.Minute, 0, "", "streaming_state_conflict", false, true, "Hello more"},
		{"past the idle expiry", 0, 50 * time.Millisecond, 100 * time.Millisecond, "message_not_in_streaming_state", "", true, false, "Hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, fakeslack.Config{StreamExpiry: tt.expiry, StreamIdleExpiry: tt.idle})
			api := newAPI(srv)
			ts := startStream(t, api, srv.PostUserMessage("C1", "U1", "", "<@UBOT> stream please"))
			time.Sleep(tt.wait)
			if m, _ := srv.Message("C1", ts); m.Streaming != tt.streaming || m.StreamExpired != tt.expired {
				t.Errorf("message %+v, want streaming %v, expired %v", m, tt.streaming, tt.expired)
			}
			_, _, err := api.AppendStreamContext(ctxFor(t), "C1", ts, slack.MsgOptionMarkdownText(" more"))
			if got := slackError(err); got != tt.appendErr {
				t.Errorf("append: %q, want %q", got, tt.appendErr)
			}
			if m, _ := srv.Message("C1", ts); m.Text != tt.textBefore {
				t.Errorf("text %q, want %q", m.Text, tt.textBefore)
			}
			_, _, _, err = api.UpdateMessageContext(ctxFor(t), "C1", ts, slack.MsgOptionText("done", false))
			if got := slackError(err); got != tt.updateErr {
				t.Errorf("update: %q, want %q", got, tt.updateErr)
			}
		})
	}
}

// conversations.replies and conversations.history return the metadata the bot stored
// (chat.postMessage, chat.stopStream) when asked with include_all_metadata.
func TestRepliesAndHistoryReturnMetadata(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	ctx := ctxFor(t)
	_, parent, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("top", false),
		slack.MsgOptionMetadata(slack.SlackMetadata{EventType: "llmbot_note", EventPayload: map[string]any{"kind": "note"}}))
	if err != nil {
		t.Fatal(err)
	}
	ts := startStream(t, api, parent)
	if _, _, err := api.StopStreamContext(ctx, "C1", ts, slack.MsgOptionMetadata(
		slack.SlackMetadata{EventType: "llmbot_message", EventPayload: map[string]any{"kind": "answer"}})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		include     bool
		wantReplies []string // the messages' metadata event types, oldest first
		wantHistory []string
	}{
		{"with include_all_metadata", true, []string{"llmbot_note", "llmbot_message"}, []string{"llmbot_note"}},
		{"without", false, []string{"", ""}, []string{""}},
	}
	types := func(msgs []slack.Message) []string {
		var out []string
		for _, m := range msgs {
			out = append(out, m.Metadata.EventType)
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			replies, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{
				ChannelID: "C1", Timestamp: parent, IncludeAllMetadata: tt.include})
			if err != nil {
				t.Fatal(err)
			}
			if got := types(replies); !slices.Equal(got, tt.wantReplies) {
				t.Errorf("replies metadata %q, want %q", got, tt.wantReplies)
			}
			history, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{
				ChannelID: "C1", IncludeAllMetadata: tt.include})
			if err != nil {
				t.Fatal(err)
			}
			if got := types(history.Messages); !slices.Equal(got, tt.wantHistory) {
				t.Errorf("history metadata %q, want %q", got, tt.wantHistory)
			}
		})
	}
}

// chat.appendStream's chunks: task_update chunks update the message's task cards (each as its last
// update left it), markdown_text chunks append text, and a chunk Slack would refuse is refused.
func TestAppendStreamChunks(t *testing.T) {
	task := func(id, title string, status slack.TaskCardStatus) slack.TaskUpdateChunk {
		c := slack.NewTaskUpdateChunk(id, title)
		c.Status = status
		return c
	}
	tests := []struct {
		name   string
		chunks []slack.StreamChunk
		err    string
		text   string
		tasks  []fakeslack.Task
	}{
		{"a task, then its update", []slack.StreamChunk{task("a", "Reading", "in_progress"), task("a", "Reading", "complete")}, "", "Hello",
			[]fakeslack.Task{{ID: "a", Title: "Reading", Status: "complete", Updates: 2}}},
		{"text and a task", []slack.StreamChunk{slack.NewMarkdownTextChunk(" world"), task("b", "Thinking", "in_progress")}, "", "Hello world",
			[]fakeslack.Task{{ID: "b", Title: "Thinking", Status: "in_progress", Updates: 1}}},
		{"an unknown status", []slack.StreamChunk{task("c", "Odd", "finished")}, "invalid_chunks", "Hello", nil},
		{"a task without a title", []slack.StreamChunk{task("d", "", "complete")}, "invalid_chunks", "Hello", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, fakeslack.Config{})
			api := newAPI(srv)
			ts := startStream(t, api, srv.PostUserMessage("C1", "U1", "", "<@UBOT> stream please"))
			_, _, err := api.AppendStreamContext(ctxFor(t), "C1", ts, slack.MsgOptionChunks(tt.chunks...))
			if got := slackError(err); got != tt.err {
				t.Errorf("append: %q, want %q", got, tt.err)
			}
			m, _ := srv.Message("C1", ts)
			if m.Text != tt.text || fmt.Sprint(m.Tasks) != fmt.Sprint(tt.tasks) {
				t.Errorf("message text %q tasks %+v, want %q %+v", m.Text, m.Tasks, tt.text, tt.tasks)
			}
		})
	}
}
