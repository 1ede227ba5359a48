package ledger

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/llm"
	"github.com/llmbot/llmbot/redact"
	"github.com/llmbot/llmbot/state"
)

// rig is a real llm.Client against fakellm under a Meter over a state.Memory.
type rig struct {
	srv  *fakellm.Server
	mem  *state.Memory
	book *Book
	chat *Chat
	img  *Imager
	hook *recorded
}

// recorded is what the hooks heard.
type recorded struct {
	mu       sync.Mutex
	used     []string // place/model/estimated
	refused  []string
	redacted map[string]int
}

func (r *recorded) hooks() Hooks {
	return Hooks{
		Used: func(place string, u Use) {
			r.mu.Lock()
			defer r.mu.Unlock()
			est := "reported"
			if u.Estimated {
				est = "estimated"
			}
			r.used = append(r.used, place+"/"+u.Model+"/"+est)
		},
		Refused: func(place string, e *OverBudget) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.refused = append(r.refused, place+"/"+e.Scope)
		},
		Redacted: func(kind string, n int) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.redacted[kind] += n
		},
	}
}

func newRig(t *testing.T, budgets Budgets, red *redact.Redactor) *rig {
	t.Helper()
	srv := fakellm.New()
	t.Cleanup(srv.Close)
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), APIKey: fakellm.DefaultAPIKey, ChatModel: "chat-m",
		ImageModel: "img-m", MaxRetries: -1, IdleTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := state.NewMemory("a", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	hook := &recorded{redacted: map[string]int{}}
	book := NewBook(mem.Tallies(), budgets, 30*24*time.Hour)
	m := &Meter{Book: book, Redactor: red, Hooks: hook.hooks()}
	return &rig{srv: srv, mem: mem, book: book, chat: m.Chat(c, "chat-m"), img: m.Imager(c, "img-m"), hook: hook}
}

var jane = Who{User: "U1", Channel: "C1", Place: "mention"}

// ask streams one question as w and returns the answer's text and the stream's error.
func (r *rig) ask(t *testing.T, w Who, req llm.ChatRequest) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(With(t.Context(), w), 5*time.Second)
	defer cancel()
	var b strings.Builder
	for chunk, err := range r.chat.Stream(ctx, req) {
		if err != nil {
			return b.String(), err
		}
		b.WriteString(chunk.Content)
	}
	return b.String(), nil
}

func question(text string) llm.ChatRequest {
	return llm.ChatRequest{Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}}
}

func (r *rig) today(t *testing.T, user string) Totals {
	t.Helper()
	rep, err := r.book.Report(t.Context(), Day, user, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Mine
}

// TestCountsWhatEachServerGives: a server that sends usage is counted by its figures; one that
// sends none, and one that refuses stream_options (the client then asks without), by an estimate
// marked as such.
func TestCountsWhatEachServerGives(t *testing.T) {
	for _, tc := range []struct {
		name          string
		reply         func(fakellm.ChatRequest) fakellm.Reply
		wantIn        int64 // 0: an estimate, checked for being positive
		wantOut       int64
		wantEstimated bool
		wantAsked     []bool // include_usage of each request the server got
	}{
		{"sends usage", func(fakellm.ChatRequest) fakellm.Reply {
			return fakellm.Reply{Tokens: []string{"Hi", " there"}, Usage: &fakellm.Usage{PromptTokens: 120, CompletionTokens: 7, TotalTokens: 127}}
		}, 120, 7, false, []bool{true}},
		{"sends none", func(fakellm.ChatRequest) fakellm.Reply {
			return fakellm.Reply{Tokens: []string{"Hi", " there"}, NoUsage: true}
		}, 0, 0, true, []bool{true}},
		{"refuses stream_options", func(req fakellm.ChatRequest) fakellm.Reply {
			if req.Has("stream_options") {
				return fakellm.RefuseStreamOptions()
			}
			return fakellm.Tokens("Hi", " there")
		}, 0, 0, true, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Budgets{}, nil)
			r.srv.SetChat(tc.reply)
			if got, err := r.ask(t, jane, question("What is the capital of France, in a word?")); err != nil || got != "Hi there" {
				t.Fatalf("answer %q, %v", got, err)
			}
			var asked []bool
			for _, req := range r.srv.ChatRequests() {
				asked = append(asked, req.IncludeUsage)
			}
			if !slices.Equal(asked, tc.wantAsked) {
				t.Errorf("include_usage asked %v, want %v", asked, tc.wantAsked)
			}
			got := r.today(t, "U1")
			if tc.wantEstimated {
				if got.Input <= 0 || got.Output <= 0 || got.Estimated != got.Tokens() {
					t.Errorf("estimated use %+v: want tokens, all of them estimated", got)
				}
			} else if got.Input != tc.wantIn || got.Output != tc.wantOut || got.Estimated != 0 {
				t.Errorf("use %+v, want %d in, %d out, none estimated", got, tc.wantIn, tc.wantOut)
			}
			est := map[bool]string{true: "estimated", false: "reported"}[tc.wantEstimated]
			if want := []string{"mention/chat-m/" + est}; !slices.Equal(r.hook.used, want) {
				t.Errorf("hooks heard %v, want %v", r.hook.used, want)
			}
		})
	}
}

// TestCountedPerPersonChannelModel: each request counts for its person, its channel, its model and
// the total, today and this month.
func TestCountedPerPersonChannelModel(t *testing.T) {
	r := newRig(t, Budgets{}, nil)
	r.srv.SetChat(func(req fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Reply{Tokens: []string{"ok"}, Usage: &fakellm.Usage{PromptTokens: 10, CompletionTokens: 2}}
	})
	for _, q := range []struct {
		w     Who
		model string
	}{{jane, ""}, {jane, "big-m"}, {Who{User: "U2", Channel: "C1", Place: "dm"}, ""}} {
		req := question("hi")
		req.Model = q.model
		if _, err := r.ask(t, q.w, req); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []Period{Day, Month} {
		rep, err := r.book.Report(t.Context(), p, "U1", 5)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Mine.Tokens() != 24 || rep.All.Tokens() != 36 {
			t.Errorf("period %d: mine %+v, all %+v; want 24 and 36 tokens", p, rep.Mine, rep.All)
		}
		if got := ids(rep.People); !slices.Equal(got, []string{"U1", "U2"}) {
			t.Errorf("people %v", got)
		}
		if got := ids(rep.Channels); !slices.Equal(got, []string{"C1"}) {
			t.Errorf("channels %v", got)
		}
		if got := ids(rep.Models); !slices.Equal(got, []string{"chat-m", "big-m"}) {
			t.Errorf("models %v", got)
		}
	}
}

func ids(ts []Totals) []string {
	var s []string
	for _, t := range ts {
		s = append(s, t.ID)
	}
	return s
}

// TestBudgetRefusesBeforeTheRequest: once a person's daily budget is spent, the next request
// is refused with an *OverBudget that says when it resets, and nothing reaches the model; the
// channel's budget holds for everyone in it.
func TestBudgetRefusesBeforeTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budgets Budgets
		second  Who
		scope   string
		period  Period
	}{
		{"person daily", Budgets{PersonDay: 100}, jane, "person", Day},
		{"person monthly", Budgets{PersonMonth: 100}, jane, "person", Month},
		{"channel daily", Budgets{ChannelDay: 100}, Who{User: "U2", Channel: "C1", Place: "mention"}, "channel", Day},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.budgets, nil)
			r.srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
				return fakellm.Reply{Tokens: []string{"ok"}, Usage: &fakellm.Usage{PromptTokens: 90, CompletionTokens: 20}}
			})
			if _, err := r.ask(t, jane, question("first")); err != nil {
				t.Fatal(err)
			}
			_, err := r.ask(t, tc.second, question("second"))
			var ob *OverBudget
			if !errors.As(err, &ob) || ob.Scope != tc.scope || ob.Period != tc.period || ob.Limit != 100 {
				t.Fatalf("second request: %v, want the %s budget", err, tc.scope)
			}
			if want := tc.period.Resets(time.Now()); !ob.Resets.Equal(want) {
				t.Errorf("resets %v, want %v", ob.Resets, want)
			}
			if n := len(r.srv.ChatRequests()); n != 1 {
				t.Errorf("the model got %d requests, want 1", n)
			}
			if want := []string{"mention/" + tc.scope}; !slices.Equal(r.hook.refused, want) {
				t.Errorf("refusals heard %v, want %v", r.hook.refused, want)
			}
			if _, err := r.ask(t, Who{User: "U9", Channel: "C9", Place: "dm"}, question("other")); err != nil {
				t.Errorf("someone else elsewhere: %v", err)
			}
		})
	}
}

// TestRedactsEverythingSent: the thread, a file's part, a tool call's arguments and a tool's result
// reach the model with placeholders, the same value the same one across messages; the caller's
// request is left as it was.
func TestRedactsEverythingSent(t *testing.T) {
	red, err := redact.New(redact.Kinds, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Budgets{}, red)
	r.srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Tokens("Done: [EMAIL 1]") })
	req := llm.ChatRequest{Messages: []llm.Message{
		{Role: llm.RoleSystem, Content: "You are helpful. Today is 2026-12-02."},
		{Role: llm.RoleUser, Content: "Mail jane.doe@example.com about card 4111 1111 1111 1111",
			Parts: []llm.Part{{Type: llm.PartText, Text: "contacts.csv: jane.doe@example.com, +44 20 7946 0958"}}},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "send_mail", Arguments: `{"to":"jane.doe@example.com"}`}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: "sent to jane.doe@example.com, cc bob@example.org"},
	}}
	before := req.Messages[1].Content
	got, err := r.ask(t, jane, req)
	if err != nil || got != "Done: [EMAIL 1]" {
		t.Fatalf("answer %q, %v: the placeholder stays in the answer", got, err)
	}
	sent := r.srv.ChatRequests()[0]
	raw := string(sent.Raw)
	for _, secret := range []string{"jane.doe@example.com", "4111 1111 1111 1111", "7946 0958", "bob@example.org"} {
		if strings.Contains(raw, secret) {
			t.Errorf("%q reached the model: %s", secret, raw)
		}
	}
	for _, want := range []string{"[EMAIL 1] about card [CARD 1]", "contacts.csv: [EMAIL 1], [PHONE 1]",
		`{\"to\":\"[EMAIL 1]\"}`, "sent to [EMAIL 1], cc [EMAIL 2]", "Today is 2026-12-02."} {
		if !strings.Contains(raw, want) {
			t.Errorf("the request lacks %q: %s", want, raw)
		}
	}
	if req.Messages[1].Content != before {
		t.Errorf("the caller's message changed: %q", req.Messages[1].Content)
	}
	if want := map[string]int{"EMAIL": 5, "CARD": 1, "PHONE": 1}; !mapsEqual(r.hook.redacted, want) {
		t.Errorf("redactions counted %v, want %v", r.hook.redacted, want)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestImagesCounted: a picture counts for its person by number and size; a failed one counts
// nothing, and a spent budget stops the next before it is asked for.
func TestImagesCounted(t *testing.T) {
	r := newRig(t, Budgets{PersonDay: 10}, nil)
	ctx := With(t.Context(), Who{User: "U1", Channel: "C1", Place: "imagine"})
	img, err := r.img.Image(ctx, llm.ImageRequest{Prompt: "a lighthouse at dusk, oil on canvas, wide"})
	if err != nil {
		t.Fatal(err)
	}
	got := r.today(t, "U1")
	if got.Images != 1 || got.ImageBytes != int64(len(img.Data)) || got.Input == 0 {
		t.Errorf("use %+v, want one picture of %d bytes and its prompt", got, len(img.Data))
	}
	if _, err := r.img.Image(ctx, llm.ImageRequest{Prompt: "again"}); !errors.As(err, new(*OverBudget)) {
		t.Errorf("second picture: %v, want over budget", err)
	}
	if want := []string{"imagine/img-m/estimated"}; !slices.Equal(r.hook.used, want) {
		t.Errorf("hooks heard %v, want %v", r.hook.used, want)
	}
}

// TestFailedRequestCostsNothing: a request the server refuses outright is not counted.
func TestFailedRequestCostsNothing(t *testing.T) {
	r := newRig(t, Budgets{}, nil)
	r.srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.HTTPError(401, fakellm.APIError{Message: "bad key", Type: "invalid_request_error"})
	})
	if _, err := r.ask(t, jane, question("hi")); err == nil {
		t.Fatal("no error")
	}
	if got := r.today(t, "U1"); got != (Totals{ID: "U1"}) {
		t.Errorf("a refused request counted %+v", got)
	}
}

// TestPlaceholdersStableAcrossRounds: a tool round's request is the one before it and more, so the
// values it had keep their placeholders, and a new value in a tool's result gets the next one.
func TestPlaceholdersStableAcrossRounds(t *testing.T) {
	red, err := redact.New(redact.Kinds, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, Budgets{}, red)
	r.srv.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Tokens("ok") })
	first := llm.ChatRequest{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Compare bob@example.org with jane@example.com"},
	}}
	second := first
	second.Messages = append(slices.Clone(first.Messages),
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "lookup", Arguments: `{"who":"jane@example.com"}`}}},
		llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "jane@example.com reports to max@example.net"})
	for _, req := range []llm.ChatRequest{first, second} {
		if _, err := r.ask(t, jane, req); err != nil {
			t.Fatal(err)
		}
	}
	reqs := r.srv.ChatRequests()
	for i, want := range []string{"Compare [EMAIL 1] with [EMAIL 2]", "Compare [EMAIL 1] with [EMAIL 2]"} {
		if got := reqs[i].Messages[0].Content; got != want {
			t.Errorf("round %d: %q, want %q", i+1, got, want)
		}
	}
	if got, want := reqs[1].Messages[2].Content, "[EMAIL 2] reports to [EMAIL 3]"; !strings.Contains(got, want) {
		t.Errorf("the tool's result: %q, want %q in it", got, want)
	}
}
