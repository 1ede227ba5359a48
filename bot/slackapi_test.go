package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/internal/fakeslack"
)

func newAPI(t *testing.T, cfg fakeslack.Config) (*SlackAPI, *fakeslack.Server, context.Context) {
	t.Helper()
	fs := newFakeSlack(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return NewSlackAPI(newClient(fs), nil, 0), fs, ctx
}

func TestIdentify(t *testing.T) {
	tests := []struct {
		name string
		cfg  fakeslack.Config
		want Identity
	}{
		{"a workspace", fakeslack.Config{},
			Identity{UserID: "UBOT", BotID: "BBOT", TeamID: "T1", TeamName: "Test Team", Name: "llmbot"}},
		{"a workspace of an Enterprise Grid org", fakeslack.Config{EnterpriseID: "E1"},
			Identity{UserID: "UBOT", BotID: "BBOT", TeamID: "T1", TeamName: "Test Team", EnterpriseID: "E1", Name: "llmbot"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api, _, ctx := newAPI(t, tt.cfg)
			id, err := api.Identify(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if id != tt.want {
				t.Errorf("Identify = %+v, want %+v", id, tt.want)
			}
		})
	}
}

// users.info as the access rules read it: the person's team, enterprise and guest flags.
func TestUserInfo(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	fs.AddUser(fakeslack.User{ID: "U0OUT", Name: "out", Team: "T0OTHER", Enterprise: "E9"})
	fs.AddUser(fakeslack.User{ID: "U0GUEST", Name: "guest", UltraGuest: true})
	tests := []struct {
		user                   string
		team, enterprise       string
		restricted, ultra, ext bool
	}{
		{"U0OUT", "T0OTHER", "E9", false, false, false},
		{"U0GUEST", "T1", "", true, true, false},
		{"U0ALICE", "T1", "", false, false, false},
	}
	for _, tt := range tests {
		u, err := api.UserInfo(ctx, tt.user)
		if err != nil {
			t.Fatalf("UserInfo(%s): %v", tt.user, err)
		}
		got := [...]any{u.TeamID, u.Enterprise.EnterpriseID, u.IsRestricted, u.IsUltraRestricted, u.IsStranger}
		if want := [...]any{tt.team, tt.enterprise, tt.restricted, tt.ultra, tt.ext}; got != want {
			t.Errorf("UserInfo(%s) = team, enterprise, restricted, ultra, stranger %v, want %v", tt.user, got, want)
		}
	}
}

func TestIdentifyBadToken(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	api := NewSlackAPI(slack.New("xoxb-wrong-secret", slack.OptionAPIURL(fs.URL())), nil, 0)
	_, err := api.Identify(context.Background())
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "invalid_auth" {
		t.Fatalf("Identify with a bad token: %v, want invalid_auth as slack.SlackErrorResponse", err)
	}
	if bytes.Contains([]byte(err.Error()), []byte("wrong-secret")) {
		t.Errorf("error %q contains the token", err)
	}
}

func TestRepliesPaginatesAndKeepsMetadata(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{PageLimit: 2})
	parent := fs.PostUserMessage("C1", "U1", "", "<@UBOT> question")
	for i := range 4 {
		fs.PostUserMessage("C1", "U2", parent, fmt.Sprintf("reply %d", i))
	}
	mark := convo.Mark{Kind: convo.MarkAnswer, Note: "cut off"}
	if _, err := api.Post(ctx, "C1", parent, gateway.Msg{Text: "answer", Mark: mark}); err != nil {
		t.Fatal(err)
	}
	msgs, _, err := api.Replies(ctx, "C1", parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 6 {
		t.Fatalf("Replies returned %d messages, want 6", len(msgs))
	}
	if msgs[0].Timestamp != parent || msgs[1].Text != "reply 0" || msgs[4].Text != "reply 3" {
		t.Errorf("messages out of order: %q, %q, %q", msgs[0].Text, msgs[1].Text, msgs[4].Text)
	}
	got, ok := convo.ReadMark(msgs[5])
	if !ok || got != mark {
		t.Errorf("mark read back = %+v, %v; want %+v", got, ok, mark)
	}
	if _, ok := convo.ReadMark(msgs[1]); ok {
		t.Errorf("a user's message has a mark")
	}
	calls := fs.CallsTo("conversations.replies")
	if len(calls) != 3 {
		t.Errorf("conversations.replies called %d times, want 3 pages", len(calls))
	}
	for _, c := range calls {
		if c.Params.Get("include_all_metadata") != "1" {
			t.Errorf("conversations.replies without include_all_metadata: %v", c.Params)
		}
	}
}

// TestRepliesKeepsParentBeginningAndNewest: a long thread is read as its parent, the beginning
// of its replies (within half the byte budget) and its newest (within the budget); what it left out
// in between is counted, and the bytes held stay near the bound while all of the thread's pages
// are read.
func TestRepliesKeepsParentBeginningAndNewest(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{PageLimit: 100})
	const budget = 100_000
	api := NewSlackAPI(newClient(fs), nil, budget)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	parent := fs.PostUserMessage("C1", "U1", "", "<@UBOT> question")
	const replies = 1000
	for i := range replies {
		fs.PostUserMessage("C1", "U2", parent, fmt.Sprintf("reply %04d %s", i, strings.Repeat("x", 1000)))
	}
	msgs, leftOut, err := api.Replies(ctx, "C1", parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) < 2 || msgs[0].Timestamp != parent || !strings.HasPrefix(msgs[len(msgs)-1].Text, fmt.Sprintf("reply %04d", replies-1)) {
		t.Fatalf("Replies = %d messages, first %q, last %.10q; want the parent first and the newest last", len(msgs), msgs[0].Text, msgs[len(msgs)-1].Text)
	}
	if len(msgs)-1+leftOut != replies || leftOut == 0 {
		t.Errorf("Replies kept %d replies and left out %d, want %d in all, some left out", len(msgs)-1, leftOut, replies)
	}
	held, head := 0, 0
	for i, m := range msgs[1:] {
		held += gateway.MessageBytes(m)
		want := fmt.Sprintf("reply %04d", i)
		if !strings.HasPrefix(m.Text, want) {
			if head == 0 {
				head = i
			}
			want = fmt.Sprintf("reply %04d", leftOut+i)
		}
		if !strings.HasPrefix(m.Text, want) {
			t.Fatalf("message %d is %.10q, want %q: the beginning, then the newest, in order", i+1, m.Text, want)
		}
	}
	one := gateway.MessageBytes(msgs[1])
	if head == 0 || head*one > budget/2 || head*one < budget/2-one {
		t.Errorf("kept %d replies of the beginning (%d bytes), want just within %d", head, head*one, budget/2)
	}
	if held > budget*3/2 || held < budget*3/2-2*one {
		t.Errorf("kept %d bytes of replies, want just within %d", held, budget*3/2)
	}
	if n := len(fs.CallsTo("conversations.replies")); n != 11 {
		t.Errorf("conversations.replies called %d times, want every page (11)", n)
	}
}

func TestHistoryOldestFirst(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{PageLimit: 2})
	for i := range 5 {
		fs.PostUserMessage("D1", "U1", "", fmt.Sprintf("m%d", i))
	}
	msgs, err := api.History(ctx, "D1", 3, "")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Text)
	}
	if fmt.Sprint(texts) != "[m2 m3 m4]" {
		t.Errorf("History = %v, want [m2 m3 m4]", texts)
	}
}

func TestPostUpdateEphemeral(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	ts, err := api.Post(ctx, "C1", "", gateway.Msg{Text: "a *b* &amp; c", Mark: convo.Mark{Kind: convo.MarkPlaceholder}})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Update(ctx, "C1", ts, gateway.Msg{Text: "done", Mark: convo.Mark{Kind: convo.MarkAnswer}}); err != nil {
		t.Fatal(err)
	}
	m, ok := fs.Message("C1", ts)
	if !ok || m.Text != "done" || !m.Edited {
		t.Errorf("message after update: %+v", m)
	}
	post := fs.CallsTo("chat.postMessage")[0].Params
	if post.Get("text") != "a *b* &amp; c" || post.Get("unfurl_links") != "false" {
		t.Errorf("chat.postMessage params %v: want text as given and no link unfurls", post)
	}
	if err := api.Ephemeral(ctx, "C1", "U1", ts, "psst"); err != nil {
		t.Fatal(err)
	}
	if e := fs.Ephemerals(); len(e) != 1 || e[0].User != "U1" || e[0].Text != "psst" || e[0].ThreadTS != ts {
		t.Errorf("ephemerals %+v", e)
	}
}

func TestStreamCalls(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	parent := fs.PostUserMessage("C1", "U1", "", "<@UBOT> q")
	ts, err := api.StartStream(ctx, gateway.StreamStart{Channel: "C1", ThreadTS: parent, RecipientUserID: "U1", RecipientTeamID: "T1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.AppendStream(ctx, "C1", ts, "Hello, "); err != nil {
		t.Fatal(err)
	}
	mark := convo.Mark{Kind: convo.MarkAnswer}
	if err := api.StopStream(ctx, "C1", ts, "world.", mark, nil); err != nil {
		t.Fatal(err)
	}
	start := fs.CallsTo("chat.startStream")[0].Params
	for k, want := range map[string]string{"recipient_user_id": "U1", "recipient_team_id": "T1", "thread_ts": parent, "channel": "C1"} {
		if got := start.Get(k); got != want {
			t.Errorf("chat.startStream %s = %q, want %q", k, got, want)
		}
	}
	if start.Has("markdown_text") {
		t.Errorf("chat.startStream sent markdown_text %q for an empty start", start.Get("markdown_text"))
	}
	m, _ := fs.Message("C1", ts)
	if m.Text != "Hello, world." || m.Streaming {
		t.Errorf("streamed message %+v: want text %q, stopped", m, "Hello, world.")
	}
	msgs, _, err := api.Replies(ctx, "C1", parent)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := convo.ReadMark(msgs[len(msgs)-1]); !ok || got != mark {
		t.Errorf("mark after stopStream = %+v, %v", got, ok)
	}
}

func TestUploadImageBytes(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	data := bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 0, 1, 2, 255}, 5000)
	err := api.UploadImage(ctx, gateway.Upload{
		Channel: "C1", Filename: "fox.png", Title: "a fox", Data: data,
		Comment: "<@U1> asked for: a fox", AltText: "a fox",
	})
	if err != nil {
		t.Fatal(err)
	}
	files := fs.Files()
	if len(files) != 1 {
		t.Fatalf("%d files, want 1", len(files))
	}
	f := files[0]
	if !bytes.Equal(f.Bytes, data) || !f.Shared || f.Channel != "C1" || f.InitialComment != "<@U1> asked for: a fox" ||
		f.AltText != "a fox" || f.Title != "a fox" || f.Name != "fox.png" {
		t.Errorf("file %+v (bytes equal: %v)", f, bytes.Equal(f.Bytes, data))
	}
}

func TestUploadNotInChannel(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	fs.SetMember("C9", false)
	err := api.UploadImage(ctx, gateway.Upload{Channel: "C9", Filename: "x.png", Data: []byte("png")})
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "not_in_channel" {
		t.Errorf("upload to a channel without the bot: %v, want not_in_channel", err)
	}
}

func TestRespond(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	url := fs.SlashCommand("C1", "U1", "/imagine", "x")
	if err := api.Respond(ctx, url, "It failed: reason"); err != nil {
		t.Fatal(err)
	}
	p := fs.ResponseURLPosts()
	if len(p) != 1 || p[0].Text != "It failed: reason" || p[0].ResponseType != "ephemeral" {
		t.Errorf("response_url posts %+v", p)
	}
}

// A private message with buttons goes through the response_url as section blocks and an actions
// block, the text also the fallback; replacing it leaves the text without the buttons.
func TestRespondPrivate(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	url := fs.SlashCommand("C1", "U1", "/summarize", "")
	long := strings.Repeat("A line of the summary.\n", 200) // two sections
	btn := gateway.Button{ActionID: "llmbot_post_summary", Text: "Post to channel", Value: "k1", Style: "primary"}
	if err := api.RespondPrivate(ctx, url, gateway.Private{Text: long, Buttons: []gateway.Button{btn}}); err != nil {
		t.Fatal(err)
	}
	p := fs.ResponseURLPosts()
	if len(p) != 1 || p[0].Status != 200 || p[0].ResponseType != "ephemeral" || p[0].Text != long {
		t.Fatalf("response_url posts %+v", p)
	}
	m, ok := fs.Private("C1", p[0].TS, "U1")
	if b := m.Buttons(); !ok || m.SectionText() != long || len(b) != 1 || b[0].ActionID != btn.ActionID || b[0].Value != "k1" ||
		b[0].Text != "Post to channel" || b[0].Style != "primary" {
		t.Errorf("U1 sees %q with %+v", m.SectionText(), b)
	}
	if err := api.RespondPrivate(ctx, url, gateway.Private{Text: "Posted.", ReplaceOriginal: true}); err != nil {
		t.Fatal(err)
	}
	if m, ok := fs.Private("C1", p[0].TS, "U1"); !ok || m.Text != "Posted." || len(m.Buttons()) != 0 {
		t.Errorf("after the replacement U1 sees %+v", m)
	}
}

// A user's name is their display name, else their real name, else their user name; it is looked up
// each time (the handlers keep the one cache of names).
func TestName(t *testing.T) {
	for _, tc := range []struct {
		user fakeslack.User
		want string
	}{
		{fakeslack.User{ID: "U7", Name: "ann", RealName: "Ann Smith", DisplayName: "Annie"}, "Annie"},
		{fakeslack.User{ID: "U8", Name: "bob", RealName: "Bob Jones"}, "Bob Jones"},
		{fakeslack.User{ID: "U9", Name: "cy"}, "cy"},
	} {
		api, fs, ctx := newAPI(t, fakeslack.Config{})
		fs.AddUser(tc.user)
		for range 2 {
			if n, err := api.Name(ctx, tc.user.ID); err != nil || n != tc.want {
				t.Errorf("Name(%s) = %q, %v; want %q", tc.user.ID, n, err, tc.want)
			}
		}
		if n := len(fs.CallsTo("users.info")); n != 2 {
			t.Errorf("users.info called %d times for two look-ups, want 2 (no second cache)", n)
		}
	}
}

func TestRateLimitedWriteIsTyped(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	ts, err := api.Post(ctx, "C1", "", gateway.Msg{Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	fs.RateLimitNext("chat.update", 3*time.Second)
	err = api.Update(ctx, "C1", ts, gateway.Msg{Text: "y"})
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 3*time.Second {
		t.Fatalf("Update after a 429: %v, want *slack.RateLimitedError with Retry-After 3s", err)
	}
	if n := len(fs.CallsTo("chat.update")); n != 1 {
		t.Errorf("chat.update called %d times, want 1 (writes are not retried here)", n)
	}
}

// users.info is paced and its 429s handled by the handlers' look-up budget, so a 429 comes back at
// once, typed, after one call, and the name is not cached.
func TestRateLimitedNameIsNotRetried(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	fs.AddUser(fakeslack.User{ID: "U7", Name: "ann"})
	fs.RateLimitNext("users.info", time.Second)
	_, err := api.Name(ctx, "U7")
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != time.Second {
		t.Fatalf("Name after a 429: %v, want *slack.RateLimitedError with Retry-After 1s", err)
	}
	if calls := len(fs.CallsTo("users.info")); calls != 1 {
		t.Errorf("users.info called %d times, want 1", calls)
	}
	if n, err := api.Name(ctx, "U7"); err != nil || n != "ann" {
		t.Errorf("Name after the 429 = %q, %v, want ann", n, err)
	}
}

// Thread and history reads are paced and retried by the handlers' shared read budget, so a 429 comes
// back at once, typed, after one call.
func TestRateLimitedThreadReadIsNotRetried(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	for _, method := range []string{"conversations.replies", "conversations.history"} {
		fs.RateLimitNext(method, time.Second)
	}
	_, _, rerr := api.Replies(ctx, "C1", "1.0")
	_, herr := api.History(ctx, "C1", 20, "")
	for method, err := range map[string]error{"conversations.replies": rerr, "conversations.history": herr} {
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter != time.Second {
			t.Errorf("%s after a 429: %v, want *slack.RateLimitedError with Retry-After 1s", method, err)
		}
		if calls := len(fs.CallsTo(method)); calls != 1 {
			t.Errorf("%s called %d times, want 1", method, calls)
		}
	}
}

// TestRespondErrorHidesResponseURL: a response_url (hooks.slack.com/commands/T…/…/<secret>) lets
// whoever holds it post into the channel for 30 minutes, bypassing channel permissions, like an
// incoming webhook. A failed Respond must not carry it into the error the handlers log.
func TestRespondErrorHidesResponseURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hj, ok := w.(http.Hijacker); ok {
			c, _, _ := hj.Hijack()
			c.Close() // the connection drops: no answer
		}
	}))
	defer srv.Close()
	api := NewSlackAPI(slack.New("xoxb-test", slack.OptionAPIURL(srv.URL+"/api/")), nil, 0)
	err := api.Respond(context.Background(), srv.URL+"/commands/T1/1234/s3cr3tR3spons3T0k3n", "It failed")
	if err == nil {
		t.Fatal("Respond = nil, want the error")
	}
	if strings.Contains(err.Error(), "s3cr3tR3spons3T0k3n") {
		t.Errorf("Respond error %q carries the response_url's secret into the logs", err)
	}
}

// Slack fetches the links of a message to preview them unless the message turns both
// previews off: every call that writes text sends unfurl_links=false and unfurl_media=false,
// so no link the model wrote is fetched without a click (its query string could carry the
// thread's text out).
func TestEveryWriteTurnsOffUnfurls(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	parent := fs.PostUserMessage("C1", "U1", "", "<@UBOT> q")
	respURL := fs.SlashCommand("C1", "U1", "/summarize", "")
	const link = "see https://example.com/pic.png?q=thread+text"
	mark := convo.Mark{Kind: convo.MarkAnswer}
	buttons := []gateway.Button{{ActionID: "llmbot_stop", Text: "Stop", Value: "v"}}
	var posted, streamed string
	for _, step := range []struct {
		name  string
		kind  fakeslack.WriteKind
		write func() error
	}{
		{"chat.postMessage", fakeslack.WritePost, func() (err error) {
			posted, err = api.Post(ctx, "C1", parent, gateway.Msg{Text: link, Mark: mark})
			return err
		}},
		{"chat.update", fakeslack.WriteUpdate, func() error { return api.Update(ctx, "C1", posted, gateway.Msg{Text: link, Buttons: buttons}) }},
		{"chat.postEphemeral", fakeslack.WriteEphemeral, func() error { return api.Ephemeral(ctx, "C1", "U1", parent, link) }},
		{"chat.startStream", fakeslack.WriteStart, func() (err error) {
			streamed, err = api.StartStream(ctx, gateway.StreamStart{Channel: "C1", ThreadTS: parent, RecipientUserID: "U1", RecipientTeamID: "T1", Markdown: link})
			return err
		}},
		{"chat.appendStream", fakeslack.WriteAppend, func() error { return api.AppendStream(ctx, "C1", streamed, link) }},
		{"chat.appendStream tasks", fakeslack.WriteAppend, func() error {
			return api.AppendTasks(ctx, "C1", streamed, []gateway.Task{{ID: "t1", Title: link, Status: gateway.TaskInProgress}})
		}},
		{"chat.stopStream", fakeslack.WriteStop, func() error { return api.StopStream(ctx, "C1", streamed, link, mark, buttons) }},
		{"chat.update of a streamed message", fakeslack.WriteUpdate, func() error { return api.FinishStream(ctx, "C1", streamed, link, mark, buttons) }},
		{"response_url", fakeslack.WriteResponseURL, func() error { return api.Respond(ctx, respURL, link) }},
		{"response_url with buttons", fakeslack.WriteResponseURL, func() error {
			return api.RespondPrivate(ctx, respURL, gateway.Private{Text: link, Buttons: buttons})
		}},
	} {
		n := len(fs.Writes())
		if err := step.write(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		ws := fs.WritesSince(n)
		if len(ws) != 1 || ws[0].Kind != step.kind {
			t.Fatalf("%s: writes %+v, want one %s", step.name, ws, step.kind)
		}
		if ws[0].UnfurlLinks != "false" || ws[0].UnfurlMedia != "false" {
			t.Errorf("%s sent unfurl_links=%q unfurl_media=%q, want both false", step.name, ws[0].UnfurlLinks, ws[0].UnfurlMedia)
		}
	}
}
