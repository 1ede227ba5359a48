package main

// End-to-end tests: the same run as main, against the fake Slack (Web API over HTTP, Socket
// Mode over a real WebSocket) and the fake OpenAI-compatible server (SSE).

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/openaischema"
	"github.com/llmbot/llmbot/slackmd"
)

const (
	e2eWait  = 15 * time.Second // bound of every wait
	botToken = "xoxb-e2e-SECRET-bot"
	appToken = "xapp-e2e-SECRET-app"
	llmKey   = "sk-e2e-SECRET-key"
	secret   = "SECRET" // in every credential above; must never reach the logs
)

// syncBuffer is a bytes.Buffer safe for the logger and the test to use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// e2e is one running bot (run) with its fakes.
type e2e struct {
	slack  *fakeslack.Server
	llm    *fakellm.Server
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
	result error
	ended  bool
}

// startE2E runs the bot with env over the defaults until the test ends. Every test also checks
// at the end that no credential appears in the logs (which are at debug level).
// checkModelRequests validates every chat and image request the fake model received against
// OpenAI's schema: what the bot sends must be right for OpenAI, whatever compatible servers accept.
func checkModelRequests(t *testing.T, fl *fakellm.Server) {
	t.Helper()
	doc, err := openaischema.Load()
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]string{"/v1/chat/completions": "CreateChatCompletionRequest", "/v1/images/generations": "CreateImageRequest"}
	for i, r := range fl.Requests() {
		name, ok := schemas[r.Path]
		if !ok || r.Status == http.StatusUnauthorized {
			continue
		}
		if err := doc.Validate(name, r.Body); err != nil {
			t.Errorf("model request %d (%s) is not valid for OpenAI: %v\n%s", i, r.Path, err, r.Body)
		}
	}
}

// checkNoUnfurls checks that every write of text to Slack turned off both link previews: Slack
// fetches a previewed link without anyone clicking it, and the model writes links. (A file's
// comment has no such flags.)
func checkNoUnfurls(t *testing.T, fs *fakeslack.Server) {
	t.Helper()
	for _, w := range fs.Writes() {
		if w.Kind != fakeslack.WriteDelete && w.Kind != fakeslack.WriteFile && (w.UnfurlLinks != "false" || w.UnfurlMedia != "false") {
			t.Errorf("a %s write sent unfurl_links=%q unfurl_media=%q, want both false", w.Kind, w.UnfurlLinks, w.UnfurlMedia)
		}
	}
}

func startE2E(t *testing.T, scfg fakeslack.Config, env map[string]string, flags ...string) *e2e {
	t.Helper()
	return startE2EOn(t, newE2ESlack(scfg), env, flags...)
}

// newE2ESlack is the fake Slack of startE2E, to fill before the bot starts (startE2EOn).
func newE2ESlack(scfg fakeslack.Config) *fakeslack.Server {
	scfg.BotToken, scfg.AppToken = botToken, appToken
	return fakeslack.New(scfg)
}

// startE2EOn is startE2E on fs, made by newE2ESlack.
func startE2EOn(t *testing.T, fs *fakeslack.Server, env map[string]string, flags ...string) *e2e {
	t.Helper()
	fl := fakellm.New()
	fl.SetAPIKey(llmKey)
	full := map[string]string{
		"SLACK_BOT_TOKEN": botToken,
		"SLACK_APP_TOKEN": appToken,
		"OPENAI_API_KEY":  llmKey,
		"OPENAI_BASE_URL": fl.URL(),
		"SLACK_API_URL":   fs.URL(),
		"LOG_LEVEL":       "debug",
		"LOG_FORMAT":      "json",
		"SHUTDOWN_GRACE":  "3s",
		"LLM_MAX_RETRIES": "0",
		"LLM_HEADERS":     "X-Extra=" + secret + "-header",
		// Not the user's cache directory: what a run keeps there (the journal, the usage counts)
		// must not reach the next run's.
		"STATE_DIR": t.TempDir(),
	}
	for k, v := range env {
		full[k] = v
	}
	if v, ok := env["SLACK_API_URL"]; ok && v == "" {
		full["SLACK_API_URL"] = strings.TrimSuffix(fs.URL(), "/") // as a person might write it
	}
	e := &e2e{slack: fs, llm: fl, logs: &syncBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	args := append([]string{"llmbot"}, flags...)
	e.run(ctx, args, full)
	t.Cleanup(func() {
		e.stop(t)
		fl.Close()
		fs.Close()
		checkModelRequests(t, fl)
		checkNoUnfurls(t, fs)
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("a credential appears in the logs:\n%s", e.logs.String())
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("logs:\n%s", e.logs.String())
		}
	})
	e.waitFor(t, "socket mode connection", func() bool { return fs.Connections().Current == 1 })
	return e
}

// e2eEnv is held by a test while its bot reads its settings: run reads them from the process's
// environment, which the tests share. t.Setenv would put each test's back, but forbids
// t.Parallel, and the e2e tests run in parallel: most of their time is spent waiting.
var e2eEnv sync.Mutex

// run starts run with env as the only settings in the environment, and returns once it has read
// them (it has logged, connected or returned: each comes after its settings are read), leaving
// no setting behind in the environment.
func (e *e2e) run(ctx context.Context, args []string, env map[string]string) {
	e2eEnv.Lock()
	defer e2eEnv.Unlock()
	unset := func() {
		for _, s := range settings() {
			_ = os.Unsetenv(s.Name)
		}
		for k := range env {
			_ = os.Unsetenv(k)
		}
	}
	unset()
	defer unset()
	for k, v := range env {
		_ = os.Setenv(k, v)
	}
	go func() { e.done <- run(ctx, args, io.Discard, e.logs) }()
	for e.logs.String() == "" && e.slack.Connections().Total == 0 {
		select {
		case err := <-e.done:
			e.done <- err
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// stop cancels run (as SIGTERM does) and returns its result.
func (e *e2e) stop(t *testing.T) error {
	t.Helper()
	if e.ended {
		return e.result
	}
	e.cancel()
	select {
	case e.result = <-e.done:
	case <-time.After(e2eWait):
		t.Fatal("run did not return after cancel")
	}
	e.ended = true
	return e.result
}

func (e *e2e) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for !cond() {
		select {
		case err := <-e.done:
			e.done <- err
			t.Fatalf("run returned %v while waiting for %s", err, what)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// botReplies returns the texts of the bot's messages in a thread.
func (e *e2e) botReplies(channel, threadTS string) []string {
	var out []string
	for _, m := range e.slack.BotReplies(channel, threadTS) {
		out = append(out, m.Text)
	}
	return out
}

// markOf reads the bot's mark from a stored message's metadata.
func markOf(t *testing.T, m fakeslack.Message) convo.Mark {
	t.Helper()
	var md struct {
		EventType    string         `json:"event_type"`
		EventPayload map[string]any `json:"event_payload"`
	}
	if len(m.Metadata) == 0 {
		return convo.Mark{}
	}
	if err := json.Unmarshal(m.Metadata, &md); err != nil {
		t.Fatalf("metadata %s: %v", m.Metadata, err)
	}
	kind, _ := md.EventPayload["kind"].(string)
	note, _ := md.EventPayload["note"].(string)
	return convo.Mark{Kind: convo.MarkKind(kind), Note: note}
}

// finished counts the replies the bot has finished (its one log line per reply).
func (e *e2e) finished(t *testing.T) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if line == "" {
			continue
		}
		var l struct {
			Logger, Msg, Kind string
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if l.Logger == "bot" && l.Kind == "reply" {
			n++
		}
	}
	return n
}

// final waits until the bot has finished replies answers in all, and returns the bot's
// messages in the thread, checking there are n of them.
func (e *e2e) final(t *testing.T, channel, threadTS string, n, replies int) []fakeslack.Message {
	t.Helper()
	e.waitFor(t, "the reply to finish", func() bool { return e.finished(t) >= replies })
	msgs := e.slack.BotReplies(channel, threadTS)
	if len(msgs) != n {
		t.Fatalf("%d bot messages in the thread, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if k := markOf(t, m).Kind; k == "" || k == convo.MarkPlaceholder || m.Streaming {
			t.Errorf("message %d is not final: mark %q, streaming %v, text %q", i, k, m.Streaming, m.Text)
		}
	}
	return msgs
}

const answer = "Four. Two plus two is four, and that has been true for a long time in every base above four."

func TestE2EThreadMention(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(answer).Paced(50*time.Millisecond, 30*time.Millisecond)
	})
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	msgs := e.final(t, "C1", ts, 1, 1)
	if msgs[0].Text != answer {
		t.Errorf("final text %q, want the model's answer %q", msgs[0].Text, answer)
	}
	if k := markOf(t, msgs[0]); k.Kind != convo.MarkAnswer || k.Note != "" {
		t.Errorf("mark %+v, want a plain answer", k)
	}
	reqs := e.llm.ChatRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d chat requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "gpt-5.4-mini" || !r.Stream || r.Has("temperature") {
		t.Errorf("request model %q stream %v temperature sent %v", r.Model, r.Stream, r.Has("temperature"))
	}
	if r.Header.Get("X-Extra") != secret+"-header" {
		t.Errorf("LLM_HEADERS not sent: %v", r.Header)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[1].Role != "user" ||
		!strings.Contains(r.Messages[1].Content, "what is 2+2?") || strings.Contains(r.Messages[1].Content, "<@UBOT>") {
		t.Errorf("messages %+v: want system, then the user's question without the mention", r.Messages)
	}
	// The answer was streamed: several visible versions, growing, before the final one.
	var versions []string
	for _, w := range e.slack.Writes() {
		if w.TS == msgs[0].TS && (w.Kind == fakeslack.WritePost || w.Kind == fakeslack.WriteUpdate) {
			versions = append(versions, w.Text)
		}
	}
	if len(versions) < 3 {
		t.Errorf("%d writes of the reply (%q), want a placeholder, partial text and the final text", len(versions), versions)
	}
	partial := 0
	for _, v := range versions {
		if v != "" && v != answer && strings.HasPrefix(answer, v) {
			partial++
		}
	}
	if partial == 0 {
		t.Errorf("no partial answer was shown before the final text: %q", versions)
	}
}

func TestE2EDirectMessage(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{
		"TEMPERATURE": "0", "CHAT_MODEL": "local-model", "SLACK_API_URL": "", // set below, without its slash
	})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Hi there, how can I help?") })
	e.slack.PostUserMessage("D1", "U1", "", "hello")
	var got []string
	e.waitFor(t, "DM answer", func() bool {
		got = nil
		for _, m := range e.slack.Messages("D1") {
			if m.BotID != "" && markOf(t, m).Kind == convo.MarkAnswer {
				got = append(got, m.Text)
			}
		}
		return len(got) == 1 && got[0] == "Hi there, how can I help?"
	})
	reqs := e.llm.ChatRequests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].Messages[len(reqs[0].Messages)-1].Content, "hello") {
		t.Fatalf("chat requests %+v", reqs)
	}
	if r := reqs[0]; r.Model != "local-model" || r.Temperature == nil || *r.Temperature != 0 {
		t.Errorf("request model %q temperature %v: want local-model and 0 (TEMPERATURE=0 is sent)", r.Model, r.Temperature)
	}
}

func TestE2EFollowUpWithoutMention(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	var n int
	var mu sync.Mutex
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			return fakellm.Text("Paris.")
		}
		return fakellm.Text("About two million people.")
	})
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> capital of France?")
	e.final(t, "C1", ts, 1, 1)
	e.slack.PostUserMessage("C1", "U1", ts, "and how many live there?")
	msgs := e.final(t, "C1", ts, 2, 2)
	if msgs[1].Text != "About two million people." {
		t.Errorf("follow-up answer %q", msgs[1].Text)
	}
	reqs := e.llm.ChatRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests, want 2", len(reqs))
	}
	var roles []string
	for _, m := range reqs[1].Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "system,user,assistant,user" || reqs[1].Messages[2].Content != "Paris." {
		t.Errorf("follow-up request roles %v messages %+v", roles, reqs[1].Messages)
	}
}

func TestE2ELongAnswerSplit(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	long := fakellm.Answer(2600, 7)
	for len(long) < 10000 {
		long += "\n\n" + fakellm.Answer(200, uint64(len(long)))
	}
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(long) })
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> tell me everything")
	want := slackmd.Split(long, slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)
	if len(want) < 3 {
		t.Fatalf("the answer (%d chars) splits into %d parts; the test wants at least 3", len(long), len(want))
	}
	// Parts are committed while the answer streams, so their boundaries may differ from a split
	// of the whole answer; the text they carry together may not.
	var got []string
	e.waitFor(t, "the reply to finish", func() bool { return e.finished(t) >= 1 })
	for _, m := range e.slack.BotReplies("C1", ts) {
		got = append(got, m.Text)
		if n := len([]rune(m.Text)); n > 4000 {
			t.Errorf("part %d is %d characters, over chat.update's 4,000", len(got), n)
		}
		if k := markOf(t, m); k.Kind != convo.MarkAnswer || k.Note != "" {
			t.Errorf("part %d mark %+v, want a plain answer", len(got), k)
		}
	}
	if len(got) < len(want)-1 || len(got) > len(want)+1 {
		t.Errorf("%d parts, want about %d", len(got), len(want))
	}
	if g, w := strings.Join(got, "\n\n"), strings.Join(want, "\n\n"); g != w {
		t.Errorf("the parts together differ from the answer:\n got %q\nwant %q", g, w)
	}
}

func TestE2EImagine(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"IMAGE_SIZE": "1024x1536", "IMAGE_QUALITY": "low"})
	img := fakellm.PNG(64, 48)
	e.llm.SetImage(func(fakellm.ImageRequest) fakellm.ImageReply {
		return fakellm.ImageReply{Image: img, RevisedPrompt: "a red fox in fresh snow"}
	})
	e.slack.SlashCommand("C1", "U1", "/imagine", "a fox in the snow")
	e.waitFor(t, "shared image", func() bool {
		f := e.slack.Files()
		return len(f) == 1 && f[0].Shared
	})
	f := e.slack.Files()[0]
	if !bytes.Equal(f.Bytes, img) {
		t.Errorf("uploaded %d bytes, want the model's %d bytes exactly", len(f.Bytes), len(img))
	}
	shown, _ := e.slack.Message(f.Channel, f.MessageTS) // with BUTTONS, the comment is a section above the button
	comment := f.InitialComment + shown.SectionText()
	if f.Channel != "C1" || !strings.Contains(comment, "<@U1>") || !strings.Contains(comment, "a fox in the snow") {
		t.Errorf("file %+v: want it in C1, crediting <@U1> and the prompt", f)
	}
	// The ack was sent before the job started, but it reaches the fake over the socket, the
	// picture over HTTP: wait for it. Its bound is Slack's (3 s, then the user sees an error).
	e.waitFor(t, "the ack", func() bool { return len(e.slack.Acks()) >= 1 })
	acks := e.slack.Acks()
	if len(acks) != 1 || !strings.Contains(string(acks[0].Payload), "Generating") || acks[0].Latency > 3*time.Second {
		t.Errorf("acks %+v: want one ephemeral 'Generating' ack within Slack's 3 s", acks)
	}
	if reqs := e.llm.Requests(); len(reqs) != 1 || reqs[0].Image == nil || reqs[0].Image.Model != "gpt-image-2" ||
		reqs[0].Image.Prompt != "a fox in the snow" || reqs[0].Image.Size != "1024x1536" || reqs[0].Image.Quality != "low" {
		t.Errorf("image requests %+v", reqs)
	}
}

func TestE2ESameEnvelopeTwice(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(answer).Paced(100*time.Millisecond, 10*time.Millisecond)
	})
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	var mention string
	e.waitFor(t, "app_mention envelope", func() bool {
		for _, env := range e.slack.Envelopes() {
			if env.EventType == "app_mention" && !env.Acked.IsZero() {
				mention = env.ID
				return true
			}
		}
		return false
	})
	e.slack.Redeliver(mention) // while the answer is being written
	e.final(t, "C1", ts, 1, 1)
	e.slack.Redeliver(mention) // after it
	e.slack.PostUserMessage("D1", "U1", "", "marker")
	e.waitFor(t, "marker answer", func() bool { return len(e.llm.ChatRequests()) == 2 })
	if got := len(e.slack.BotReplies("C1", ts)); got != 1 {
		t.Errorf("%d bot replies in the thread, want 1", got)
	}
	for _, env := range e.slack.Envelopes() {
		if env.Acked.IsZero() {
			t.Errorf("envelope %s (%s) not acked", env.ID, env.EventType)
		}
	}
}

func TestE2ERefreshMidAnswer(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(answer).Paced(50*time.Millisecond, 60*time.Millisecond)
	})
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	e.waitFor(t, "first visible text", func() bool {
		r := e.botReplies("C1", ts)
		return len(r) == 1 && strings.HasPrefix(r[0], "Four")
	})
	e.slack.Disconnect("refresh_requested")
	msgs := e.final(t, "C1", ts, 1, 1)
	if msgs[0].Text != answer {
		t.Errorf("final text %q, want %q", msgs[0].Text, answer)
	}
	e.waitFor(t, "reconnect", func() bool { return e.slack.Connections().Total == 2 && e.slack.Connections().Current == 1 })
	e.slack.PostUserMessage("D1", "U1", "", "still there?")
	e.waitFor(t, "answer after the refresh", func() bool { return len(e.llm.ChatRequests()) == 2 })
}

func TestE2ERateLimitedEdits(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(answer).Paced(20*time.Millisecond, 40*time.Millisecond)
	})
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	e.waitFor(t, "first visible text", func() bool {
		r := e.botReplies("C1", ts)
		return len(r) == 1 && strings.HasPrefix(r[0], "Four")
	})
	for range 3 {
		e.slack.RateLimitNext("chat.update", time.Second)
	}
	msgs := e.final(t, "C1", ts, 1, 1)
	if msgs[0].Text != answer {
		t.Errorf("final text %q, want %q", msgs[0].Text, answer)
	}
	if n := e.slack.Count429("chat.update"); n == 0 {
		t.Errorf("no 429 was answered; the test did not test anything")
	}
}

func TestE2EModelFailuresAreShown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		reply fakellm.Reply
		env   map[string]string
		note  string // in the final text
		keep  string // partial answer kept
	}{
		{"500", fakellm.HTTPError(http.StatusInternalServerError, fakellm.APIError{Message: "boom", Type: "server_error"}),
			nil, "busy", ""},
		{"cut mid-stream", fakellm.Text(answer).CutAfter(4), nil, "cut off", "Four."},
		{"stall", fakellm.Text(answer).StallAfter(4), map[string]string{"LLM_IDLE_TIMEOUT": "700ms"}, "cut off", "Four."},
		{"bad request", fakellm.HTTPError(http.StatusBadRequest, fakellm.APIError{Message: "This model's maximum context length is 10 tokens.", Type: "invalid_request_error", Code: "context_length_exceeded"}),
			nil, "maximum context length", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startE2E(t, fakeslack.Config{}, tc.env)
			e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return tc.reply })
			ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
			msgs := e.final(t, "C1", ts, 1, 1)
			text := msgs[0].Text
			if !strings.Contains(text, tc.note) || !strings.HasPrefix(text, tc.keep) {
				t.Errorf("final text %q: want the partial answer %q and a note containing %q", text, tc.keep, tc.note)
			}
			if strings.Contains(text, "Thinking") {
				t.Errorf("placeholder left in %q", text)
			}
		})
	}
}

func TestE2EShutdownMidAnswer(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"SHUTDOWN_GRACE": "2s"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer).StallAfter(4) })
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	e.waitFor(t, "partial answer", func() bool {
		r := e.botReplies("C1", ts)
		return len(r) == 1 && strings.HasPrefix(r[0], "Four")
	})
	begin := time.Now()
	if err := e.stop(t); err != nil {
		t.Errorf("run returned %v after SIGTERM, want nil (exit 0)", err)
	}
	if took := time.Since(begin); took > 6*time.Second {
		t.Errorf("shutdown took %v with a 2s grace period", took)
	}
	msgs := e.slack.BotReplies("C1", ts)
	if len(msgs) != 1 {
		t.Fatalf("%d bot replies, want 1", len(msgs))
	}
	text := msgs[0].Text
	if !strings.HasPrefix(text, "Four.") || !strings.Contains(text, "Interrupted") || strings.Contains(text, "Thinking") {
		t.Errorf("final text %q: want the partial answer with an interrupted note", text)
	}
	if e.llm.Counts().ClientGone != 1 {
		t.Errorf("the model request was not cancelled: %+v", e.llm.Counts())
	}
}

func TestE2EBadBotToken(t *testing.T) {
	fs := fakeslack.New(fakeslack.Config{BotToken: botToken, AppToken: appToken})
	t.Cleanup(fs.Close)
	logs := &syncBuffer{}
	env := map[string]string{
		"SLACK_BOT_TOKEN": "xoxb-wrong-" + secret, "SLACK_APP_TOKEN": appToken, "OPENAI_API_KEY": llmKey,
		"SLACK_API_URL": fs.URL(), "LOG_FORMAT": "json",
	}
	ctx, cancel := context.WithTimeout(context.Background(), e2eWait)
	defer cancel()
	setEnv(t, env)
	err := run(ctx, []string{"llmbot"}, io.Discard, logs)
	if err == nil || !strings.Contains(err.Error(), "rejected SLACK_BOT_TOKEN (invalid_auth)") {
		t.Errorf("run with a bad bot token: %v", err)
	}
	if err != nil && strings.Contains(err.Error()+logs.String(), secret) {
		t.Errorf("the token leaked: %v\n%s", err, logs.String())
	}
}

func TestE2ENativeStreaming(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"REPLY_MODE": "stream"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(answer).Paced(20*time.Millisecond, 20*time.Millisecond)
	})
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	msgs := e.final(t, "C1", ts, 1, 1)
	if msgs[0].Text != answer || !msgs[0].Markdown {
		t.Errorf("streamed message %+v: want the answer as Markdown", msgs[0])
	}
	starts := e.slack.CallsTo("chat.startStream")
	if len(starts) != 1 {
		t.Fatalf("%d chat.startStream calls, want 1", len(starts))
	}
	p := starts[0].Params
	if p.Get("recipient_user_id") != "U1" || p.Get("recipient_team_id") != "T1" || p.Get("thread_ts") != ts {
		t.Errorf("chat.startStream params %v: want recipient U1/T1 in thread %s", p, ts)
	}
	if len(e.slack.CallsTo("chat.stopStream")) != 1 {
		t.Errorf("the stream was not stopped")
	}
}

func TestE2ENativeStreamingRefusedFallsBack(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"REPLY_MODE": "stream"})
	e.slack.SetStreaming("feature_not_enabled")
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer) })
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	msgs := e.final(t, "C1", ts, 1, 1)
	if msgs[0].Text != answer || msgs[0].Markdown {
		t.Errorf("fallback message %+v: want the answer as mrkdwn text", msgs[0])
	}
}

func TestE2EStopButton(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"REPLY_MODE": "stream"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(strings.Repeat(answer+" ", 20)).Paced(10*time.Millisecond, 30*time.Millisecond)
	})
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> talk a lot")
	var streamTS string
	e.waitFor(t, "streamed text", func() bool {
		m := e.slack.BotReplies("C1", ts)
		if len(m) == 1 && m[0].Streaming && strings.HasPrefix(m[0].Text, "Four") {
			streamTS = m[0].TS
			return true
		}
		return false
	})
	e.slack.PressStop("C1", streamTS)
	msgs := e.final(t, "C1", ts, 1, 1)
	if !strings.HasPrefix(msgs[0].Text, "Four") || len(msgs[0].Text) > 20*len(answer) {
		t.Errorf("text after stop %q: want the part streamed so far", msgs[0].Text)
	}
	e.waitFor(t, "model request cancelled", func() bool { return e.llm.Counts().ClientGone == 1 })
}

func TestE2ENoLoopOnOwnMessages(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{EchoBotMessages: true}, nil)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply {
		return fakellm.Text(answer).Paced(10*time.Millisecond, 20*time.Millisecond)
	})
	e.slack.PostUserMessage("D1", "U1", "", "hello")
	e.waitFor(t, "first answer", func() bool { return e.finished(t) == 1 })
	e.slack.PostUserMessage("D1", "U1", "", "marker")
	e.waitFor(t, "marker answer", func() bool { return e.finished(t) == 2 })
	if n := len(e.llm.ChatRequests()); n != 2 {
		t.Errorf("%d chat requests, want 2: the bot answered its own posts or edits", n)
	}
	echoes := 0
	for _, env := range e.slack.Envelopes() {
		if env.EventType == "message" {
			echoes++
		}
	}
	if echoes < 4 {
		t.Errorf("only %d message events; the fake did not echo the bot's writes", echoes)
	}
}

func TestE2EImagineRejected(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, nil)
	e.llm.SetImage(func(fakellm.ImageRequest) fakellm.ImageReply { return fakellm.ModerationBlocked() })
	e.slack.SlashCommand("C1", "U1", "/imagine", "something forbidden")
	e.waitFor(t, "private reason", func() bool { return len(e.slack.ResponseURLPosts()) == 1 })
	p := e.slack.ResponseURLPosts()[0]
	if p.ResponseType != "ephemeral" || !strings.Contains(p.Text, "safety system") {
		t.Errorf("response_url post %+v: want the provider's reason, privately", p)
	}
	if len(e.slack.Files()) != 0 {
		t.Errorf("a file was uploaded")
	}
}

func TestE2EConcurrentRepliesUnderSlackLimits(t *testing.T) {
	t.Parallel()
	limits := fakeslack.SlackLimits(5)
	// Slack's shape, faster. Slack counts a call when it arrives, the bot's bucket (burst 5) when it
	// grants it: right after the opening burst the bot's 3% rate margin has built no slack yet, so a
	// first call delivered 12 ms slower than the sixth (a new connection, CPU contention under -race)
	// got a 429 with a burst of 5 on both sides. Two tokens of burst over the bot's absorb 0.8 s of
	// such delivery jitter; the rate is Slack's, and the bot's 8 replies want ~230 edits unpaced.
	limits.Methods["chat.update"] = fakeslack.Limit{PerMinute: 150, Burst: 7}
	e := startE2E(t, fakeslack.Config{Limits: limits}, map[string]string{"EDIT_BUDGET_PER_MINUTE": "150"})
	e.llm.SetChat(func(r fakellm.ChatRequest) fakellm.Reply {
		q := r.Messages[len(r.Messages)-1].Content
		return fakellm.Text("Answer to "+q+": "+answer).Paced(50*time.Millisecond, 25*time.Millisecond)
	})
	const n = 8
	threads := make([]string, n)
	for i := range n {
		threads[i] = e.slack.PostUserMessage("C"+string(rune('A'+i)), "U1", "", "<@UBOT> q"+string(rune('a'+i)))
	}
	e.waitFor(t, "all replies", func() bool { return e.finished(t) == n })
	// An answer whose last edit would wait for its turn ends with the rest posted below what its
	// message shows: one or two messages, reading as the answer.
	for i, ts := range threads {
		msgs := e.slack.BotReplies("C"+string(rune('A'+i)), ts)
		var texts []string
		for _, m := range msgs {
			texts = append(texts, m.Text)
		}
		want := "Answer to q" + string(rune('a'+i)) + ": " + answer
		if got := strings.Join(texts, " "); len(msgs) > 2 || got != want {
			t.Errorf("thread %d: %d messages showing %q; want %q in one or two", i, len(msgs), got, want)
		}
	}
	// The bot cannot know Slack's workspace-wide burst for chat.postMessage or
	// conversations.replies (it honours their 429s); chat.update it paces itself.
	t.Logf("chat.update calls %d; 429s: chat.update %d, chat.postMessage %d, conversations.replies %d",
		len(e.slack.CallsTo("chat.update")), e.slack.Count429("chat.update"),
		e.slack.Count429("chat.postMessage"), e.slack.Count429("conversations.replies"))
	if n := e.slack.Count429("chat.update"); n != 0 {
		t.Errorf("%d chat.update 429s from a fresh start with EDIT_BUDGET_PER_MINUTE at Slack's limit", n)
	}
}

// TestE2EShutdownBoundedBySlowSlack: when Slack makes the final write wait (a 429 with a long
// Retry-After), shutdown still ends within the grace period (Kubernetes kills the pod soon after),
// and the interrupted note is posted in the thread instead.
func TestE2EShutdownBoundedBySlowSlack(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fakeslack.Config{}, map[string]string{"SHUTDOWN_GRACE": "2s"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer).StallAfter(4) })
	ts := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	e.waitFor(t, "partial answer", func() bool {
		r := e.botReplies("C1", ts)
		return len(r) == 1 && strings.HasPrefix(r[0], "Four")
	})
	for range 3 {
		e.slack.RateLimitNext("chat.update", 5*time.Second)
	}
	begin := time.Now()
	if err := e.stop(t); err != nil {
		t.Errorf("run returned %v after SIGTERM, want nil (exit 0)", err)
	}
	if took := time.Since(begin); took > 4500*time.Millisecond { // 2s and scheduling noise; it took 11s before
		t.Errorf("shutdown took %v with a 2s grace period", took)
	}
	// The edit cannot land in time: the partial answer stays and the note follows it in the thread.
	if r := e.botReplies("C1", ts); len(r) != 2 || !strings.HasPrefix(r[0], "Four") || !strings.Contains(r[1], "The answer above was interrupted") {
		t.Errorf("replies %q: want the partial answer kept, then the interrupted note", r)
	}
}
