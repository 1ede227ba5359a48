package fakeslack

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Slack's Real-time Search API (assistant.search.context), as far as its reference and slack-go
// v0.35 say. What the fake does that no source confirms is marked UNVERIFIED:
//   - which events carry action_token: the fake puts one on every message and app_mention event
//     of a person (not of an app), top level; Slack documents it "as received in a message event"
//     and slack-go reads it top level and under assistant_thread (UNVERIFIED: on which events,
//     and whether both are ever set);
//   - a token's lifetime: the fake's never expire (UNVERIFIED: Slack's are short-lived);
//   - a call without action_token, or with one the fake did not issue: invalid_action_token
//     (the first is UNVERIFIED; a bot token may be refused otherwise);
//   - limit above 20 or an empty query: invalid_arguments (UNVERIFIED: the reference gives 20 as
//     the maximum; Slack may clamp instead);
//   - the response: results.messages with author_user_id, author_name, team_id, channel_id,
//     channel_name, message_ts, content, is_author_bot and permalink (slack-go's
//     AssistantSearchContextMessage; author_name and channel_name UNVERIFIED as always present);
//   - the matching: any query word of three letters or more in a message's text, in corpus order
//     (Slack's is semantic; only the shape matters here);
//   - after and before (UNIX seconds) keep the messages strictly between them (UNVERIFIED: whether
//     Slack's bounds are inclusive);
//   - missing_scope without search:read.public among Config.Scopes.
// Refusals (feature_not_enabled, assistant_search_context_disabled, ...) come from FailNext, a
// 429 from RateLimitNext("assistant.search.context", ...): the method has a special rate limit.

// SearchMessage is one message the fake's search finds (SetSearchCorpus).
type SearchMessage struct {
	Channel, ChannelName string
	User, UserName       string
	TS                   string // "": one is made up
	Text                 string
	Bot                  bool
	Private              bool // in a private channel: found only with channel_types private_channel
}

// searchState is what the fake's search keeps.
type searchState struct {
	corpus []SearchMessage
	tokens map[string]string // action tokens issued with events -> the user whose event it was
	order  []string          // the tokens, in the order issued
}

// SetSearchCorpus makes msgs what assistant.search.context searches.
func (s *Server) SetSearchCorpus(msgs ...SearchMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.search.corpus = slices.Clone(msgs)
	for i := range s.search.corpus {
		if s.search.corpus[i].TS == "" {
			s.search.corpus[i].TS = fmt.Sprintf("%d.%06d", 1764000000+i*3600, i+1)
		}
	}
}

// ActionTokens returns the action tokens the fake issued with events, in order.
func (s *Server) ActionTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.search.order)
}

// issueActionTokenLocked returns a new action token for an event of user.
func (s *Server) issueActionTokenLocked(user string) string {
	if s.search.tokens == nil {
		s.search.tokens = map[string]string{}
	}
	s.seq++
	token := fmt.Sprintf("%d.%d.at%08x", 12345+s.seq, 98765, s.seq*2654435761%(1<<32))
	s.search.tokens[token] = user
	s.search.order = append(s.search.order, token)
	return token
}

// assistantSearchContext answers assistant.search.context from the corpus.
func (s *Server) assistantSearchContext(p params, now time.Time) (map[string]any, apiError) {
	if !slices.Contains(s.cfg.Scopes, "search:read.public") {
		return nil, "missing_scope"
	}
	if _, ok := s.search.tokens[p.Get("action_token")]; !ok {
		return nil, "invalid_action_token"
	}
	query := strings.ToLower(strings.TrimSpace(p.Get("query")))
	limit := 20
	if l := p.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 20 {
			return nil, "invalid_arguments"
		}
		limit = n
	}
	if query == "" {
		return nil, "invalid_arguments"
	}
	types := strings.Split(p.Get("content_types"), ",")
	if p.Get("content_types") != "" && !slices.Contains(types, "messages") {
		return map[string]any{"results": map[string]any{}}, ""
	}
	private := slices.Contains(strings.Split(p.Get("channel_types"), ","), "private_channel")
	after, _ := strconv.ParseFloat(cmp.Or(p.Get("after"), "0"), 64)
	before, _ := strconv.ParseFloat(cmp.Or(p.Get("before"), "1e12"), 64)
	var out []map[string]any
	for _, m := range s.search.corpus {
		if len(out) == limit {
			break
		}
		ts, _ := strconv.ParseFloat(m.TS, 64)
		if (m.Private && !private) || !matches(strings.ToLower(m.Text), query) || ts <= after || ts >= before {
			continue
		}
		out = append(out, s.searchResult(m))
	}
	return map[string]any{"results": map[string]any{"messages": out},
		"response_metadata": map[string]any{"next_cursor": ""}}, ""
}

// matches reports whether any word of query (three letters or more) is in text.
func matches(text, query string) bool {
	for _, w := range strings.FieldsFunc(query, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') }) {
		if len(w) >= 3 && strings.Contains(text, w) {
			return true
		}
	}
	return false
}

func (s *Server) searchResult(m SearchMessage) map[string]any {
	domain := strings.ReplaceAll(strings.ToLower(s.cfg.TeamName), " ", "-")
	return map[string]any{
		"author_user_id": m.User, "author_name": m.UserName, "team_id": s.cfg.TeamID,
		"channel_id": m.Channel, "channel_name": m.ChannelName, "message_ts": m.TS, "content": m.Text,
		"is_author_bot": m.Bot,
		"permalink":     fmt.Sprintf("https://%s.slack.com/archives/%s/p%s", domain, m.Channel, strings.ReplaceAll(m.TS, ".", "")),
	}
}
