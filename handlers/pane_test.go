package handlers

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/slack-go/slack"
	"go.uber.org/zap"

	"github.com/llmbot/llmbot/gateway/gatewaytest"
	"github.com/llmbot/llmbot/llm/llmtest"
	"github.com/llmbot/llmbot/pane"
	"github.com/llmbot/llmbot/route"
)

// statusPane is the agent pane's Slack calls (pane.Assistant), recording statuses and answering
// them with err.
type statusPane struct {
	mu       sync.Mutex
	statuses []string // channel/thread of each SetStatus call
	texts    []string // the status of each call
	err      error
}

func (p *statusPane) SetSuggestedPrompts(context.Context, string, string, []pane.Prompt) error {
	return nil
}
func (p *statusPane) SetTitle(context.Context, string, string, string) error { return nil }

func (p *statusPane) SetStatus(_ context.Context, channel, threadTS, status string, _ []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statuses = append(p.statuses, channel+"/"+threadTS)
	p.texts = append(p.texts, status)
	return p.err
}

// TestThinkingStatus: answers in threads show "is thinking…" (a top-level DM answer has no thread
// to show it under); once Slack refuses a status, the next answers do not ask again.
func TestThinkingStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"shown for every answer in a thread", nil, []string{"C1/1700000000.000001", "C2/1700000000.000002"}},
		{"refused: asked once", slack.SlackErrorResponse{Err: "not_allowed"}, []string{"C1/1700000000.000001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fs := gatewaytest.NewSlack()
				slackPane := &statusPane{err: tc.err}
				opt := testOptions()
				opt.Pane = pane.New(slackPane, nil, nil)
				r := NewReplies(fs, fs, fs, fs, &llmtest.Chat{Steps: llmtest.Deltas(llmtest.Words("Four.", 1), 0)}, zap.NewNop(), opt)
				for _, q := range []route.ReplyRequest{
					{Channel: "C1", ChannelType: "channel", User: "U1", TS: "1700000000.000001", ThreadTS: "1700000000.000001", Text: "<@UBOT> hi"},
					{Channel: "C2", ChannelType: "channel", User: "U1", TS: "1700000000.000002", ThreadTS: "1700000000.000002", Text: "<@UBOT> hi"},
					{Channel: "D1", ChannelType: "im", User: "U1", TS: "1700000000.000003", Text: "hi"},
				} {
					mustNoErr(t, r.Reply(t.Context(), q))
				}
				if got := slackPane.statuses; !slices.Equal(got, tc.want) {
					t.Errorf("statuses %v; want %v", got, tc.want)
				}
			})
		})
	}
}

// TestToolStatusLine: while a tool call runs in an answer written by editing, the thread's status
// line names it, and it is taken down when the call ends (the answer's edits would not clear it);
// a native stream shows task cards instead and sets no tool status.
func TestToolStatusLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode ReplyMode
		want []string
	}{
		{"edit", ModeEdit, []string{"is thinking…", "is running weather…", ""}},
		{"native stream", ModeStream, []string{"is thinking…"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				slackPane := &statusPane{}
				tt := newToolTest(t, weatherTools(true, sunny), callsThenAnswer(1, weatherCall), nil)
				opt := tt.r.opt
				opt.Mode, opt.Pane = tc.mode, pane.New(slackPane, nil, nil)
				tt.r = NewReplies(tt.slack, tt.slack, tt.slack, tt.slack, tt.chat, zap.NewNop(), opt)
				mustNoErr(t, tt.r.Reply(t.Context(), testRequest()))
				if !slices.Equal(slackPane.texts, tc.want) {
					t.Errorf("statuses %q, want %q", slackPane.texts, tc.want)
				}
			})
		})
	}
}
