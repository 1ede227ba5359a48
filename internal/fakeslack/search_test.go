package fakeslack_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

// A person's event carries an action token slack-go reads; assistant.search.context takes only the
// tokens the fake issued, and answers from the corpus in slack-go's shapes (public channels unless
// asked, the limit kept); it refuses without the scope, and with what FailNext and RateLimitNext say.
func TestAssistantSearchContext(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	srv.SetSearchCorpus(
		fakeslack.SearchMessage{Channel: "C9", ChannelName: "releases", User: "U2", UserName: "alice", Text: "v2 ships Friday"},
		fakeslack.SearchMessage{Channel: "C9", ChannelName: "releases", User: "U3", UserName: "bob", Text: "v2 notes are up"},
		fakeslack.SearchMessage{Channel: "G1", User: "U4", Text: "v2 secret", Private: true},
		fakeslack.SearchMessage{Channel: "C8", User: "U5", Text: "lunch"},
	)
	ts := srv.PostUserMessage("C1", "U1", "", "<@UBOT> hi")
	var ev slackevents.AppMentionEvent
	raw, _ := json.Marshal(srv.EventOf("C1", ts, "app_mention"))
	if err := json.Unmarshal(raw, &ev); err != nil || ev.ActionToken == "" || !slices.Contains(srv.ActionTokens(), ev.ActionToken) {
		t.Fatalf("event's action token %q (%v), issued %v", ev.ActionToken, err, srv.ActionTokens())
	}
	api, ctx := newAPI(srv), context.Background()
	q := slack.AssistantSearchContextParameters{Query: "ships notes secret", ActionToken: ev.ActionToken,
		ContentTypes: []string{"messages"}, Limit: 5}
	r, err := api.SearchAssistantContextContext(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results.Messages) != 2 {
		t.Fatalf("%d results: %+v", len(r.Results.Messages), r.Results.Messages)
	}
	m := r.Results.Messages[0]
	if m.AuthorUserID != "U2" || m.AuthorName != "alice" || m.ChannelName != "releases" || m.Content != "v2 ships Friday" ||
		m.Permalink == "" || m.MessageTS == "" {
		t.Errorf("result %+v", m)
	}
	q.ChannelTypes, q.Limit = []string{"public_channel", "private_channel"}, 1
	if r, err := api.SearchAssistantContextContext(ctx, q); err != nil || len(r.Results.Messages) != 1 {
		t.Errorf("limit 1: %v, %+v", err, r)
	}
	q.Limit = 0
	if r, _ := api.SearchAssistantContextContext(ctx, q); len(r.Results.Messages) != 3 {
		t.Errorf("with private channels: %+v", r.Results.Messages)
	}
	q.After = 1764000001 // the corpus's made-up times are an hour apart from 1764000000.000001 on
	if r, _ := api.SearchAssistantContextContext(ctx, q); len(r.Results.Messages) != 2 {
		t.Errorf("after the first: %+v", r.Results.Messages)
	}
	q.After = 0
	for _, tc := range []struct {
		name, token, want string
		setup             func()
	}{
		{"unknown token", "1.2.made-up", "invalid_action_token", func() {}},
		{"no token", "", "invalid_action_token", func() {}},
		{"refused", ev.ActionToken, "feature_not_enabled", func() { srv.FailNext("assistant.search.context", "feature_not_enabled") }},
	} {
		tc.setup()
		q.ActionToken = tc.token
		var se slack.SlackErrorResponse
		if _, err := api.SearchAssistantContextContext(ctx, q); !errors.As(err, &se) || se.Err != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	q.ActionToken = ev.ActionToken
	srv.RateLimitNext("assistant.search.context", time.Second)
	var rl *slack.RateLimitedError
	if _, err := api.SearchAssistantContextContext(ctx, q); !errors.As(err, &rl) {
		t.Errorf("rate limited: %v", err)
	}
	noScope := newServer(t, fakeslack.Config{Scopes: []string{"chat:write"}})
	ts = noScope.PostUserMessage("C1", "U1", "", "<@UBOT> hi")
	q.ActionToken = noScope.ActionTokens()[0]
	var se slack.SlackErrorResponse
	if _, err := newAPI(noScope).SearchAssistantContextContext(ctx, q); !errors.As(err, &se) || se.Err != "missing_scope" {
		t.Errorf("without the scope: %v", err)
	}
}
