package approvals

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmbot/llmbot/internal/ttlcache"
	"github.com/llmbot/llmbot/toolinfo"
)

// Groups reads a Slack user group's members (usergroups.users.list, scope usergroups:read).
type Groups interface {
	Members(ctx context.Context, group string) ([]string, error)
}

// A user group's members are kept briefly (a change in Slack applies within groupTTL), for at most
// groupCacheSize groups; a group of more than maxGroupMembers is refused (no approval).
const (
	groupTTL        = 5 * time.Minute
	groupCacheSize  = 500
	maxGroupMembers = 5000
	groupTimeout    = 5 * time.Second
)

// errNoGroups: approvers name a user group and no Groups reader was wired.
var errNoGroups = errors.New("user groups cannot be read")

// deciders are who may decide a prompt: nil, the asker alone; else the approvers' user ids.
type deciders map[string]bool

// approversOf is the approvers of c (sorted, so that calls with the same approvers share a prompt).
func approversOf(c toolinfo.Call) []string {
	return slices.Sorted(slices.Values(c.Approvers))
}

// groupCalls splits calls by their approvers, in order of first appearance: each group is one
// prompt, decided by its approvers (or the asker for the calls without).
func groupCalls(calls []toolinfo.Call) [][]toolinfo.Call {
	var keys []string
	by := map[string][]toolinfo.Call{}
	for _, c := range calls {
		k := strings.Join(approversOf(c), ",")
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], c)
	}
	out := make([][]toolinfo.Call, len(keys))
	for i, k := range keys {
		out[i] = by[k]
	}
	return out
}

// resolve is who may decide on calls (one group of groupCalls): nil for the asker; else the user
// ids among the approvers and the members of their user groups. A group that cannot be read fails
// the whole: nobody approves, rather than anyone.
func (p *Approvals) resolve(ctx context.Context, calls []toolinfo.Call) (deciders, error) {
	ids := approversOf(calls[0])
	if len(ids) == 0 {
		return nil, nil
	}
	d := deciders{}
	for _, id := range ids {
		if !strings.HasPrefix(id, "S") {
			d[id] = true
			continue
		}
		members, err := p.members(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("user group %s: %w", id, err)
		}
		for _, m := range members {
			d[m] = true
		}
	}
	return d, nil
}

func (p *Approvals) members(ctx context.Context, group string) ([]string, error) {
	if ms, ok := p.groups.Get(group); ok {
		return ms, nil
	}
	if p.opt.Groups == nil {
		return nil, errNoGroups
	}
	gctx, cancel := context.WithTimeout(ctx, groupTimeout)
	defer cancel()
	ms, err := p.opt.Groups.Members(gctx, group)
	switch {
	case err != nil:
		return nil, err
	case len(ms) > maxGroupMembers:
		return nil, fmt.Errorf("%d members, more than %d", len(ms), maxGroupMembers)
	}
	p.groups.Put(group, ms)
	return ms, nil
}

// newGroupCache is the user groups' members, kept briefly.
func newGroupCache() *ttlcache.Cache[[]string] {
	return ttlcache.New[[]string](groupCacheSize, groupTTL)
}

// mentions are the approvers as Slack mentions (people and user groups).
func mentions(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if strings.HasPrefix(id, "S") {
			out[i] = "<!subteam^" + id + ">"
		} else {
			out[i] = "<@" + id + ">"
		}
	}
	return strings.Join(out, ", ")
}
