package main

// End-to-end tests of what a team runs the bot with (README: "Running it for a team") through the
// real wiring (run, as main calls it): the health listener's /healthz, /readyz and /metrics over
// HTTP, access control from the settings, and per-channel overrides from CHANNEL_CONFIG.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmbot/llmbot/access"
	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/route"
)

// freeAddr returns a loopback address with a port nobody listens on now, for HEALTH_ADDR.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// health is a client of the bot's health listener.
type health struct {
	base   string
	client *http.Client
}

func (h health) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := h.client.Get(h.base + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// scrape reads /metrics and returns the families, checking that no credential is in them.
func (h health) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	status, body := h.get(t, "/metrics")
	if status != http.StatusOK {
		t.Fatalf("GET /metrics = %d %q", status, body)
	}
	if strings.Contains(body, secret) {
		t.Fatalf("a credential appears in /metrics")
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	return families
}

// sample is one series of a scrape: a counter's or gauge's value, a histogram's count and sum.
type sample struct{ value, count, sum float64 }

// series returns the series of name with labels (a subset of its labels), or ok false.
func series(families map[string]*dto.MetricFamily, name string, labels map[string]string) (sample, bool) {
	f := families[name]
	if f == nil {
		return sample{}, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return sample{value: m.GetCounter().GetValue()}, true
		case m.Gauge != nil:
			return sample{value: m.GetGauge().GetValue()}, true
		case m.Histogram != nil:
			return sample{count: float64(m.GetHistogram().GetSampleCount()), sum: m.GetHistogram().GetSampleSum()}, true
		}
	}
	return sample{}, false
}

// sum adds the values of every series of a counter family.
func sum(families map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	return total
}

// slashAcks returns the text of every slash command ack, in order, checking that each is
// private (Slack shows an ack without response_type "in_channel" only to the person).
func slashAcks(t *testing.T, fs *fakeslack.Server) []string {
	t.Helper()
	var out []string
	for _, a := range fs.Acks() {
		if a.Type != "slash_commands" || len(a.Payload) == 0 {
			continue
		}
		var p struct {
			Text         string `json:"text"`
			ResponseType string `json:"response_type"`
		}
		if err := json.Unmarshal(a.Payload, &p); err != nil {
			t.Fatalf("ack payload %s: %v", a.Payload, err)
		}
		if p.ResponseType == "in_channel" {
			t.Errorf("ack %q is public", p.Text)
		}
		out = append(out, p.Text)
	}
	return out
}

// startWithHealth runs the bot with the health listener on and waits until /readyz says ready.
func startWithHealth(t *testing.T, env map[string]string) (*e2e, health) {
	t.Helper()
	addr := freeAddr(t)
	full := map[string]string{"HEALTH_ADDR": addr}
	for k, v := range env {
		full[k] = v
	}
	e := startE2E(t, fakeslack.Config{}, full)
	h := health{base: "http://" + addr, client: &http.Client{Timeout: 5 * time.Second}}
	e.waitFor(t, "/readyz 200", func() bool { s, _ := h.get(t, "/readyz"); return s == http.StatusOK })
	return e, h
}

// A scripted conversation through the real wiring moves every metric the README lists: replies by
// outcome, time to first token and to first visible text, answer duration, tokens from the
// provider's usage, Slack API calls and 429s by method, edits per reply, image generations by
// outcome and latency, replies in flight, duplicate envelopes dropped, reconnects; and /readyz
// flips while Socket Mode is down.
func TestE2EOperations(t *testing.T) {
	t.Parallel()
	e, h := startWithHealth(t, nil)
	if s, body := h.get(t, "/healthz"); s != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", s, body)
	}

	// 1. An answer that stalls: in flight while it streams, then stopped by the asker.
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text(answer).StallAfter(4) })
	q1 := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> what is 2+2?")
	var partial fakeslack.Message
	e.waitFor(t, "partial answer", func() bool {
		ms := e.slack.BotReplies("C1", q1)
		if len(ms) == 1 && strings.HasPrefix(ms[0].Text, "Four") && buttonsOf(ms[0]) == route.ActionStop {
			partial = ms[0]
			return true
		}
		return false
	})
	if got, _ := series(h.scrape(t), "llmbot_in_flight", map[string]string{"kind": "reply"}); got.value != 1 {
		t.Errorf("replies in flight while one streams = %v, want 1", got.value)
	}
	e.click(t, "C1", partial.TS, "U1", route.ActionStop)
	e.final(t, "C1", q1, 1, 1)

	// 2. A whole answer, with chat.update rate limited once; the provider reports usage
	// because the bot asks for it (stream_options.include_usage), not because the test says so.
	reply := fakellm.Text(answer).Paced(20*time.Millisecond, 20*time.Millisecond)
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return reply })
	q2 := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> and 3+3?")
	e.waitFor(t, "first visible text", func() bool {
		ms := e.slack.BotReplies("C1", q2)
		return len(ms) == 1 && strings.HasPrefix(ms[0].Text, "Four")
	})
	e.slack.RateLimitNext("chat.update", 200*time.Millisecond)
	e.final(t, "C1", q2, 1, 2)
	reqs := e.llm.ChatRequests()
	if len(reqs) != 2 || !reqs[1].IncludeUsage || reqs[1].Model != "gpt-5.4-mini" {
		t.Fatalf("chat requests %+v: want 2, the second asking for usage", reqs)
	}
	prompt := 0
	for _, m := range reqs[1].Messages { // the fake's usage estimate
		prompt += len(m.Content)/4 + 4
	}
	completion := len(reply.Tokens)

	// 3. The same mention delivered again: dropped as a duplicate.
	before := sum(h.scrape(t), "llmbot_duplicates_dropped_total")
	var mention string
	for _, env := range e.slack.Envelopes() {
		if env.EventType == "app_mention" {
			mention = env.ID // the last one: q2's
		}
	}
	e.slack.Redeliver(mention)
	e.waitFor(t, "the duplicate counted", func() bool {
		return sum(h.scrape(t), "llmbot_duplicates_dropped_total") == before+1
	})

	// 4. /imagine.
	e.llm.SetImage(func(fakellm.ImageRequest) fakellm.ImageReply { return fakellm.ImageReply{Image: fakellm.PNG(8, 8)} })
	e.slack.SlashCommand("C1", "U1", "/imagine", "a lighthouse")
	e.waitFor(t, "shared image", func() bool { f := e.slack.Files(); return len(f) == 1 && f[0].Shared })

	// 5. The connection drops and its reconnect is rate limited: /readyz says so, then recovers.
	e.slack.RateLimitNext("apps.connections.open", 2*time.Second)
	e.slack.DropConnections()
	e.waitFor(t, "/readyz 503", func() bool { s, _ := h.get(t, "/readyz"); return s == http.StatusServiceUnavailable })
	if s, body := h.get(t, "/readyz"); s == http.StatusServiceUnavailable && !strings.Contains(body, "Socket Mode disconnected") {
		t.Errorf("/readyz while reconnecting says %q, want the reason", body)
	}
	e.waitFor(t, "/readyz 200 again", func() bool { s, _ := h.get(t, "/readyz"); return s == http.StatusOK })

	var f map[string]*dto.MetricFamily
	e.waitFor(t, "the /imagine job counted", func() bool {
		f = h.scrape(t)
		got, _ := series(f, "llmbot_imagine_total", map[string]string{"outcome": "ok"})
		return got.value == 1
	})
	updates429 := float64(e.slack.Count429("chat.update"))
	if updates429 == 0 {
		t.Error("no chat.update was answered 429: the test tested nothing there")
	}
	want := []struct {
		name   string
		labels map[string]string
		want   sample
	}{
		{"llmbot_replies_total", map[string]string{"outcome": "stopped"}, sample{value: 1}},
		{"llmbot_replies_total", map[string]string{"outcome": "ok"}, sample{value: 1}},
		{"llmbot_in_flight", map[string]string{"kind": "reply"}, sample{value: 0}},
		{"llmbot_tokens_total", map[string]string{"model": "gpt-5.4-mini", "type": "prompt"}, sample{value: float64(prompt)}},
		{"llmbot_tokens_total", map[string]string{"model": "gpt-5.4-mini", "type": "completion"}, sample{value: float64(completion)}},
		{"llmbot_slack_api_calls_total", map[string]string{"method": "chat.update", "status": "429"}, sample{value: updates429}},
		{"llmbot_slack_rate_limited_total", map[string]string{"method": "chat.update"}, sample{value: updates429}},
		{"llmbot_slack_rate_limited_total", map[string]string{"method": "apps.connections.open"}, sample{value: 1}},
		{"llmbot_slack_api_calls_total", map[string]string{"method": "chat.postMessage", "status": "2xx"}, sample{value: 2}},
		{"llmbot_image_generations_total", map[string]string{"outcome": "ok"}, sample{value: 1}},
		{"llmbot_in_flight", map[string]string{"kind": "imagine"}, sample{value: 0}},
		{"llmbot_socket_reconnects_total", nil, sample{value: 1}},
		{"llmbot_socket_connected", nil, sample{value: 1}},
	}
	for _, w := range want {
		if got, ok := series(f, w.name, w.labels); !ok || got.value != w.want.value {
			t.Errorf("%s%v = %v (found %v), want %v", w.name, w.labels, got.value, ok, w.want.value)
		}
	}
	// Histograms: one observation per reply (two) or per picture (one).
	for name, n := range map[string]float64{
		"llmbot_time_to_first_token_seconds": 2,
		"llmbot_time_to_first_text_seconds":  2,
		"llmbot_reply_duration_seconds":      2,
		"llmbot_edits_per_reply":             2,
		"llmbot_image_generation_seconds":    1,
		"llmbot_imagine_duration_seconds":    1,
	} {
		if got, ok := series(f, name, nil); !ok || got.count != n {
			t.Errorf("%s has %v observations (found %v), want %v", name, got.count, ok, n)
		}
	}
	// Edits per reply counts the chat.update calls that went through (the 429s are retried).
	edits, _ := series(f, "llmbot_edits_per_reply", nil)
	if ok := float64(e.slack.CallCount("chat.update")) - updates429; edits.sum != ok {
		t.Errorf("edits per reply add up to %v, want the %v chat.update calls Slack accepted", edits.sum, ok)
	}
}

// Access control from the settings: a denied user is told once, privately, in a channel, in a DM
// and on /imagine, and gets no answer and costs no model request; an allowed user is answered
// and stops at the daily /imagine quota. Refusals are counted by feature.
func TestE2EAccessControl(t *testing.T) {
	t.Parallel()
	e, h := startWithHealth(t, map[string]string{
		"DENY_USERS":          "U0MALLORY",
		"IMAGINE_DAILY_QUOTA": "1",
		"ACCESS_DENIED_TEXT":  "Not for you here; ask in #it-help.",
	})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Sure thing.") })
	e.llm.SetImage(func(fakellm.ImageRequest) fakellm.ImageReply { return fakellm.ImageReply{Image: fakellm.PNG(8, 8)} })
	const refusal = "Not for you here; ask in #it-help."

	inChannel := e.slack.PostUserMessage("C1", "U0MALLORY", "", "<@UBOT> hello?")
	e.waitFor(t, "the notice in the channel", func() bool { return len(e.privateTo("U0MALLORY")) == 1 })
	inDM := e.slack.PostUserMessage("D1", "U0MALLORY", "", "hello?")
	e.waitFor(t, "the notice in the DM", func() bool { return len(e.privateTo("U0MALLORY")) == 2 })
	for i, text := range e.privateTo("U0MALLORY") {
		if text != refusal {
			t.Errorf("notice %d = %q, want %q", i+1, text, refusal)
		}
	}
	e.slack.SlashCommand("C1", "U0MALLORY", "/imagine", "a lighthouse")
	e.waitFor(t, "the /imagine refusal", func() bool { return len(slashAcks(t, e.slack)) == 1 })
	if got := slashAcks(t, e.slack)[0]; got != refusal {
		t.Errorf("/imagine refused with %q, want %q", got, refusal)
	}
	var where []string
	for _, m := range e.slack.Ephemerals() {
		where = append(where, m.Channel+"/"+m.ThreadTS)
	}
	// In the agent pane (AGENT_VIEW) a DM message is its own thread: the notice goes there.
	if want := []string{"C1/" + inChannel, "D1/" + inDM}; fmt.Sprint(where) != fmt.Sprint(want) {
		t.Errorf("private notices went to %v, want %v (the mention's thread, the DM message's)", where, want)
	}

	// An allowed user: answered; one picture, then the quota.
	q := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> hello?")
	e.final(t, "C1", q, 1, 1) // refusals run nothing
	e.slack.SlashCommand("C1", "U1", "/imagine", "a fox")
	e.waitFor(t, "the picture", func() bool { f := e.slack.Files(); return len(f) == 1 && f[0].Shared })
	e.slack.SlashCommand("C1", "U1", "/imagine", "another fox")
	e.waitFor(t, "the quota notice", func() bool { return len(slashAcks(t, e.slack)) == 3 })
	if got := slashAcks(t, e.slack)[2]; !strings.Contains(got, "/imagine picture for today") {
		t.Errorf("second /imagine told %q, want the daily quota message", got)
	}

	// Nothing public for the denied user, no model request on their behalf.
	if r := e.slack.BotReplies("C1", inChannel); len(r) != 0 {
		t.Errorf("the denied mention got public replies: %+v", r)
	}
	if msgs := e.slack.Messages("D1"); len(msgs) != 1 {
		t.Errorf("the DM has %d messages, want only the person's", len(msgs))
	}
	if c := e.llm.Counts(); c.Chat != 1 || c.Image != 1 {
		t.Errorf("model requests: %d chat, %d image; want 1 and 1 (the allowed user's)", c.Chat, c.Image)
	}
	f := h.scrape(t)
	for _, w := range []struct{ feature, reason string }{
		{access.FeatureMention, string(access.ReasonUserDenied)},
		{access.FeatureDM, string(access.ReasonUserDenied)},
		{access.FeatureImagine, string(access.ReasonUserDenied)},
		{access.FeatureImagine, string(access.ReasonQuota)},
	} {
		if got, _ := series(f, "llmbot_access_denied_total", map[string]string{"feature": w.feature, "reason": w.reason}); got.value != 1 {
			t.Errorf("access denied %s/%s = %v, want 1", w.feature, w.reason, got.value)
		}
	}
}

// CHANNEL_CONFIG: a channel with its own system prompt and model gets them; others keep the
// defaults.
func TestE2EChannelOverrides(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "channels.yaml")
	yaml := "channels:\n  C0SUPPORT:\n    system_prompt: \"You are {bot_name}, the support desk's assistant.\"\n    model: gpt-support\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startE2E(t, fakeslack.Config{}, map[string]string{"CHANNEL_CONFIG": path, "SYSTEM_PROMPT": "You are {bot_name}."})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Sure.") })
	support := e.slack.PostUserMessage("C0SUPPORT", "U1", "", "<@UBOT> help")
	e.final(t, "C0SUPPORT", support, 1, 1)
	general := e.slack.PostUserMessage("C1", "U1", "", "<@UBOT> help")
	e.final(t, "C1", general, 1, 2)

	reqs := e.llm.ChatRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d chat requests, want 2", len(reqs))
	}
	for i, w := range []struct{ model, system string }{
		{"gpt-support", "the support desk's assistant"},
		{"gpt-5.4-mini", "You are llmbot."},
	} {
		r := reqs[i]
		if r.Model != w.model || len(r.Messages) == 0 || r.Messages[0].Role != "system" || !strings.Contains(r.Messages[0].Content, w.system) {
			t.Errorf("request %d: model %q, messages %+v; want model %q and a system prompt with %q", i+1, r.Model, r.Messages, w.model, w.system)
		}
	}
	if strings.Contains(reqs[1].Messages[0].Content, "support desk") {
		t.Errorf("the other channel got the support prompt: %q", reqs[1].Messages[0].Content)
	}
}

// Issue 29: the bot lists the workspace's people when it starts (users.list), so people new to it
// who ask at once are placed without users.info, though Slack's messages here do not name their
// team (the fake's default): 20 members' DMs reach the model, and a listed guest, with
// GUEST_USERS=refused, is refused with a note, all without a look-up.
func TestE2EWorkspaceListedAtStart(t *testing.T) {
	t.Parallel()
	const people = 20
	fs := newE2ESlack(fakeslack.Config{})
	for i := range people {
		fs.AddUser(fakeslack.User{ID: fmt.Sprintf("U%04d", i), Name: fmt.Sprintf("member%d", i)})
	}
	fs.AddUser(fakeslack.User{ID: "U0GUEST", Name: "guest", Guest: true})
	e := startE2EOn(t, fs, map[string]string{"GUEST_USERS": "refused"})
	e.llm.SetChat(func(fakellm.ChatRequest) fakellm.Reply { return fakellm.Text("Sure.") })
	e.waitFor(t, "the workspace listed", func() bool { return strings.Contains(e.logs.String(), "the workspace's people placed") })
	for i := range people {
		fs.PostUserMessage(fmt.Sprintf("D%04d", i), fmt.Sprintf("U%04d", i), "", "hello?")
	}
	fs.PostUserMessage("C1", "U0GUEST", "", "<@UBOT> hello?")
	e.waitFor(t, "every member's model request", func() bool { return e.llm.Counts().Chat == people })
	e.waitFor(t, "the guest's note", func() bool {
		return slices.ContainsFunc(fs.Ephemerals(), func(m fakeslack.Ephemeral) bool { return m.User == "U0GUEST" })
	})
	if n := fs.CallCount("users.info"); n != 0 {
		t.Errorf("%d users.info calls, want none: everyone who asked was listed at start", n)
	}
	if n := e.llm.Counts().Chat; n != people {
		t.Errorf("%d model requests, want %d: the guest's question must not reach the model", n, people)
	}
}
