package bot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/imagine"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
)

// showButton posts a bot message in the thread carrying one button, as the handlers do, and
// returns its ts.
func showButton(t *testing.T, h *harness, channel, threadTS string, b gateway.Button) string {
	t.Helper()
	ts, err := h.api.Post(t.Context(), channel, threadTS, gateway.Msg{Text: "an answer", Mark: convo.Mark{Kind: convo.MarkAnswer},
		Buttons: []gateway.Button{b}})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func click(t *testing.T, fs *fakeslack.Server, channel, ts, user, action string) string {
	t.Helper()
	id, err := fs.Click(channel, ts, user, action)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// ephemeralsTo returns the texts shown privately to user.
func ephemeralsTo(fs *fakeslack.Server, user string) []string {
	var out []string
	for _, e := range fs.Ephemerals() {
		if e.User == user {
			out = append(out, e.Text)
		}
	}
	return out
}

func TestStopButtonOnlyForTheAsker(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	ended := make(chan error, 1) // one reply
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		<-ctx.Done()
		err := context.Cause(ctx)
		ended <- err
		return err
	}}
	h := startBot(t, fs, r, nil, Options{})
	q := fs.PostUserMessage("C1", "U1", "", "<@UBOT> write a long essay")
	h.waitFor(t, "reply started", func() bool { return len(r.requests()) == 1 })
	stop := gateway.Button{ActionID: route.ActionStop, Text: "Stop", Value: route.ReplyRef{ThreadTS: q, TS: q}.Value()}
	msg := showButton(t, h, "C1", q, stop)

	// Someone else: refused privately; the answer goes on.
	id := click(t, fs, "C1", msg, "U2", route.ActionStop)
	h.waitFor(t, "refusal", func() bool { return len(ephemeralsTo(fs, "U2")) == 1 })
	if got := ephemeralsTo(fs, "U2"); got[0] != handlers.TextNotAsker {
		t.Errorf("U2 told %q, want %q", got[0], handlers.TextNotAsker)
	}
	// The ack goes over the socket and the refusal over HTTP: either may reach the fake first.
	h.waitFor(t, "ack of the refused click", func() bool { return acked(fs, id) })
	if len(ended) != 0 {
		t.Fatal("the answer was stopped by someone who did not ask")
	}

	// The asker: stopped, acked while the reply was still running (it ends only on cancel).
	id = click(t, fs, "C1", msg, "U1", route.ActionStop)
	if err := waitChan(t, "reply stopped", ended); !errors.Is(err, handlers.ErrStopped) {
		t.Errorf("reply ended with %v, want ErrStopped", err)
	}
	h.waitFor(t, "ack", func() bool { return acked(fs, id) })
	if got := ephemeralsTo(fs, "U1"); len(got) != 0 {
		t.Errorf("asker told %q, want nothing (the answer says it was stopped)", got)
	}

	// A stale Stop on an ended answer: told so.
	click(t, fs, "C1", msg, "U1", route.ActionStop)
	h.waitFor(t, "notice", func() bool { return len(ephemeralsTo(fs, "U1")) == 1 })
	if got := ephemeralsTo(fs, "U1"); got[0] != handlers.TextNotRunning {
		t.Errorf("U1 told %q, want %q", got[0], handlers.TextNotRunning)
	}
}

func TestStopButtonOfAnEarlierAnswerLeavesTheNextOne(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}}
	h := startBot(t, fs, r, nil, Options{})
	q := fs.PostUserMessage("C1", "U1", "", "<@UBOT> first")
	h.waitFor(t, "reply started", func() bool { return len(r.requests()) == 1 })
	// A button naming an older question in the same thread.
	msg := showButton(t, h, "C1", q, gateway.Button{ActionID: route.ActionStop, Text: "Stop",
		Value: route.ReplyRef{ThreadTS: q, TS: "1.000001"}.Value()})
	click(t, fs, "C1", msg, "U1", route.ActionStop)
	h.waitFor(t, "notice", func() bool { return len(ephemeralsTo(fs, "U1")) == 1 })
	if stopped, _ := h.bot.StopReply("C1", q, "U1"); !stopped {
		t.Error("the running answer was stopped by a button of another one")
	}
}

func TestRegenerateButtonIsARequestInTheThreadsTurn(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	release := make(chan struct{})
	r := &fakeReplier{fn: func(ctx context.Context, req route.ReplyRequest) error {
		if !req.Regenerate {
			<-release
		}
		return nil
	}}
	h := startBot(t, fs, r, nil, Options{})
	q := fs.PostUserMessage("C1", "U1", "", "<@UBOT> a question")
	h.waitFor(t, "reply started", func() bool { return len(r.requests()) == 1 })
	msg := showButton(t, h, "C1", q, gateway.Button{ActionID: route.ActionRegenerate, Text: "Regenerate",
		Value: route.ReplyRef{ThreadTS: q, TS: q}.Value()})
	id := click(t, fs, "C1", msg, "U2", route.ActionRegenerate)
	h.waitFor(t, "ack", func() bool { return acked(fs, id) })
	if n := len(r.requests()); n != 1 {
		t.Fatalf("requests = %d before the first answer ended, want 1 (one answer at a time per thread)", n)
	}
	close(release)
	h.waitFor(t, "regenerate", func() bool { return len(r.requests()) == 2 })
	got := r.requests()[1]
	want := route.ReplyRequest{Channel: "C1", ChannelType: "channel", User: "U2", Team: fs.Config().TeamID, TS: q, ThreadTS: q, Regenerate: true}
	if got.Channel != want.Channel || got.ChannelType != want.ChannelType || got.User != want.User || got.Team != want.Team ||
		got.TS != want.TS || got.ThreadTS != want.ThreadTS || !got.Regenerate || got.FollowUp {
		t.Errorf("request = %+v, want %+v", got, want)
	}
}

func TestImagineAgainButton(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	runs := make(chan imagine.Request, 1) // one run
	im := &fakeImaginer{text: "Generating…", start: true, run: func(ctx context.Context, req imagine.Request) error {
		runs <- req
		return nil
	}}
	h := startBot(t, fs, &fakeReplier{}, im, Options{})
	err := h.api.UploadImage(t.Context(), gateway.Upload{Channel: "C1", Filename: "fox.png", Data: []byte("png"),
		Comment: "<@U1> asked for: a fox", Buttons: []gateway.Button{{ActionID: imagine.ActionImagineAgain, Text: "Another one", Value: "a fox"}}})
	if err != nil {
		t.Fatal(err)
	}
	msgTS := fs.Files()[0].MessageTS
	if m, _ := fs.Message("C1", msgTS); m.SectionText() != "<@U1> asked for: a fox" {
		t.Errorf("file message shows %q, want the comment in a section above the button", m.SectionText())
	}
	click(t, fs, "C1", msgTS, "U2", imagine.ActionImagineAgain)
	req := waitChan(t, "image job", runs)
	if req.Channel != "C1" || req.User != "U2" || req.Text != "a fox" || req.ResponseURL == "" {
		t.Errorf("job = %+v, want the prompt again for U2 with a response_url", req)
	}
	h.waitFor(t, "private ack", func() bool { return len(ephemeralsTo(fs, "U2")) == 1 })
	if got := ephemeralsTo(fs, "U2")[0]; got != "Generating…" {
		t.Errorf("U2 told %q, want the Accept text", got)
	}
}

func TestOtherActionsGoToTheirRoute(t *testing.T) {
	fs := newFakeSlack(t, fakeslack.Config{})
	clicks := make(chan string, 1) // one click
	h := startBot(t, fs, &fakeReplier{}, nil, Options{}, route.Route{Kind: route.Action, Name: "someone_elses",
		Handler: route.Funcs{AcceptFunc: func(*route.Request) route.Decision { return route.Decision{Run: true} },
			RunFunc: func(_ context.Context, req *route.Request) error {
				clicks <- req.Name + " " + req.Text
				return nil
			}}})
	msg := showButton(t, h, "C1", "", gateway.Button{ActionID: "someone_elses", Text: "Hi", Value: "x"})
	click(t, fs, "C1", msg, "U1", "someone_elses")
	if got := waitChan(t, "click", clicks); got != "someone_elses x" {
		t.Errorf("route ran %q, want someone_elses x", got)
	}
}

func TestPostWithButtons(t *testing.T) {
	api, fs, ctx := newAPI(t, fakeslack.Config{})
	long := strings.Repeat("A line of the answer.\n", 150) // 3,300 characters: two sections
	stop := gateway.Button{ActionID: route.ActionStop, Text: "Stop", Value: `{"ts":"1.2"}`, Style: "danger"}
	ts, err := api.Post(ctx, "C1", "", gateway.Msg{Text: long, Mark: convo.Mark{Kind: convo.MarkAnswer}, Buttons: []gateway.Button{stop}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := fs.Message("C1", ts)
	if m.Text != long || m.SectionText() != long {
		t.Errorf("text %d chars, sections %d chars, want both the whole text (%d)", len(m.Text), len(m.SectionText()), len(long))
	}
	if b := m.Buttons(); len(b) != 1 || b[0].ActionID != route.ActionStop || b[0].Value != stop.Value || b[0].Style != "danger" {
		t.Errorf("buttons = %+v", b)
	}
	if n := strings.Count(string(m.Blocks), `"type":"section"`); n != 2 {
		t.Errorf("%d sections, want 2 (each within 3,000 characters): %s", n, m.Blocks)
	}
	// Buttons taken off: the plain text again.
	if err := api.Update(ctx, "C1", ts, gateway.Msg{Text: "done", Mark: convo.Mark{Kind: convo.MarkAnswer}, Buttons: []gateway.Button{}}); err != nil {
		t.Fatal(err)
	}
	m, _ = fs.Message("C1", ts)
	if m.Text != "done" || len(m.Blocks) != 0 {
		t.Errorf("after taking buttons off: text %q, blocks %s", m.Text, m.Blocks)
	}
}

func TestCutRunes(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		limit int
		want  []string
	}{
		{"empty", "", 5, nil},
		{"fits", "abc", 5, []string{"abc"}},
		{"at a line end", "ab\ncd\nef", 7, []string{"ab\ncd\n", "ef"}},
		{"no line end", "abcdefg", 3, []string{"abc", "def", "g"}},
		{"characters, not bytes", "ééé\néé", 4, []string{"ééé\n", "éé"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cutRunes(tt.in, tt.limit)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Errorf("cutRunes(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
			}
			for _, p := range got {
				if utf8.RuneCountInString(p) > tt.limit {
					t.Errorf("piece %q over %d characters", p, tt.limit)
				}
			}
		})
	}
}
