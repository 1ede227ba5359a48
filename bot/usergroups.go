package bot

import (
	"context"

	"github.com/slack-go/slack"
)

// SlackGroups reads Slack's user groups (usergroups.users.list, scope usergroups:read): who may
// approve a tool's calls when its approvers name a group (approvals.Groups).
type SlackGroups struct{ c *slack.Client }

// NewSlackGroups reads user groups through c.
func NewSlackGroups(c *slack.Client) SlackGroups { return SlackGroups{c: c} }

// Members are the user ids in group.
func (g SlackGroups) Members(ctx context.Context, group string) ([]string, error) {
	return g.c.GetUserGroupMembersContext(ctx, group)
}
