package bot

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/pane"
	"github.com/llmbot/llmbot/search"
)

// Compile-time checks: SlackAssistant is what the agent pane and the answers' sessions need.
var (
	_ pane.Assistant    = (*SlackAssistant)(nil)
	_ handlers.Sessions = (*SlackAssistant)(nil)
	_ search.Slack      = (*SlackAssistant)(nil)
)

// SlackAssistant adapts the Web API of Slack's assistant and agent surfaces (assistant.threads.*,
// agents.sessions.setStatus) to the agent pane's and the answers' interfaces. It is built with the
// adapter, over the same client (SlackAPI.Assistant); like it, it retries nothing and keeps
// slack-go's error types reachable.
type SlackAssistant struct {
	c *slack.Client
}

// SetSuggestedPrompts shows prompts at the top of the DM channel (threadTS "": the agent pane)
// or of a thread (assistant.threads.setSuggestedPrompts).
func (a *SlackAssistant) SetSuggestedPrompts(ctx context.Context, channel, threadTS string, prompts []pane.Prompt) error {
	ps := make([]slack.AssistantThreadsPrompt, len(prompts))
	for i, p := range prompts {
		ps[i] = slack.AssistantThreadsPrompt{Title: p.Title, Message: p.Message}
	}
	err := a.c.SetAssistantThreadsSuggestedPromptsContext(ctx, slack.AssistantThreadsSetSuggestedPromptsParameters{
		ChannelID: channel, ThreadTS: threadTS, Prompts: ps})
	if err != nil {
		return fmt.Errorf("assistant.threads.setSuggestedPrompts: %w", err)
	}
	return nil
}

// SetTitle titles a DM thread (assistant.threads.setTitle).
func (a *SlackAssistant) SetTitle(ctx context.Context, channel, threadTS, title string) error {
	err := a.c.SetAssistantThreadsTitleContext(ctx, slack.AssistantThreadsSetTitleParameters{
		ChannelID: channel, ThreadTS: threadTS, Title: title})
	if err != nil {
		return fmt.Errorf("assistant.threads.setTitle: %w", err)
	}
	return nil
}

// SetStatus shows status under a DM thread with loading messages Slack rotates
// (assistant.threads.setStatus; Slack clears it when the bot replies).
func (a *SlackAssistant) SetStatus(ctx context.Context, channel, threadTS, status string, loading []string) error {
	err := a.c.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
		ChannelID: channel, ThreadTS: threadTS, Status: status, LoadingMessages: loading})
	if err != nil {
		return fmt.Errorf("assistant.threads.setStatus: %w", err)
	}
	return nil
}

// SetSessionStatus moves the agent session of the thread threadTS in channel to status
// (agents.sessions.setStatus; it creates the session when there is none).
func (a *SlackAssistant) SetSessionStatus(ctx context.Context, channel, threadTS, status string) error {
	_, err := a.c.SetAgentSessionStatusContext(ctx, slack.AgentSessionSetStatusParameters{Status: status,
		ChannelID: channel, ThreadTS: threadTS})
	if err != nil {
		return fmt.Errorf("agents.sessions.setStatus: %w", err)
	}
	return nil
}

// AssistantSearch searches messages with Slack's Real-time Search API (assistant.search.context) as
// the person whose event carried q.ActionToken: public channels only (channel_types public_channel,
// what a bot token's search:read.public reaches), so that what is found may be shown in any thread.
// The token goes in the request's body, never in an error.
func (a *SlackAssistant) AssistantSearch(ctx context.Context, q search.Query) ([]search.Result, error) {
	p := slack.AssistantSearchContextParameters{Query: q.Text, ActionToken: q.ActionToken,
		ContentTypes: []string{"messages"}, ChannelTypes: []string{"public_channel"}, Limit: q.Limit}
	if !q.After.IsZero() {
		p.After = q.After.Unix()
	}
	if !q.Before.IsZero() {
		p.Before = q.Before.Unix()
	}
	r, err := a.c.SearchAssistantContextContext(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("assistant.search.context: %w", err)
	}
	out := make([]search.Result, len(r.Results.Messages))
	for i, m := range r.Results.Messages {
		out[i] = search.Result{Author: m.AuthorUserID, AuthorName: m.AuthorName, Channel: m.ChannelID,
			ChannelName: m.ChannelName, TS: m.MessageTS, Text: m.Content, Permalink: m.Permalink, Bot: m.IsAuthorBot}
	}
	return out, nil
}
