package access_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/imagine"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/route"
)

// fakeRoute is the handler the Guard wraps: it records the requests that reached it.
type fakeRoute struct {
	decision route.Decision // what Accept returns
	runErr   error          // what Run returns

	mu       sync.Mutex
	accepted []route.Request
	ran      []route.Request
}

func (f *fakeRoute) Accept(req *route.Request) route.Decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accepted = append(f.accepted, *req)
	return f.decision
}

func (f *fakeRoute) Run(_ context.Context, req *route.Request) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, *req)
	return f.runErr
}

// denials records GuardOptions.Denied.
type denials struct {
	mu  sync.Mutex
	got [][2]string // feature, reason
}

func (d *denials) denied(feature, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, [2]string{feature, reason})
}

func (d *denials) list() [][2]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.got)
}

// guarded returns next wrapped in a Guard with rules and quota, its refusals counted in d.
func guarded(t *testing.T, next route.Handler, rules access.Rules, quota *access.Quota, d *denials) route.Handler {
	t.Helper()
	p, err := access.NewPolicy(rules)
	if err != nil {
		t.Fatal(err)
	}
	return access.NewGuard(access.GuardOptions{Policy: p, Quota: quota, Denied: d.denied}).Middleware(next)
}

// message is rr as the bot routes it: the one Message route, its Feature from rr.
func message(rr route.ReplyRequest) *route.Request {
	return &route.Request{Kind: route.Message, Name: route.MessageRoute, Feature: rr.Feature(), Channel: rr.Channel,
		User: rr.User, Team: rr.Team, ThreadTS: rr.ThreadTS, MessageTS: rr.TS, Text: rr.Text, Reply: &rr}
}

// imagineCmd is an /imagine command as the route table hands it on (its Feature from the route).
func imagineCmd(channel, user, text string) *route.Request {
	return &route.Request{Kind: route.Command, Name: "/imagine", Feature: access.FeatureImagine, Channel: channel, User: user, Text: text}
}

// People the rules refuse are told why (Decision.Say: the bot tells them privately, or in the
// slash command's ack), except in a follow-up that did not address the bot, which is refused
// without a word. Nothing reaches the wrapped handler, the refusal is counted, and it costs no
// /imagine picture.
func TestGuardRefuses(t *testing.T) {
	tests := []struct {
		name        string
		rules       access.Rules
		req         *route.Request
		want        route.Decision
		wantDenials [][2]string
	}{
		{
			name:        "mention in a channel",
			rules:       access.Rules{DenyUsers: []string{"U0MALLORY"}, Refusal: "Not for you, sorry."},
			req:         message(route.ReplyRequest{Channel: "C0GENERAL", ChannelType: "channel", User: "U0MALLORY", TS: "1.1", ThreadTS: "1.1", Text: "<@UBOT> hi"}),
			want:        route.Decision{Say: "Not for you, sorry."},
			wantDenials: [][2]string{{access.FeatureMention, string(access.ReasonUserDenied)}},
		},
		{
			name:        "DM",
			rules:       access.Rules{AllowChannels: []string{"C0AIHELP"}},
			req:         message(route.ReplyRequest{Channel: "D0BOB", ChannelType: "im", User: "U0BOB", TS: "2.2", Text: "hello"}),
			want:        route.Decision{Say: access.DefaultRefusal},
			wantDenials: [][2]string{{access.FeatureDM, string(access.ReasonChannelNotAllowed)}},
		},
		{
			name:        "follow-up without a mention, silently",
			rules:       access.Rules{AllowUsers: []string{"U0ALICE"}},
			req:         message(route.ReplyRequest{Channel: "C0GENERAL", ChannelType: "channel", User: "U0BOB", TS: "3.3", ThreadTS: "1.1", Text: "and then?", FollowUp: true}),
			want:        route.Decision{},
			wantDenials: [][2]string{{access.FeatureFollowUp, string(access.ReasonUserNotAllowed)}},
		},
		{
			name:        "/imagine in a denied channel",
			rules:       access.Rules{DenyChannels: []string{"C0RANDOM"}},
			req:         imagineCmd("C0RANDOM", "U0ALICE", "a cat"),
			want:        route.Decision{Say: access.DefaultRefusal},
			wantDenials: [][2]string{{access.FeatureImagine, string(access.ReasonChannelDenied)}},
		},
		{
			name:  "Regenerate button",
			rules: access.Rules{DenyUsers: []string{"U0MALLORY"}},
			req: &route.Request{Kind: route.Action, Name: route.ActionRegenerate, Feature: "regenerate",
				Channel: "C0GENERAL", User: "U0MALLORY", ThreadTS: "1.1", MessageTS: "1.2"},
			want:        route.Decision{Say: access.DefaultRefusal},
			wantDenials: [][2]string{{"regenerate", string(access.ReasonUserDenied)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := &fakeRoute{decision: route.Decision{Run: true, Say: "Generating…"}}
			var d denials
			q := access.NewQuota(1, 0)
			h := guarded(t, next, tt.rules, q, &d)
			if got := h.Accept(tt.req); got != tt.want {
				t.Errorf("Accept = %+v, want %+v", got, tt.want)
			}
			if len(next.accepted) != 0 || len(next.ran) != 0 {
				t.Errorf("the refused request reached the handler: accepted %+v, ran %+v", next.accepted, next.ran)
			}
			if got := d.list(); !slices.Equal(got, tt.wantDenials) {
				t.Errorf("denials = %v, want %v", got, tt.wantDenials)
			}
			if got := q.Remaining(tt.req.User); got != 1 {
				t.Errorf("Remaining after the refusal = %d, want 1 (a refusal costs no picture)", got)
			}
		})
	}
}

// A refused follow-up counts as a refusal only when the bot would have answered it
// (GuardOptions.KnownFollowUp), not people talking among themselves in a thread the bot has no
// part in; either way it is refused without a word. KnownFollowUp says nothing about mentions.
func TestGuardKnownFollowUp(t *testing.T) {
	known := func(route.ReplyRequest) bool { return true }
	unknown := func(route.ReplyRequest) bool { return false }
	followUp := route.ReplyRequest{Channel: "C0GENERAL", User: "U0BOB", TS: "3.3", ThreadTS: "1.1", Text: "lunch?", FollowUp: true}
	mention := route.ReplyRequest{Channel: "C0GENERAL", User: "U0BOB", TS: "3.3", ThreadTS: "3.3", Text: "<@UBOT> hi"}
	tests := []struct {
		name        string
		known       func(route.ReplyRequest) bool
		req         *route.Request
		want        route.Decision
		wantDenials [][2]string
	}{
		{"follow-up the bot would answer", known, message(followUp), route.Decision{},
			[][2]string{{access.FeatureFollowUp, string(access.ReasonUserNotAllowed)}}},
		{"follow-up in another thread", unknown, message(followUp), route.Decision{}, nil},
		{"follow-up, KnownFollowUp unset", nil, message(followUp), route.Decision{},
			[][2]string{{access.FeatureFollowUp, string(access.ReasonUserNotAllowed)}}},
		{"mention", unknown, message(mention), route.Decision{Say: access.DefaultRefusal},
			[][2]string{{access.FeatureMention, string(access.ReasonUserNotAllowed)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := access.NewPolicy(access.Rules{AllowUsers: []string{"U0ALICE"}})
			if err != nil {
				t.Fatal(err)
			}
			var d denials
			next := &fakeRoute{decision: route.Decision{Run: true}}
			h := access.NewGuard(access.GuardOptions{Policy: p, Denied: d.denied, KnownFollowUp: tt.known}).Middleware(next)
			if got := h.Accept(tt.req); got != tt.want {
				t.Errorf("Accept = %+v, want %+v", got, tt.want)
			}
			if len(next.accepted) != 0 {
				t.Errorf("the refused request reached the handler: %+v", next.accepted)
			}
			if got := d.list(); !slices.Equal(got, tt.wantDenials) {
				t.Errorf("denials = %v, want %v", got, tt.wantDenials)
			}
		})
	}
}

// Allowed people get the wrapped handler's decision, unchanged, with the request unchanged; only
// /imagine takes a picture from the quota.
func TestGuardAllowedPassesThrough(t *testing.T) {
	next := &fakeRoute{decision: route.Decision{Run: true, Say: "Generating…"}}
	var d denials
	q := access.NewQuota(5, 0)
	h := guarded(t, next, access.Rules{AllowUsers: []string{"U0ALICE"}}, q, &d)

	msg := message(route.ReplyRequest{Channel: "C0GENERAL", ChannelType: "channel", User: "U0ALICE", TS: "1.1", ThreadTS: "1.1", Text: "hi"})
	if got := h.Accept(msg); got != next.decision {
		t.Errorf("Accept(mention) = %+v, want the handler's %+v", got, next.decision)
	}
	if err := h.Run(t.Context(), msg); err != nil {
		t.Errorf("Run(mention) = %v", err)
	}
	if len(next.accepted) != 1 || next.accepted[0].Text != "hi" || next.accepted[0].Reply != msg.Reply ||
		len(next.ran) != 1 || next.ran[0].Reply != msg.Reply {
		t.Errorf("accepted %+v, ran %+v; want the request passed on unchanged", next.accepted, next.ran)
	}
	if got := q.Remaining("U0ALICE"); got != 5 {
		t.Errorf("Remaining after a mention = %d, want 5", got)
	}

	if got := h.Accept(imagineCmd("C0GENERAL", "U0ALICE", "a cat")); got != next.decision {
		t.Errorf("Accept(/imagine) = %+v, want the handler's %+v", got, next.decision)
	}
	if got := q.Remaining("U0ALICE"); got != 4 {
		t.Errorf("Remaining after an accepted /imagine = %d, want 4", got)
	}
	if got := d.list(); len(got) != 0 {
		t.Errorf("denials = %v, want none", got)
	}
}

// Without a policy and a quota everyone is let through, and a failed job has nothing to give back.
func TestGuardNilPolicyAndQuota(t *testing.T) {
	next := &fakeRoute{decision: route.Decision{Run: true, Say: "ok"}, runErr: errors.New("image: content_policy")}
	h := access.NewGuard(access.GuardOptions{}).Middleware(next)
	if got := h.Accept(message(route.ReplyRequest{Channel: "C1", User: "U1", TS: "1.1", ThreadTS: "1.1"})); got != next.decision {
		t.Errorf("Accept(mention) = %+v, want the handler's %+v", got, next.decision)
	}
	req := imagineCmd("C1", "U1", "a cat")
	if got := h.Accept(req); got != next.decision {
		t.Errorf("Accept(/imagine) = %+v with no policy, want the handler's %+v", got, next.decision)
	}
	if err := h.Run(t.Context(), req); !errors.Is(err, next.runErr) {
		t.Errorf("Run = %v, want the job's error", err)
	}
	if len(next.accepted) != 2 || len(next.ran) != 1 {
		t.Errorf("accepted %d, ran %d; want 2 and 1", len(next.accepted), len(next.ran))
	}
}

// The daily quota: pictures made count; past the limit the person is told so, the refusal is
// counted, and the wrapped handler is not asked (it would hold a place for a job that never runs).
func TestGuardImagineQuota(t *testing.T) {
	next := &fakeRoute{decision: route.Decision{Run: true, Say: "Generating…"}}
	var d denials
	h := guarded(t, next, access.Rules{}, access.NewQuota(2, 0), &d)
	for i := range 2 {
		req := imagineCmd("C0GENERAL", "U0ALICE", "a cat")
		if got := h.Accept(req); !got.Run {
			t.Fatalf("picture %d refused: %+v", i+1, got)
		}
		if err := h.Run(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	got := h.Accept(imagineCmd("C0GENERAL", "U0ALICE", "a cat"))
	if got.Run || got.Say == "" || got.Say == "Generating…" {
		t.Errorf("third picture: %+v; want refused with the quota message", got)
	}
	if len(next.accepted) != 2 {
		t.Errorf("the handler was asked %d times, want 2 (not for the picture past the quota)", len(next.accepted))
	}
	if got := d.list(); !slices.Equal(got, [][2]string{{access.FeatureImagine, string(access.ReasonQuota)}}) {
		t.Errorf("denials = %v", got)
	}
}

// A failed job gives its picture back; a handler refusal (empty prompt, too many in progress)
// never took one, and is passed on as the handler said it.
func TestGuardImagineRefunds(t *testing.T) {
	next := &fakeRoute{decision: route.Decision{Run: true, Say: "Generating…"}, runErr: errors.New("image: content_policy")}
	q := access.NewQuota(1, 0)
	h := guarded(t, next, access.Rules{}, q, &denials{})
	req := imagineCmd("C0GENERAL", "U0ALICE", "x")
	if got := h.Accept(req); !got.Run {
		t.Fatalf("refused: %+v", got)
	}
	if err := h.Run(t.Context(), req); !errors.Is(err, next.runErr) {
		t.Fatalf("Run = %v, want the job's error", err)
	}
	if got := q.Remaining("U0ALICE"); got != 1 {
		t.Errorf("Remaining after a failed job = %d, want 1", got)
	}
	next.decision = route.Decision{Say: "Usage: /imagine <what to draw>"}
	if got := h.Accept(imagineCmd("C0GENERAL", "U0ALICE", "")); got != next.decision {
		t.Errorf("handler refusal = %+v; want the handler's %+v", got, next.decision)
	}
	if got := q.Remaining("U0ALICE"); got != 1 {
		t.Errorf("Remaining after a handler refusal = %d, want 1", got)
	}
}

// nopImager, nopUploader and nopResponder let a real imagine.Imagine run.
type nopImager struct{}

func (nopImager) Image(context.Context, llm.ImageRequest) (*llm.Image, error) {
	return &llm.Image{Data: []byte("png"), Format: "png"}, nil
}

type nopUploader struct{}

func (nopUploader) UploadImage(context.Context, gateway.Upload) error { return nil }

type nopResponder struct{}

func (nopResponder) Respond(context.Context, string, string) error { return nil }

// A person whose daily quota is used up is told so every time they try, not, from the second
// try on, that they "already have 1 images in progress": the quota refusal comes after the
// wrapped Imagine.Accept has reserved a per-user place, which nobody gives back (it stays taken
// for 30 s).
func TestGuardQuotaRefusalDoesNotHoldImaginePlace(t *testing.T) {
	im := imagine.New(nopImager{}, nopUploader{}, nopResponder{}, nil, imagine.Options{MaxPerUser: 1})
	h := guarded(t, im.Handler(), access.Rules{}, access.NewQuota(1, 0), &denials{})

	first := imagineCmd("C0ART", "U0ALICE", "a fox")
	if d := h.Accept(first); !d.Run {
		t.Fatalf("first picture not started: %+v", d)
	}
	if err := h.Run(t.Context(), first); err != nil {
		t.Fatalf("first picture: %v", err)
	}
	for try := 2; try <= 3; try++ {
		d := h.Accept(imagineCmd("C0ART", "U0ALICE", "a fox"))
		if d.Run {
			t.Fatalf("try %d started past the quota", try)
		}
		if !strings.Contains(d.Say, "for today") {
			t.Errorf("try %d told %q, want the quota message (no image is in progress)", try, d.Say)
		}
	}
}

// A picture whose handler panics, in Accept or in Run, goes back to the person's quota: only
// pictures delivered count.
func TestGuardQuotaRefundedWhenTheHandlerPanics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		accept func(*route.Request) route.Decision
		run    func(context.Context, *route.Request) error
	}{
		{"in Accept", func(*route.Request) route.Decision { panic("boom") }, nil},
		{"in Run", func(*route.Request) route.Decision { return route.Decision{Run: true} },
			func(context.Context, *route.Request) error { panic("boom") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := access.NewQuota(1, 0)
			h := access.NewGuard(access.GuardOptions{Quota: q}).Middleware(route.Funcs{AcceptFunc: tc.accept, RunFunc: tc.run})
			req := imagineCmd("C1", "U1", "a fox")
			func() {
				defer func() { _ = recover() }() // the bot recovers it
				if h.Accept(req).Run {
					_ = h.Run(t.Context(), req)
				}
			}()
			if got := q.Remaining("U1"); got != 1 {
				t.Errorf("remaining = %d after the panic, want 1", got)
			}
		})
	}
}
