package ops

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/slack-go/slack"

	"github.com/llmbot/llmbot/handlers"
	"github.com/llmbot/llmbot/llm"
)

// Histogram buckets, in the unit of the metric's name.
var (
	ackBuckets      = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
	latencyBuckets  = []float64{.1, .25, .5, .75, 1, 1.5, 2, 3, 5, 8, 13, 20, 30, 60} // first token, first text
	answerBuckets   = []float64{.5, 1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300}   // a whole answer
	imageBuckets    = []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240}   // image generation, /imagine jobs
	editBuckets     = []float64{0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89}                 // chat.update calls per reply
	slackCallBucket = []float64{.025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}            // one Web API call
)

// Metrics counts what the bot does. Its methods have the signatures of bot.Hooks and llm.Hooks
// fields, so they plug in as method values (Hooks{Acked: m.Acked, ...}); the rest are called
// by decorators (Chat, Imager, SlackTransport), by the route middleware or by the handlers. Every
// method is safe for concurrent use and never blocks. Label values come from small fixed sets;
// free-form inputs (model names, Slack method names) are checked and replaced by "other" when
// they do not look like one, so neither a token nor free text can become a label.
type Metrics struct {
	reg *prometheus.Registry

	acked         *prometheus.CounterVec
	ackSeconds    prometheus.Histogram
	duplicates    *prometheus.CounterVec
	busy          prometheus.Counter
	replies       *prometheus.CounterVec
	replySeconds  prometheus.Histogram
	imagine       *prometheus.CounterVec
	imagineSecs   prometheus.Histogram
	inFlight      *prometheus.GaugeVec
	firstToken    prometheus.Histogram
	firstText     prometheus.Histogram
	edits         prometheus.Histogram
	tokens        *prometheus.CounterVec
	modelRequests *prometheus.CounterVec
	modelRetries  *prometheus.CounterVec
	tempDropped   prometheus.Counter
	images        *prometheus.CounterVec
	imageSeconds  prometheus.Histogram
	slackCalls    *prometheus.CounterVec
	slackLimited  *prometheus.CounterVec
	slackSeconds  *prometheus.HistogramVec
	connected     prometheus.Gauge
	reconnects    prometheus.Counter
	stateDegraded prometheus.Gauge
	stateFailures *prometheus.CounterVec
	denied        *prometheus.CounterVec
	feedback      *prometheus.CounterVec
	ledger        ledgerMetrics
	scheduled     *prometheus.CounterVec

	connMu        sync.Mutex
	everConnected bool // guarded by connMu
}

// NewMetrics returns Metrics on a registry of their own (never the global default registry),
// with the Go runtime and process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := promauto.With(reg)
	m := &Metrics{reg: reg}

	m.acked = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_envelopes_acked_total",
		Help: "Socket Mode envelopes acknowledged, by envelope type."}, []string{"type"})
	m.ackSeconds = f.NewHistogram(prometheus.HistogramOpts{Name: "llmbot_ack_duration_seconds",
		Help: "Time from reading an envelope to its ack.", Buckets: ackBuckets})
	m.duplicates = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_duplicates_dropped_total",
		Help: "Repeated deliveries dropped: kind is envelope, event or message (an app_mention and a message.im for one message)."},
		[]string{"kind"})
	m.busy = f.NewCounter(prometheus.CounterOpts{Name: "llmbot_busy_refusals_total",
		Help: "Work refused because MAX_CONCURRENT_REPLIES answers were in progress."})
	m.replies = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_replies_total",
		Help: "Replies finished, by outcome: ok, ignored, stopped, shutdown, model_<kind>, slack_rate_limited, slack_error, canceled, timeout, error."},
		[]string{"outcome"})
	m.replySeconds = f.NewHistogram(prometheus.HistogramOpts{Name: "llmbot_reply_duration_seconds",
		Help: "Time to write a whole reply, from its turn to its final edit.", Buckets: answerBuckets})
	m.imagine = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_imagine_total",
		Help: "/imagine jobs finished, by outcome (as for llmbot_replies_total)."}, []string{"outcome"})
	m.imagineSecs = f.NewHistogram(prometheus.HistogramOpts{Name: "llmbot_imagine_duration_seconds",
		Help: "Time of a whole /imagine job: generation and upload.", Buckets: imageBuckets})
	m.inFlight = f.NewGaugeVec(prometheus.GaugeOpts{Name: "llmbot_in_flight",
		Help: "Work in progress: kind is reply or imagine."}, []string{"kind"})
	m.firstToken = f.NewHistogram(prometheus.HistogramOpts{Name: "llmbot_time_to_first_token_seconds",
		Help: "Time from sending a chat request to the first streamed token (answer, reasoning or refusal).", Buckets: latencyBuckets})
	m.firstText = f.NewHistogram(prometheus.HistogramOpts{Name: "llmbot_time_to_first_text_seconds",
		Help: "Time from the start of a reply to the first answer text visible in Slack.", Buckets: latencyBuckets})
	m.edits = f.NewHistogram(prometheus.HistogramOpts{Name: "llmbot_edits_per_reply",
		Help: "Slack writes (chat.update or chat.appendStream) made by one reply.", Buckets: editBuckets})
	m.tokens = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_tokens_total",
		Help: "Tokens reported by the model service in usage (only when it sends usage), by model and type (prompt, completion)."},
		[]string{"model", "type"})
	m.modelRequests = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_model_requests_total",
		Help: "Chat requests to the model service, by outcome: ok, abandoned (the reply stopped reading) or the error kind."},
		[]string{"op", "outcome"})
	m.modelRetries = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_model_retries_total",
		Help: "Model requests retried, by operation (chat, image) and error kind."}, []string{"op", "kind"})
	m.tempDropped = f.NewCounter(prometheus.CounterOpts{Name: "llmbot_model_temperature_dropped_total",
		Help: "Times a model rejected TEMPERATURE and requests went on without it."})
	m.images = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_image_generations_total",
		Help: "Image generations, by outcome: ok or the error kind (content_policy, timeout, ...)."}, []string{"outcome"})
	m.imageSeconds = f.NewHistogram(prometheus.HistogramOpts{Name: "llmbot_image_generation_seconds",
		Help: "Time of one image generation, download included, whatever its outcome.", Buckets: imageBuckets})
	m.slackCalls = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_slack_api_calls_total",
		Help: "Slack Web API calls by method and HTTP status class (2xx, 4xx, 429, 5xx, error, canceled). Slack's ok:false errors come with 200, so they count as 2xx."},
		[]string{"method", "status"})
	m.slackLimited = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_slack_rate_limited_total",
		Help: "Slack Web API calls answered 429 (rate limited), by method."}, []string{"method"})
	m.slackSeconds = f.NewHistogramVec(prometheus.HistogramOpts{Name: "llmbot_slack_api_call_duration_seconds",
		Help: "Time of a Slack Web API call, to the response headers.", Buckets: slackCallBucket}, []string{"method"})
	m.connected = f.NewGauge(prometheus.GaugeOpts{Name: "llmbot_socket_connected",
		Help: "1 while the Socket Mode connection is up."})
	m.reconnects = f.NewCounter(prometheus.CounterOpts{Name: "llmbot_socket_reconnects_total",
		Help: "Socket Mode connections made after the first (refreshes, dropped sockets)."})
	m.stateDegraded = f.NewGauge(prometheus.GaugeOpts{Name: "llmbot_shared_state_degraded",
		Help: "1 while Redis (REDIS_URL) cannot be reached and this replica answers with its own state (duplicates across replicas become possible)."})
	m.stateFailures = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_shared_state_failures_total",
		Help: "Calls to Redis (REDIS_URL) that failed or timed out, by operation; each was served from this replica's own state."}, []string{"op"})
	m.denied = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_access_denied_total",
		Help: "Requests refused by access control, by feature (mention, dm, imagine) and reason."}, []string{"feature", "reason"})
	m.feedback = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_feedback_total",
		Help: "Ratings of answers (👍 good, 👎 bad), by where the answer was (dm or channel) and the model that wrote it."},
		[]string{"rating", "place", "model"})
	m.scheduled = f.NewCounterVec(prometheus.CounterOpts{Name: "llmbot_scheduled_runs_total",
		Help: "Occurrences of scheduled prompts handled by this replica, by outcome: ok (started in its channel), failed (could not start; its creator was told), skipped (missed by more than SCHEDULE_CATCH_UP while no replica ran)."},
		[]string{"outcome"})

	m.ledger = newLedgerMetrics(f)

	// Series that dashboards divide by exist from the start, at 0.
	for _, k := range []string{"envelope", "event", "message"} {
		m.duplicates.WithLabelValues(k)
	}
	for _, o := range []string{"ok", "error"} {
		m.replies.WithLabelValues(o)
		m.imagine.WithLabelValues(o)
		m.images.WithLabelValues(o)
	}
	for _, o := range []string{"ok", "failed", "skipped"} {
		m.scheduled.WithLabelValues(o)
	}
	m.inFlight.WithLabelValues("reply")
	m.inFlight.WithLabelValues("imagine")
	return m
}

// StateDegraded records Redis becoming unreachable (true) or reachable again (false).
func (m *Metrics) StateDegraded(degraded bool) {
	v := 0.0
	if degraded {
		v = 1
	}
	m.stateDegraded.Set(v)
}

// StateFailed counts one failed call to Redis; op is the state operation (claim, lease, take, ...).
func (m *Metrics) StateFailed(op string) { m.stateFailures.WithLabelValues(word(op)).Inc() }

// Registry returns the registry the metrics live on, for Server's /metrics.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Acked counts an acked envelope and its ack latency (bot.Hooks.Acked).
func (m *Metrics) Acked(envelopeType string, latency time.Duration) {
	m.acked.WithLabelValues(word(envelopeType)).Inc()
	m.ackSeconds.Observe(latency.Seconds())
}

// Duplicate counts a repeated delivery dropped: kind "envelope", "event" or "message"
// (bot.Hooks.Duplicate).
func (m *Metrics) Duplicate(kind string) { m.duplicates.WithLabelValues(word(kind)).Inc() }

// Busy counts work refused because the bot was full (bot.Hooks.Busy).
func (m *Metrics) Busy() { m.busy.Inc() }

// Done counts finished work by outcome and records its duration: kind "reply" or "imagine"
// (bot.Hooks.Done).
func (m *Metrics) Done(kind string, err error, d time.Duration) {
	switch kind {
	case "reply":
		m.replies.WithLabelValues(Outcome(err)).Inc()
		m.replySeconds.Observe(d.Seconds())
	case "imagine":
		m.imagine.WithLabelValues(Outcome(err)).Inc()
		m.imagineSecs.Observe(d.Seconds())
	}
}

// Connection records the Socket Mode connection going up or down; every connection after the
// first counts as a reconnect (bot.Hooks.Connection).
func (m *Metrics) Connection(up bool) {
	m.connMu.Lock()
	defer m.connMu.Unlock()
	if !up {
		m.connected.Set(0)
		return
	}
	m.connected.Set(1)
	if m.everConnected {
		m.reconnects.Inc()
	}
	m.everConnected = true
}

// Retry counts a retried model request (llm.Hooks.Retry).
func (m *Metrics) Retry(op string, _ int, _ time.Duration, err *llm.Error) {
	kind := "error"
	if err != nil {
		kind = kindLabel(err.Kind)
	}
	m.modelRetries.WithLabelValues(word(op), kind).Inc()
}

// TemperatureDropped counts a model rejecting TEMPERATURE (llm.Hooks.TemperatureDropped).
func (m *Metrics) TemperatureDropped(string) { m.tempDropped.Inc() }

// ReplyWritten records one finished reply's Slack side: the time to its first visible answer
// text (0: none was shown, e.g. the model failed first; not recorded) and how many chat.update (or
// chat.appendStream) calls it made.
func (m *Metrics) ReplyWritten(firstText time.Duration, edits int) {
	if firstText > 0 {
		m.firstText.Observe(firstText.Seconds())
	}
	m.edits.Observe(float64(edits))
}

// Usage adds the tokens a model service reported for one request. Chat calls it for streamed
// answers; call it for other requests (Complete) yourself.
func (m *Metrics) Usage(model string, u llm.Usage) {
	model = word(model)
	if u.PromptTokens > 0 {
		m.tokens.WithLabelValues(model, "prompt").Add(float64(u.PromptTokens))
	}
	if u.CompletionTokens > 0 {
		m.tokens.WithLabelValues(model, "completion").Add(float64(u.CompletionTokens))
	}
}

// AccessDenied counts a request refused by access control: feature "mention", "dm" or
// "imagine"; reason as access.Decision's Reason ("user_denied", "quota", ...).
func (m *Metrics) AccessDenied(feature, reason string) {
	m.denied.WithLabelValues(word(feature), word(reason)).Inc()
}

// Feedback counts a rating of an answer: place "dm" or "channel" (never a channel id: one label
// value per channel would have no bound), model the chat model that answered there.
func (m *Metrics) Feedback(good bool, place, model string) {
	rating := "bad"
	if good {
		rating = "good"
	}
	m.feedback.WithLabelValues(rating, word(place), word(model)).Inc()
}

// ScheduledRun counts one occurrence of a scheduled prompt by its outcome (schedule.RunnerOptions.Ran).
func (m *Metrics) ScheduledRun(outcome string) { m.scheduled.WithLabelValues(word(outcome)).Inc() }

// SlackCall counts one Slack Web API call: method as "chat.update"; status the HTTP status (0
// when there was no response); err the transport error, if any; d its time to the response
// headers. SlackTransport calls it for every request through the Slack HTTP client.
func (m *Metrics) SlackCall(method string, status int, err error, d time.Duration) {
	method = slackMethodLabel(method)
	class := statusClass(status, err)
	m.slackCalls.WithLabelValues(method, class).Inc()
	if class == "429" {
		m.slackLimited.WithLabelValues(method).Inc()
	}
	if err == nil {
		m.slackSeconds.WithLabelValues(method).Observe(d.Seconds())
	}
}

// statusClass is the status label of a Slack call.
func statusClass(status int, err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case err != nil || status < 100:
		return "error"
	case status == 429:
		return "429"
	case status < 300:
		return "2xx"
	case status < 400:
		return "3xx"
	case status < 500:
		return "4xx"
	}
	return "5xx"
}

// Outcome names how a reply or /imagine job ended, for the outcome label: "ok", "ignored",
// "stopped", "shutdown", "model_<kind>" (model_timeout, model_truncated, ...), "slack_rate_limited",
// "slack_error", "canceled", "timeout" or "error".
func Outcome(err error) string {
	var (
		rl *slack.RateLimitedError
		se slack.SlackErrorResponse
		sc slack.StatusCodeError
	)
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, handlers.ErrIgnored):
		return "ignored"
	case errors.Is(err, handlers.ErrStopped):
		return "stopped"
	case errors.Is(err, handlers.ErrShutdown):
		return "shutdown"
	case llm.KindOf(err) != "":
		return "model_" + kindLabel(llm.KindOf(err))
	case errors.As(err, &rl):
		return "slack_rate_limited"
	case errors.As(err, &se), errors.As(err, &sc):
		return "slack_error"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "error"
}

// kinds are the llm error kinds used as label values; any other becomes "error".
var kinds = map[llm.Kind]bool{
	llm.KindRateLimit: true, llm.KindQuota: true, llm.KindAuth: true, llm.KindBadRequest: true,
	llm.KindContentPolicy: true, llm.KindServer: true, llm.KindTimeout: true, llm.KindTruncated: true,
	llm.KindConnection: true, llm.KindInvalid: true, llm.KindCanceled: true,
}

func kindLabel(k llm.Kind) string {
	if kinds[k] {
		return string(k)
	}
	return "error"
}

// Limits of free-form label values.
const (
	maxLabel = 64
	other    = "other"
)

// secretPrefixes start values that look like credentials; they never become labels.
var secretPrefixes = []string{"xoxb-", "xoxp-", "xoxa-", "xoxe", "xoxs-", "xapp-", "sk-", "bearer"}

// word returns s when it is a short, plain label value (letters, digits, . _ - : /), else
// "other". Model names ("gpt-5.4-mini", "meta-llama/Llama-3.1-8B", "llama3.1:8b") pass.
func word(s string) string {
	if s == "" || len(s) > maxLabel {
		return other
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == '-' || r == ':' || r == '/'
		if !ok {
			return other
		}
	}
	lower := strings.ToLower(s)
	for _, p := range secretPrefixes {
		if strings.HasPrefix(lower, p) {
			return other
		}
	}
	return s
}

// slackMethodLabel returns method when it is shaped like a Web API method name
// ("chat.update", "files.getUploadURLExternal"), else "other".
func slackMethodLabel(method string) string {
	if method == "" || len(method) > maxLabel || word(method) != method {
		return other
	}
	parts := strings.Split(method, ".")
	if len(parts) < 2 {
		return other
	}
	for _, p := range parts {
		if p == "" {
			return other
		}
		for _, r := range p {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return other
			}
		}
	}
	return method
}
