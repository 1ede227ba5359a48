package fakeslack_test

import (
	"bytes"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/llmbot/llmbot/internal/fakeslack"
)

func innerEvent(t *testing.T, evt socketmode.Event) any {
	t.Helper()
	api, ok := evt.Data.(slackevents.EventsAPIEvent)
	if !ok {
		t.Fatalf("event data %T", evt.Data)
	}
	return api.InnerEvent.Data
}

func TestUserMessageBlocksDecode(t *testing.T) {
	srv := newServer(t, fakeslack.Config{Subscriptions: []string{"app_mention"}})
	sm := runSocketMode(t, srv)
	text := "<@UBOT> see <#C2|general>, <https://example.com|this> &amp; <!here> <@U2> &lt;b&gt;"
	srv.PostUserMessage("C1", "U1", "", text)
	ev := innerEvent(t, nextEvent(t, sm, socketmode.EventTypeEventsAPI)).(*slackevents.AppMentionEvent)
	if ev.Text != text || len(ev.Blocks.BlockSet) != 1 {
		t.Fatalf("event = %+v", ev)
	}
	rt, ok := ev.Blocks.BlockSet[0].(*slack.RichTextBlock)
	if !ok {
		t.Fatalf("block %T", ev.Blocks.BlockSet[0])
	}
	sec := rt.Elements[0].(*slack.RichTextSection)
	var types []string
	for _, e := range sec.Elements {
		types = append(types, string(e.RichTextSectionElementType()))
	}
	want := []string{"user", "text", "channel", "text", "link", "text", "broadcast", "text", "user", "text"}
	if len(types) != len(want) {
		t.Fatalf("element types = %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("element types = %v, want %v", types, want)
		}
	}
	if last := sec.Elements[9].(*slack.RichTextSectionTextElement); last.Text != " <b>" {
		t.Errorf("unescaped text = %q", last.Text)
	}
}

func TestFilesOtherBotsAndEdits(t *testing.T) {
	srv := newServer(t, fakeslack.Config{Subscriptions: []string{"app_mention", "message.channels"}})
	sm := runSocketMode(t, srv)
	api := newAPI(srv)
	png := []byte("\x89PNG fake")

	ts := srv.Post(fakeslack.UserMessage{Channel: "C1", User: "U1", Text: "<@UBOT> what is this?", Files: []fakeslack.UserFile{{Name: "cat.png", Bytes: png}}})
	mention := innerEvent(t, nextEvent(t, sm, socketmode.EventTypeEventsAPI)).(*slackevents.AppMentionEvent)
	if len(mention.Files) != 1 || mention.Files[0].Name != "cat.png" || mention.Files[0].URLPrivateDownload == "" {
		t.Fatalf("files = %+v", mention.Files)
	}
	msg := innerEvent(t, nextEvent(t, sm, socketmode.EventTypeEventsAPI)).(*slackevents.MessageEvent)
	if msg.SubType != "file_share" || msg.TimeStamp != ts {
		t.Errorf("message = %+v", msg)
	}
	var buf bytes.Buffer
	if err := api.GetFileContext(ctxFor(t), mention.Files[0].URLPrivateDownload, &buf); err != nil || !bytes.Equal(buf.Bytes(), png) {
		t.Errorf("download: %v, %q", err, buf.Bytes())
	}

	srv.Post(fakeslack.UserMessage{Channel: "C1", User: "U9", BotID: "B9", ThreadTS: ts, Text: "beep"})
	other := innerEvent(t, nextEvent(t, sm, socketmode.EventTypeEventsAPI)).(*slackevents.MessageEvent)
	if other.BotID != "B9" || other.ThreadTimeStamp != ts {
		t.Errorf("other bot = %+v", other)
	}

	if !srv.EditUserMessage("C1", ts, "<@UBOT> what is this, really?") {
		t.Fatal("edit of a stored message failed")
	}
	edited := innerEvent(t, nextEvent(t, sm, socketmode.EventTypeEventsAPI)).(*slackevents.AppMentionEvent)
	if edited.Edited == nil || edited.TimeStamp != ts {
		t.Errorf("app_mention after edit = %+v", edited)
	}
	changed := innerEvent(t, nextEvent(t, sm, socketmode.EventTypeEventsAPI)).(*slackevents.MessageEvent)
	if changed.SubType != "message_changed" || changed.Message == nil || changed.Message.Text != "<@UBOT> what is this, really?" {
		t.Errorf("message_changed = %+v", changed)
	}
}

func TestEachEnvelopeGoesToOneConnection(t *testing.T) {
	srv := newServer(t, fakeslack.Config{Subscriptions: []string{"message.im"}})
	api := newAPI(srv)
	var conns []*websocket.Conn
	for range 2 {
		_, url, err := api.StartSocketModeContext(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		ws, _, err := websocket.DefaultDialer.DialContext(ctxFor(t), url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		var hello map[string]any
		if err := ws.ReadJSON(&hello); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, ws)
	}
	if got := srv.Connections().Current; got != 2 {
		t.Fatalf("current connections = %d", got)
	}
	const n = 20
	for range n {
		srv.PostUserMessage("D1", "U1", "", "hi")
	}
	// Each connection acks what it reads; together they must see every envelope once.
	seen := map[string]int{}
	results := make(chan []string, 2) // one result per reader, never blocking it
	for _, ws := range conns {
		go func() {
			var ids []string
			for {
				var env struct {
					EnvelopeID string `json:"envelope_id"`
				}
				if err := ws.ReadJSON(&env); err != nil {
					results <- ids
					return
				}
				ids = append(ids, env.EnvelopeID)
				_ = ws.WriteJSON(map[string]string{"envelope_id": env.EnvelopeID})
			}
		}()
	}
	if err := srv.WaitFor(ctxFor(t), func() bool { return len(srv.Acks()) == n }); err != nil {
		t.Fatalf("acks = %d", len(srv.Acks()))
	}
	for _, ws := range conns {
		ws.Close()
	}
	for range 2 {
		for _, id := range <-results {
			seen[id]++
		}
	}
	if len(seen) != n {
		t.Errorf("distinct envelopes read = %d, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("envelope %s read %d times", id, c)
		}
	}
}

func TestConversationsOpenAndJoin(t *testing.T) {
	srv := newServer(t, fakeslack.Config{})
	api := newAPI(srv)
	ch, _, already, err := api.OpenConversationContext(ctxFor(t), &slack.OpenConversationParameters{Users: []string{"U1"}})
	if err != nil || ch.ID != "DU1" || !ch.IsIM || already {
		t.Fatalf("open = %+v, %v, %v", ch, already, err)
	}
	if _, _, err := api.PostMessageContext(ctxFor(t), ch.ID, slack.MsgOptionText("hi", false)); err != nil {
		t.Errorf("post to the opened DM: %v", err)
	}
	srv.AddChannel("C5", fakeslack.ChannelPublic, "random")
	srv.SetMember("C5", false)
	if _, _, err := api.PostMessageContext(ctxFor(t), "C5", slack.MsgOptionText("hi", false)); err == nil {
		t.Error("post before joining succeeded")
	}
	if _, _, _, err := api.JoinConversationContext(ctxFor(t), "C5"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostMessageContext(ctxFor(t), "C5", slack.MsgOptionText("hi", false)); err != nil {
		t.Errorf("post after joining: %v", err)
	}
}

// A member's message names their team (user_team, source_team) only with Config.UserTeams; an
// outsider's (User.Team) always does.
func TestUserTeams(t *testing.T) {
	for _, on := range []bool{false, true} {
		srv := newServer(t, fakeslack.Config{Subscriptions: []string{"app_mention"}, UserTeams: on})
		srv.AddUser(fakeslack.User{ID: "U0OUT", Name: "outsider", Team: "T0OTHER"})
		sm := runSocketMode(t, srv)
		for _, tt := range []struct{ user, want string }{{"U1", map[bool]string{true: "T1"}[on]}, {"U0OUT", "T0OTHER"}} {
			srv.PostUserMessage("C1", tt.user, "", "<@UBOT> hi")
			ev := innerEvent(t, nextEvent(t, sm, socketmode.EventTypeEventsAPI)).(*slackevents.AppMentionEvent)
			if ev.UserTeam != tt.want || ev.SourceTeam != tt.want {
				t.Errorf("UserTeams=%v, %s's mention: user_team %q, source_team %q, want %q", on, tt.user, ev.UserTeam, ev.SourceTeam, tt.want)
			}
		}
	}
}
