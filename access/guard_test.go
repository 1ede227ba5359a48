package access_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/handlers"
)

// fakeBot records what reached the wrapped replier and imaginer.
type fakeBot struct {
	mu       sync.Mutex
	replies  []handlers.ReplyRequest
	runs     []handlers.ImagineRequest
	runErr   error
	accept   bool
	ackText  string
	notices  []notice
	noticeTo error
	denials  [][2]string
}

type notice struct{ channel, user, threadTS, text string }

func (f *fakeBot) Reply(_ context.Context, req handlers.ReplyRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, req)
	return nil
}

func (f *fakeBot) Accept(handlers.ImagineRequest) (string, bool) { return f.ackText, f.accept }

func (f *fakeBot) Run(_ context.Context, req handlers.ImagineRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, req)
	return f.runErr
}

func (f *fakeBot) Ephemeral(_ context.Context, channel, user, threadTS, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notices = append(f.notices, notice{channel, user, threadTS, text})
	return f.noticeTo
}

func (f *fakeBot) denied(feature, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.denials = append(f.denials, [2]string{feature, reason})
}

func newGuard(t *testing.T, f *fakeBot, rules access.Rules, quota *access.Quota) *access.Guard {
	t.Helper()
	p, err := access.NewPolicy(rules)
	if err != nil {
		t.Fatal(err)
	}
	return access.NewGuard(access.GuardOptions{Policy: p, Quota: quota, Notify: f, Denied: f.denied})
}

func TestGuardDeniedMentionInChannel(t *testing.T) {
	f := &fakeBot{}
	r := newGuard(t, f, access.Rules{DenyUsers: []string{"U0MALLORY"}, Refusal: "Not for you, sorry."}, nil).Replier(f)
	err := r.Reply(t.Context(), handlers.ReplyRequest{Channel: "C0GENERAL", ChannelType: "channel", User: "U0MALLORY", TS: "1.1", ThreadTS: "1.1", Text: "<@UBOT> hi"})
	if !errors.Is(err, access.ErrDenied) || !errors.Is(err, handlers.ErrIgnored) {
		t.Errorf("Reply = %v, want ErrDenied and ErrIgnored", err)
	}
	if len(f.replies) != 0 {
		t.Errorf("the refused mention reached the replier: %+v", f.replies)
	}
	want := []notice{{"C0GENERAL", "U0MALLORY", "1.1", "Not for you, sorry."}}
	if len(f.notices) != 1 || f.notices[0] != want[0] {
		t.Errorf("notices = %+v, want one private notice in the thread %+v", f.notices, want)
	}
	if len(f.denials) != 1 || f.denials[0] != [2]string{"mention", "user_denied"} {
		t.Errorf("denials = %v", f.denials)
	}
}

func TestGuardDeniedDM(t *testing.T) {
	f := &fakeBot{}
	r := newGuard(t, f, access.Rules{AllowChannels: []string{"C0AIHELP"}}, nil).Replier(f)
	err := r.Reply(t.Context(), handlers.ReplyRequest{Channel: "D0BOB", ChannelType: "im", User: "U0BOB", TS: "2.2", Text: "hello"})
	if !errors.Is(err, access.ErrDenied) {
		t.Errorf("Reply = %v, want ErrDenied", err)
	}
	if len(f.replies) != 0 || len(f.notices) != 1 || f.notices[0] != (notice{"D0BOB", "U0BOB", "", access.DefaultRefusal}) {
		t.Errorf("replies %+v, notices %+v; want none and one private notice in the DM", f.replies, f.notices)
	}
	if len(f.denials) != 1 || f.denials[0] != [2]string{"dm", "channel_not_allowed"} {
		t.Errorf("denials = %v", f.denials)
	}
}

// A thread message that does not address the bot is refused without a word.
func TestGuardDeniedFollowUpIsSilent(t *testing.T) {
	f := &fakeBot{}
	r := newGuard(t, f, access.Rules{AllowUsers: []string{"U0ALICE"}}, nil).Replier(f)
	err := r.Reply(t.Context(), handlers.ReplyRequest{Channel: "C0GENERAL", User: "U0BOB", TS: "3.3", ThreadTS: "1.1", FollowUp: true})
	if !errors.Is(err, handlers.ErrIgnored) || len(f.notices) != 0 || len(f.replies) != 0 {
		t.Errorf("follow-up: err %v, notices %+v, replies %+v; want ignored silently", err, f.notices, f.replies)
	}
	if len(f.denials) != 1 || f.denials[0] != [2]string{"follow_up", "user_not_allowed"} {
		t.Errorf("denials = %v", f.denials)
	}
}

// When the notice cannot be sent, the error says so and is not an ErrIgnored (it gets logged).
func TestGuardNoticeFails(t *testing.T) {
	f := &fakeBot{noticeTo: errors.New("chat.postEphemeral: not_in_channel")}
	r := newGuard(t, f, access.Rules{DenyUsers: []string{"U0BOB"}}, nil).Replier(f)
	err := r.Reply(t.Context(), handlers.ReplyRequest{Channel: "C0GENERAL", User: "U0BOB", TS: "1.1", ThreadTS: "1.1"})
	if err == nil || errors.Is(err, handlers.ErrIgnored) {
		t.Errorf("Reply = %v, want the notice's error, not ignored", err)
	}
}

// The notice goes out even when the reply's context is already cancelled (shutdown).
func TestGuardNoticeOutlivesCancel(t *testing.T) {
	f := &fakeBot{}
	r := newGuard(t, f, access.Rules{DenyUsers: []string{"U0BOB"}}, nil).Replier(f)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = r.Reply(ctx, handlers.ReplyRequest{Channel: "C0GENERAL", User: "U0BOB", TS: "1.1", ThreadTS: "1.1"})
	if len(f.notices) != 1 {
		t.Errorf("notices = %+v, want 1", f.notices)
	}
}

func TestGuardAllowedPassesThrough(t *testing.T) {
	f := &fakeBot{accept: true, ackText: "Generating…"}
	g := newGuard(t, f, access.Rules{AllowUsers: []string{"U0ALICE"}}, access.NewQuota(5, 0))
	req := handlers.ReplyRequest{Channel: "C0GENERAL", User: "U0ALICE", TS: "1.1", ThreadTS: "1.1", Text: "hi"}
	if err := g.Replier(f).Reply(t.Context(), req); err != nil {
		t.Errorf("Reply = %v", err)
	}
	if len(f.replies) != 1 || f.replies[0].Text != "hi" || len(f.notices) != 0 {
		t.Errorf("replies %+v, notices %+v; want the request passed on unchanged", f.replies, f.notices)
	}
	text, start := g.Imaginer(f).Accept(handlers.ImagineRequest{Channel: "C0GENERAL", User: "U0ALICE", Text: "a cat"})
	if text != "Generating…" || !start {
		t.Errorf("Accept = %q, %v; want the handler's ack", text, start)
	}
}

func TestGuardNilPolicyAndQuota(t *testing.T) {
	f := &fakeBot{accept: true, ackText: "ok"}
	g := access.NewGuard(access.GuardOptions{})
	if err := g.Replier(f).Reply(t.Context(), handlers.ReplyRequest{Channel: "C1", User: "U1"}); err != nil || len(f.replies) != 1 {
		t.Errorf("Reply = %v, replies %d", err, len(f.replies))
	}
	if _, start := g.Imaginer(f).Accept(handlers.ImagineRequest{Channel: "C1", User: "U1"}); !start {
		t.Error("Accept refused with no policy")
	}
}

func TestGuardImagineDenied(t *testing.T) {
	f := &fakeBot{accept: true, ackText: "Generating…"}
	im := newGuard(t, f, access.Rules{DenyChannels: []string{"C0RANDOM"}}, access.NewQuota(1, 0)).Imaginer(f)
	text, start := im.Accept(handlers.ImagineRequest{Channel: "C0RANDOM", User: "U0ALICE", Text: "a cat"})
	if start || text != access.DefaultRefusal {
		t.Errorf("Accept in a denied channel = %q, %v; want the refusal as the private ack", text, start)
	}
	// The refusal cost no quota.
	if _, start := im.Accept(handlers.ImagineRequest{Channel: "C0GENERAL", User: "U0ALICE", Text: "a cat"}); !start {
		t.Error("the refusal used up the quota")
	}
	if len(f.denials) != 1 || f.denials[0] != [2]string{"imagine", "channel_denied"} {
		t.Errorf("denials = %v", f.denials)
	}
}

func TestGuardImagineQuota(t *testing.T) {
	f := &fakeBot{accept: true, ackText: "Generating…"}
	q := access.NewQuota(2, 0)
	im := newGuard(t, f, access.Rules{}, q).Imaginer(f)
	req := handlers.ImagineRequest{Channel: "C0GENERAL", User: "U0ALICE", Text: "a cat"}
	for i := range 2 {
		if _, start := im.Accept(req); !start {
			t.Fatalf("picture %d refused", i+1)
		}
		if err := im.Run(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	text, start := im.Accept(req)
	if start || text == "" || text == "Generating…" {
		t.Errorf("third picture: %q, %v; want refused with the quota message", text, start)
	}
	if len(f.denials) != 1 || f.denials[0] != [2]string{"imagine", "quota"} {
		t.Errorf("denials = %v", f.denials)
	}
}

// A failed job gives its picture back; a handler refusal (empty prompt, busy) never took one.
func TestGuardImagineRefunds(t *testing.T) {
	f := &fakeBot{accept: true, ackText: "Generating…", runErr: errors.New("image: content_policy")}
	q := access.NewQuota(1, 0)
	im := newGuard(t, f, access.Rules{}, q).Imaginer(f)
	req := handlers.ImagineRequest{Channel: "C0GENERAL", User: "U0ALICE", Text: "x"}
	if _, start := im.Accept(req); !start {
		t.Fatal("refused")
	}
	if err := im.Run(t.Context(), req); err == nil {
		t.Fatal("Run hid the job's error")
	}
	if got := q.Remaining("U0ALICE"); got != 1 {
		t.Errorf("Remaining after a failed job = %d, want 1", got)
	}
	f.accept, f.ackText = false, "Usage: /imagine <what to draw>"
	if text, start := im.Accept(req); start || text != "Usage: /imagine <what to draw>" {
		t.Errorf("handler refusal = %q, %v; want the handler's text", text, start)
	}
	if got := q.Remaining("U0ALICE"); got != 1 {
		t.Errorf("Remaining after a handler refusal = %d, want 1", got)
	}
}
