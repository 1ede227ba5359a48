// Package access decides who may use the bot and where: allow and deny lists of channels and
// users (Policy), a per-user daily /imagine quota (Quota), and per-channel system prompt and
// model overrides read from a YAML file (Overrides). Guard applies the policy and the quota to
// the bot's replies and /imagine, telling refused people privately and briefly why.
//
// Everything here is in memory and per process: with several replicas, each keeps its own quota
// counts (see Quota).
package access

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Reason says why a request was refused. It is a metric label value and a log field, never
// shown to people (they see Decision.Message).
type Reason string

// The reasons of a refusal.
const (
	ReasonUserDenied        Reason = "user_denied"         // the user is on the deny list
	ReasonChannelDenied     Reason = "channel_denied"      // the channel is on the deny list (or dm is, for a DM)
	ReasonUserNotAllowed    Reason = "user_not_allowed"    // there is a user allow list and the user is not on it
	ReasonChannelNotAllowed Reason = "channel_not_allowed" // there is a channel allow list and the channel is not on it
	ReasonQuota             Reason = "quota"               // the user's daily /imagine quota is used up
)

// DefaultRefusal is what a refused person is told when Rules.Refusal is empty.
const DefaultRefusal = "Sorry, I'm not enabled for you here. If you need me, ask the people who run me in this workspace."

// DM, in a channel list, stands for every one-to-one direct message with the bot (channel IDs
// D...). A group DM (mpim) is listed by its ID, like a channel: it has people other than the
// asker in it, so "no DMs" should not silently cover it, and it cannot be told from a private
// channel by its ID (both G...).
const DM = "dm"

// Decision is the answer to "may this person use the bot here?".
type Decision struct {
	Allowed bool
	Reason  Reason // "" when allowed
	// Message is what to tell the person, privately (ephemeral), when refused: short, and
	// never a public scolding. "" when allowed.
	Message string
}

// allow is the Decision for an allowed request.
var allow = Decision{Allowed: true}

// Rules are the lists a Policy is made from, as IDs (channel IDs C..., G..., D..., or DM; user
// IDs U... or W...). Empty allow lists allow everyone; deny lists win over allow lists.
type Rules struct {
	AllowChannels, DenyChannels []string
	AllowUsers, DenyUsers       []string
	Refusal                     string // what refused people are told; "": DefaultRefusal
}

// Policy decides from allow and deny lists whether a person may use the bot in a channel. It
// applies the same way to mentions, DMs and /imagine. The zero value is not usable; a Policy
// from NewPolicy is immutable and safe for concurrent use.
type Policy struct {
	allowChannels, denyChannels set
	allowUsers, denyUsers       set
	refusal                     string
}

type set map[string]bool

func toSet(ids []string) set {
	if len(ids) == 0 {
		return nil
	}
	s := make(set, len(ids))
	for _, id := range ids {
		s[id] = true
	}
	return s
}

// NewPolicy returns the Policy of r, or one error listing every ID that is not shaped like a
// Slack ID of its kind, with where to find the right one.
func NewPolicy(r Rules) (*Policy, error) {
	var problems []string
	check := func(list string, ids []string, valid func(string) bool, want string) {
		for _, id := range ids {
			if !valid(id) {
				problems = append(problems, fmt.Sprintf("%s: %q is not %s", list, id, want))
			}
		}
	}
	const channelWant = "a channel ID like C0123ABCD (channel details > About, at the bottom) or dm"
	const userWant = "a user ID like U0123ABCD (profile > ⋮ > Copy member ID)"
	check("ALLOW_CHANNELS", r.AllowChannels, validChannelOrDM, channelWant)
	check("DENY_CHANNELS", r.DenyChannels, validChannelOrDM, channelWant)
	check("ALLOW_USERS", r.AllowUsers, ValidUserID, userWant)
	check("DENY_USERS", r.DenyUsers, ValidUserID, userWant)
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	refusal := strings.TrimSpace(r.Refusal)
	if refusal == "" {
		refusal = DefaultRefusal
	}
	lower := func(ids []string) []string {
		out := slices.Clone(ids)
		for i, id := range out {
			if strings.EqualFold(id, DM) {
				out[i] = DM
			}
		}
		return out
	}
	return &Policy{
		allowChannels: toSet(lower(r.AllowChannels)),
		denyChannels:  toSet(lower(r.DenyChannels)),
		allowUsers:    toSet(r.AllowUsers),
		denyUsers:     toSet(r.DenyUsers),
		refusal:       refusal,
	}, nil
}

// Open reports whether the policy allows everyone everywhere (no lists).
func (p *Policy) Open() bool {
	return p.allowChannels == nil && p.denyChannels == nil && p.allowUsers == nil && p.denyUsers == nil
}

// Check decides whether user may use the bot in channel. Deny lists win; an empty allow list
// allows everyone. A DM (channel D...) matches its own ID and DM in the channel lists, so
// ALLOW_CHANNELS=C0123ABCD,dm allows one channel and DMs, and DENY_CHANNELS=dm turns DMs off.

func (p *Policy) Check(channel, user string) Decision {
	dm := IsDM(channel)
	inChannels := func(s set) bool { return s[channel] || dm && s[DM] }
	switch {
	case p.denyUsers[user]:
		return p.refuse(ReasonUserDenied)
	case inChannels(p.denyChannels):
		return p.refuse(ReasonChannelDenied)
	case p.allowChannels != nil && !inChannels(p.allowChannels):
		return p.refuse(ReasonChannelNotAllowed)
	case p.allowUsers != nil && !p.allowUsers[user]:
		return p.refuse(ReasonUserNotAllowed)
	}
	return allow
}

func (p *Policy) refuse(r Reason) Decision {
	return Decision{Reason: r, Message: p.refusal}
}

// IsDM reports whether channel is a direct message with the bot (an ID starting with D).
func IsDM(channel string) bool { return strings.HasPrefix(channel, "D") }

// ParseIDs splits a comma-separated list of IDs ("C0123ABCD, C0456EFGH"), trimming spaces and
// dropping empty entries. It does not validate: NewPolicy does.
func ParseIDs(s string) []string {
	var ids []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			ids = append(ids, f)
		}
	}
	return ids
}

// ValidChannelID reports whether id is shaped like a Slack conversation ID: C (channel), G
// (private channel, group DM) or D (DM), then upper-case letters and digits.
func ValidChannelID(id string) bool { return validID(id, "CGD") }

// ValidUserID reports whether id is shaped like a Slack user ID: U or W (Enterprise Grid), then
// upper-case letters and digits.
func ValidUserID(id string) bool { return validID(id, "UW") }

func validChannelOrDM(id string) bool { return strings.EqualFold(id, DM) || ValidChannelID(id) }

const maxIDLen = 24

func validID(id, first string) bool {
	if len(id) < 2 || len(id) > maxIDLen || !strings.ContainsRune(first, rune(id[0])) {
		return false
	}
	for _, r := range id[1:] {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
