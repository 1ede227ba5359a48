package bot

import (
	"context"
	"fmt"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/gateway"
)

// ApprovalSlack is what the tool approvals do in Slack besides the answer's writes: read the user
// groups named as approvers (usergroups.users.list, scope usergroups:read), show a prompt to one
// person (chat.postEphemeral with its buttons) and replace the one they clicked (its response_url).
// It is approvals.Groups and approvals.Ephemerals.
type ApprovalSlack struct {
	c   *slack.Client
	api *SlackAPI
}

// NewApprovalSlack works through c, and api's response_url posts.
func NewApprovalSlack(c *slack.Client, api *SlackAPI) ApprovalSlack {
	return ApprovalSlack{c: c, api: api}
}

// Members are the user ids in group.
func (s ApprovalSlack) Members(ctx context.Context, group string) ([]string, error) {
	return s.c.GetUserGroupMembersContext(ctx, group)
}

// PostEphemeral shows m (its text and buttons; no metadata: an ephemeral keeps none) to user alone
// in channel, in the thread threadTS unless "".
func (s ApprovalSlack) PostEphemeral(ctx context.Context, channel, user, threadTS string, m gateway.Msg) error {
	m.Mark.Kind = ""
	opts := msgOptions(m)
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	if _, err := s.c.PostEphemeralContext(ctx, channel, user, opts...); err != nil {
		return fmt.Errorf("chat.postEphemeral: %w", err)
	}
	return nil
}

// RespondPrivate answers through a click's response_url (SlackAPI.RespondPrivate).
func (s ApprovalSlack) RespondPrivate(ctx context.Context, responseURL string, m gateway.Private) error {
	return s.api.RespondPrivate(ctx, responseURL, m)
}
