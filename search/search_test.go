package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmbot/llmbot/toolinfo"
)

const token = "12345.98765.secretactiontoken"

// fakeSlack answers searches with results, or fails with err; it records the queries.
type fakeSlack struct {
	results []Result
	err     error
	queries []Query
}

func (f *fakeSlack) AssistantSearch(_ context.Context, q Query) ([]Result, error) {
	f.queries = append(f.queries, q)
	if f.err != nil {
		return nil, fmt.Errorf("assistant.search.context: %w", f.err)
	}
	return f.results, nil
}

type observed struct {
	outcome string
	results int
}

// newTool returns a tool over f, its clock (settable), what it observed and its logs.
func newTool(f *fakeSlack) (*Tool, *time.Time, *[]observed, *observer.ObservedLogs) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	var obs []observed
	core, logs := observer.New(zap.DebugLevel)
	t := New(f, Options{Now: func() time.Time { return now }, Observe: func(o string, n int) {
		obs = append(obs, observed{o, n})
	}}, zap.New(core))
	return t, &now, &obs, logs
}

func asked(team, tok string) context.Context {
	return toolinfo.WithAsked(context.Background(), toolinfo.Asked{Channel: "C1", Thread: "1.0", Asker: "U1",
		Team: team, ActionToken: tok})
}

func call(t *testing.T, tool *Tool, ctx context.Context, args string) (string, error) {
	t.Helper()
	return tool.Call(ctx, json.RawMessage(args))
}

// A search goes to Slack with the asking event's token, and its results come back to the model each
// with its permalink, author, channel and date, the text clipped; the count is observed.
func TestSearchFormatsResultsWithPermalinks(t *testing.T) {
	f := &fakeSlack{results: []Result{
		{Author: "U2", AuthorName: "alice", Channel: "C9", ChannelName: "releases", TS: "1764662400.000100",
			Text: "We ship v2 on Friday " + strings.Repeat("x", 1000), Permalink: "https://t.slack.com/archives/C9/p1764662400000100"},
		{Author: "B1", Channel: "C8", TS: "", Text: "deploy bot says ok", Bot: true},
	}}
	tool, _, obs, logs := newTool(f)
	out, err := call(t, tool, asked("T1", token), `{"query":"  when do we ship v2 ","limit":50}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.queries) != 1 || f.queries[0].ActionToken != token || f.queries[0].Text != "when do we ship v2" ||
		f.queries[0].Limit != MaxLimit {
		t.Fatalf("queries %+v", f.queries)
	}
	for _, want := range []string{
		"[1] https://t.slack.com/archives/C9/p1764662400000100\nalice (U2) in #releases, 2025-12-02 08:00 UTC\nWe ship v2 on Friday",
		"[2] (no permalink)\nsomeone (B1) [app] in C8, an unknown date\ndeploy bot says ok",
		"Cite those you use as Markdown links",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("result lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "x"); n != DefaultMaxText-len("We ship v2 on Friday ") {
		t.Errorf("text not clipped to %d characters: %d x", DefaultMaxText, n)
	}
	if len(*obs) != 1 || (*obs)[0] != (observed{OutcomeOK, 2}) {
		t.Errorf("observed %+v", *obs)
	}
	for _, e := range logs.All() {
		if strings.Contains(fmt.Sprint(e.ContextMap()), "ship") {
			t.Errorf("the query was logged: %v", e.ContextMap())
		}
	}
	// Days bound the search; a day the model wrote otherwise is its to fix.
	if _, err := call(t, tool, asked("T1", token), `{"query":"x","after":"2026-11-01","before":" 2026-12-01"}`); err != nil {
		t.Fatal(err)
	}
	if q := f.queries[1]; q.After != time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC) || q.Before != time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) {
		t.Errorf("days %v, %v", q.After, q.Before)
	}
	if _, err := call(t, tool, asked("T1", token), `{"query":"x","after":"last week"}`); err == nil || len(f.queries) != 2 {
		t.Errorf("a bad day: %v, %d searches", err, len(f.queries))
	}
	f.queries = f.queries[:1]
	// A default limit, and an empty result said plainly.
	f.results = nil
	out, err = call(t, tool, asked("T1", token), `{"query":"nothing"}`)
	if err != nil || !strings.Contains(out, "found no messages") || f.queries[1].Limit != DefaultLimit {
		t.Errorf("empty search: %q, %v, %+v", out, err, f.queries[1])
	}
}

// The tool is offered only where the asking event carried an action token; called anyway without
// one, it says plainly that it cannot search, without asking Slack. Bad arguments are the model's to fix.
func TestNoTokenNotOfferedAndPlainAnswer(t *testing.T) {
	f := &fakeSlack{}
	tool, _, obs, _ := newTool(f)
	if tool.Offered(context.Background()) || tool.Offered(asked("T1", "")) {
		t.Error("offered without an action token")
	}
	if !tool.Offered(asked("T1", token)) {
		t.Error("not offered with an action token")
	}
	_, err := call(t, tool, asked("T1", ""), `{"query":"x"}`)
	if err == nil || !strings.Contains(err.Error(), "cannot be used here") {
		t.Errorf("no token: %v", err)
	}
	for _, bad := range []string{`{}`, `{"query":" "}`, `[1]`} {
		if _, err := call(t, tool, asked("T1", token), bad); err == nil || !strings.Contains(err.Error(), `"query"`) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if len(f.queries) != 0 {
		t.Errorf("Slack asked: %+v", f.queries)
	}
	if len(*obs) != 1 || (*obs)[0].outcome != OutcomeError {
		t.Errorf("observed %+v", *obs)
	}
}

// A refusal of the workspace is told once (the model is asked to say it) and hides the tool there
// for HideFor: not offered, and a call from an answer that had it offered is answered without Slack;
// another workspace still has it. invalid_action_token hides it for that request only. Neither
// error nor log carries the token.
func TestRefusalsToldOnceAndHidden(t *testing.T) {
	for _, code := range []string{"feature_not_enabled", "assistant_search_context_disabled", "missing_scope", "not_allowed_token_type"} {
		t.Run(code, func(t *testing.T) {
			f := &fakeSlack{err: slack.SlackErrorResponse{Err: code}}
			tool, now, obs, logs := newTool(f)
			_, err := call(t, tool, asked("T1", token), `{"query":"plans"}`)
			if err == nil || !strings.Contains(err.Error(), "Tell the person who asked") || !strings.Contains(err.Error(), "not available here") {
				t.Fatalf("refusal: %v", err)
			}
			if note := toolinfo.NoteOf(err); !strings.HasPrefix(note, "_Slack search is not available here (") {
				t.Errorf("note %q", note)
			}
			if tool.Offered(asked("T1", "another.token")) {
				t.Error("offered again in the workspace that refused")
			}
			if !tool.Offered(asked("T2", "another.token")) {
				t.Error("hidden in another workspace")
			}
			_, err = call(t, tool, asked("T1", "another.token"), `{"query":"plans"}`)
			if err == nil || strings.Contains(err.Error(), "Tell the person") || toolinfo.NoteOf(err) != "" || len(f.queries) != 1 {
				t.Errorf("second call: %v (Slack asked %d times)", err, len(f.queries))
			}
			*now = now.Add(DefaultHideFor)
			if !tool.Offered(asked("T1", "another.token")) {
				t.Error("still hidden after HideFor")
			}
			if (*obs)[0].outcome != OutcomeRefused {
				t.Errorf("observed %+v", *obs)
			}
			if len(logs.FilterMessageSnippet("hidden for a while").All()) != 1 {
				t.Errorf("refusal not logged once: %v", logs.All())
			}
		})
	}
	t.Run("invalid_action_token", func(t *testing.T) {
		f := &fakeSlack{err: slack.SlackErrorResponse{Err: "invalid_action_token"}}
		tool, _, obs, _ := newTool(f)
		_, err := call(t, tool, asked("T1", token), `{"query":"plans"}`)
		if err == nil || !strings.Contains(err.Error(), "not valid") || toolinfo.NoteOf(err) == "" {
			t.Fatalf("invalid token: %v", err)
		}
		if tool.Offered(asked("T1", token)) {
			t.Error("offered again for the same request")
		}
		if !tool.Offered(asked("T1", "the.next.request")) {
			t.Error("hidden for the next request")
		}
		if _, err := call(t, tool, asked("T1", token), `{"query":"again"}`); err == nil || len(f.queries) != 1 {
			t.Errorf("the same token asked Slack again: %v, %d", err, len(f.queries))
		}
		if (*obs)[0].outcome != OutcomeToken {
			t.Errorf("observed %+v", *obs)
		}
	})
}

// A 429 answers "busy" to the model, is not retried, and no call reaches Slack before Retry-After.
func TestRateLimitedIsBusyNotRetried(t *testing.T) {
	f := &fakeSlack{err: &slack.RateLimitedError{RetryAfter: 30 * time.Second}}
	tool, now, obs, _ := newTool(f)
	_, err := call(t, tool, asked("T1", token), `{"query":"plans"}`)
	if err == nil || !strings.Contains(err.Error(), "busy") || !strings.Contains(toolinfo.NoteOf(err), "busy") || len(f.queries) != 1 {
		t.Fatalf("429: %v, %d calls", err, len(f.queries))
	}
	if _, err := call(t, tool, asked("T1", token), `{"query":"plans"}`); err == nil || len(f.queries) != 1 {
		t.Errorf("called Slack again within Retry-After: %v", err)
	}
	if tool.Offered(asked("T1", "next")) {
		t.Error("offered while busy")
	}
	*now = now.Add(31 * time.Second)
	f.err = nil
	if _, err := call(t, tool, asked("T1", token), `{"query":"plans"}`); err != nil || len(f.queries) != 2 {
		t.Errorf("after Retry-After: %v, %d", err, len(f.queries))
	}
	if (*obs)[0].outcome != OutcomeBusy {
		t.Errorf("observed %+v", *obs)
	}
}

// The action token never appears in what the model is told or in the logs, even when Slack's error
// (or a library's) carries it.
func TestTokenNeverInErrorsOrLogs(t *testing.T) {
	f := &fakeSlack{err: slack.SlackErrorResponse{Err: "weird_" + token}}
	tool, _, _, logs := newTool(f)
	_, err := call(t, tool, asked("T1", token), `{"query":"plans"}`)
	if err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("error %v", err)
	}
	for _, e := range logs.All() {
		if strings.Contains(e.Message+fmt.Sprint(e.ContextMap()), token) {
			t.Errorf("token logged: %s %v", e.Message, e.ContextMap())
		}
	}
	f.err = fmt.Errorf("post https://slack.com/api: body action_token=%s: connection reset", token)
	_, err = call(t, tool, asked("T1", token), `{"query":"plans"}`)
	if err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("error %v", err)
	}
	for _, e := range logs.All() {
		if strings.Contains(e.Message+fmt.Sprint(e.ContextMap()), token) {
			t.Errorf("token logged: %s %v", e.Message, e.ContextMap())
		}
	}
	if in := tool.Info(); in.Name != Name || !json.Valid(in.Parameters) || !strings.Contains(in.Description, "Markdown link") {
		t.Errorf("info %+v", in)
	}
}

// memMarks are shared marks in memory (the state package's, on every replica).
type memMarks struct {
	until map[string]time.Time
	now   *time.Time
	err   error
}

func (m *memMarks) Mark(_ context.Context, key string, ttl time.Duration) error {
	if m.err != nil {
		return m.err
	}
	m.until[key] = m.now.Add(ttl)
	return nil
}

func (m *memMarks) Marked(_ context.Context, key string) (bool, error) {
	return m.now.Before(m.until[key]), m.err
}

// A refusal on one replica hides the tool on the others (Options.Marks), for as long, without another
// note; the others still search while the marks cannot be read.
func TestRefusalSharedWithReplicas(t *testing.T) {
	now := time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)
	marks := &memMarks{until: map[string]time.Time{}, now: &now}
	opt := Options{Marks: marks, Now: func() time.Time { return now }}
	fa, fb := &fakeSlack{err: slack.SlackErrorResponse{Err: "feature_not_enabled"}}, &fakeSlack{}
	a, b := New(fa, opt, zap.NewNop()), New(fb, opt, zap.NewNop())
	if !b.Offered(asked("T1", "t.b")) {
		t.Fatal("not offered before any refusal")
	}
	if _, err := call(t, a, asked("T1", "t.a"), `{"query":"x"}`); toolinfo.NoteOf(err) == "" {
		t.Fatalf("refusal: %v", err)
	}
	if b.Offered(asked("T1", "t.b")) || !b.Offered(asked("T2", "t.b")) {
		t.Error("the refusal was not shared for its workspace only")
	}
	_, err := call(t, b, asked("T1", "t.b"), `{"query":"x"}`)
	if err == nil || toolinfo.NoteOf(err) != "" || len(fb.queries) != 0 {
		t.Errorf("the other replica: %v, %d searches", err, len(fb.queries))
	}
	now = now.Add(DefaultHideFor)
	if !b.Offered(asked("T1", "t.b")) {
		t.Error("still hidden after HideFor")
	}
	marks.err = errors.New("redis down")
	if !b.Offered(asked("T1", "t.b")) {
		t.Error("hidden while the marks cannot be read")
	}
}
