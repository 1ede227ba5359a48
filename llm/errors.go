package llm

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Error implements error. It reads like
//
//	model service: 429 rate limit: Rate limit reached for gpt-4o (code rate_limit_exceeded, request req_123)
//
// and never contains the API key: the client redacts the key from every field it fills in.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("model service: ")
	if e.Status != 0 && (e.Status < 200 || e.Status > 299) { // "200" would only confuse
		b.WriteString(strconv.Itoa(e.Status))
		b.WriteByte(' ')
	}
	if e.Kind == KindBadRequest && e.Status == http.StatusNotFound {
		b.WriteString("not found")
	} else {
		b.WriteString(e.Kind.label())
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	var details []string
	if e.Code != "" && e.Code != strconv.Itoa(e.Status) {
		details = append(details, "code "+e.Code)
	}
	if e.Param != "" {
		details = append(details, "param "+e.Param)
	}
	if e.RequestID != "" {
		details = append(details, "request "+e.RequestID)
	}
	if e.RetryAfter > 0 {
		details = append(details, "retry after "+e.RetryAfter.String())
	}
	if len(details) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(details, ", "))
		b.WriteByte(')')
	}
	return b.String()
}

// label is the human name of a kind, used by Error.
func (k Kind) label() string {
	switch k {
	case KindRateLimit:
		return "rate limit"
	case KindQuota:
		return "quota exceeded"
	case KindAuth:
		return "not authorized"
	case KindBadRequest:
		return "bad request"
	case KindContentPolicy:
		return "blocked by content policy"
	case KindServer:
		return "server error"
	case KindTimeout:
		return "timeout"
	case KindTruncated:
		return "answer cut off"
	case KindConnection:
		return "connection failed"
	case KindInvalid:
		return "unusable answer"
	case KindCanceled:
		return "canceled"
	case "":
		return "error"
	}
	return string(k)
}

// KindOf returns the Kind of err when err is (or wraps) an *Error, and "" otherwise.
func KindOf(err error) Kind {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Kind
	}
	return ""
}

// maxErrorBody bounds how much of an error body is read (openai-wire.md §4.2).
const maxErrorBody = 1 << 20

// maxSnippet bounds the text kept from a body that is not a JSON error (HTML pages, plain text).
const maxSnippet = 200

// errorFields is the union of the error shapes servers send (openai-wire.md §3.3).
type errorFields struct {
	Error   json.RawMessage `json:"error"`
	Object  json.RawMessage `json:"object"`
	Message json.RawMessage `json:"message"`
	Type    json.RawMessage `json:"type"`
	Code    json.RawMessage `json:"code"`
	Param   json.RawMessage `json:"param"`
	Detail  json.RawMessage `json:"detail"`
}

// errorObject is the inside of {"error": {...}}: OpenAI's fields, and what Azure, Google and
// OpenRouter add to them.
type errorObject struct {
	Message    json.RawMessage `json:"message"`
	Type       json.RawMessage `json:"type"`
	Code       json.RawMessage `json:"code"`
	Param      json.RawMessage `json:"param"`
	InnerError *struct {
		Code string `json:"code"`
	} `json:"innererror"`
	Status   json.RawMessage `json:"status"` // Google: "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", ...
	Details  []googleDetail  `json:"details"`
	Metadata *errorMetadata  `json:"metadata"`
}

// googleDetail is one of the details of Google's errors.
type googleDetail struct {
	Reason     string `json:"reason"` // Google's ErrorInfo: "API_KEY_INVALID", ...
	Violations []struct {
		QuotaID string `json:"quotaId"` // Google's QuotaFailure: "GenerateRequestsPerDayPerProjectPerModel-FreeTier", ...
	} `json:"violations"`
}

// errorMetadata is OpenRouter's: which provider failed, its own error, and what moderation flagged.
type errorMetadata struct {
	ProviderName string          `json:"provider_name"`
	Raw          json.RawMessage `json:"raw"`
	FlaggedInput json.RawMessage `json:"flagged_input"`
	Reasons      json.RawMessage `json:"reasons"`
}

// errorFromResponse normalises a failed HTTP answer: status, headers and (up to 1 MiB of) body.
// It never loses the status. Callers redact body first (redactBytes: a clip could cut a secret
// in two), and the result.
func errorFromResponse(status int, h http.Header, body []byte, now time.Time) *Error {
	e := &Error{Status: status, RequestID: requestID(h), RetryAfter: retryAfter(h, now)}
	body = bytes.TrimPrefix(body, []byte(utf8BOM))
	if !parseErrorJSON(e, body) {
		e.Message = snippet(body)
		if status == http.StatusNotFound {
			// No JSON error: the path itself is unknown (an OpenAI-compatible API answers an
			// unknown model with a JSON error), most often a base URL without its /v1.
			e.Message = joinNonEmpty(" ", e.Message, "(no such endpoint: is the base URL right? It usually ends in /v1)")
		}
	}
	if e.Message == "" {
		e.Message = strings.ToLower(http.StatusText(status))
		if e.Message == "" {
			e.Message = "no error message"
		}
	}
	e.Kind = classify(e.Status, e.Type, e.Code, e.Message)
	e.Message = dropInputs(e.Message)
	return e
}

// errorInBody reports the error carried by a 2xx JSON value (a whole body or one stream
// event), or nil when the value has no truthy "error". Its Kind comes from the error's code
// when that is an HTTP status (OpenRouter, vLLM), and is mostly KindServer otherwise. The
// secrets are redacted from data before any of it is clipped; callers redact the result too.
func errorInBody(status int, h http.Header, data []byte, secrets []string) *Error {
	var f errorFields
	if unmarshalLoose(data, &f) != nil || !truthy(f.Error) {
		return nil
	}
	e := &Error{Status: status, RequestID: requestID(h)}
	parseErrorJSON(e, redactBytes(data, secrets))
	if e.Message == "" {
		e.Message = "the server reported an error"
	}
	code := 0 // "not an HTTP status": classify by type, code and message
	if n, err := strconv.Atoi(e.Code); err == nil && n >= 400 && n <= 599 {
		code = n
	}
	e.Kind = classify(code, e.Type, e.Code, e.Message)
	e.Message = dropInputs(e.Message)
	return e
}

// parseErrorJSON fills e from a JSON error body, trying in order: an "error" object; an
// "error" string; a top-level message / object:"error"; "detail" (FastAPI). A body that is an
// array is read as its first element (Gemini). It reports whether the body was one of these
// shapes.
func parseErrorJSON(e *Error, body []byte) bool {
	var f errorFields
	if unmarshalLoose(firstElement(body), &f) != nil {
		return false
	}
	switch {
	case startsWith(f.Error, '{'):
		return e.fillFromObject(f.Error)
	case startsWith(f.Error, '"'):
		e.Message = text(f.Error)
		return true
	case text(f.Object) == "error" || startsWith(f.Message, '"'):
		e.Message, e.Type, e.Code, e.Param = text(f.Message), text(f.Type), text(f.Code), text(f.Param)
		return true
	case len(f.Detail) > 0 && string(f.Detail) != "null":
		e.Message = detailText(f.Detail)
		return true
	}
	return false
}

// startsWith reports whether the raw JSON value begins with c (its kind: '{', '"', ...).
func startsWith(raw json.RawMessage, c byte) bool { return len(raw) > 0 && raw[0] == c }

// fillFromObject fills e from the inside of {"error": {...}}, and reports whether it was an object.
func (e *Error) fillFromObject(raw json.RawMessage) bool {
	var o errorObject
	if unmarshalLoose(raw, &o) != nil {
		return false
	}
	e.Message, e.Type, e.Code, e.Param = text(o.Message), text(o.Type), text(o.Code), text(o.Param)
	if o.InnerError != nil && e.Code == "" { // Azure
		e.Code = o.InnerError.Code
	}
	if st := text(o.Status); e.Type == "" && isConstName(st) { // Google's status is its error type
		e.Type = st
	}
	for _, d := range o.Details {
		d.addTo(e)
	}
	if o.Metadata != nil {
		o.Metadata.addTo(e)
	}
	return true
}

// addTo adds to e what a Google detail tells and its message does not: that the key is bad, or
// that the quota hit is a daily one.
func (d googleDetail) addTo(e *Error) {
	if d.Reason == "API_KEY_INVALID" { // Google answers a bad key with 400 INVALID_ARGUMENT
		e.Code = d.Reason
	}
	for _, v := range d.Violations {
		if strings.Contains(v.QuotaID, "PerDay") && !strings.Contains(e.Message, v.QuotaID) {
			// Google's message is the same for its per-minute and its daily limits.
			e.Message = joinNonEmpty(" ", e.Message, "(daily quota "+clip(v.QuotaID, 100)+")")
		}
	}
}

// addTo adds OpenRouter's metadata to e: a moderation flag makes the error a moderation block,
// and the provider's own error and name join the message, which alone only says that a
// provider failed.
func (m *errorMetadata) addTo(e *Error) {
	if len(m.FlaggedInput) > 0 || len(m.Reasons) > 0 {
		e.Type = cmp.Or(e.Type, "moderation")
		e.Code = cmp.Or(e.Code, "moderation_blocked")
	}
	if raw := text(m.Raw); raw != "" && !strings.Contains(e.Message, raw) {
		e.Message = joinNonEmpty(": ", e.Message, clip(raw, maxSnippet))
	}
	if m.ProviderName != "" {
		e.Message = joinNonEmpty(" ", e.Message, "(provider "+m.ProviderName+")")
	}
}

// firstElement returns the first element of a JSON array, and any other body as it is:
// Gemini's OpenAI-compatible endpoint sends its errors as [{"error": {...}}].
func firstElement(body []byte) []byte {
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '[' {
		return body
	}
	var items []json.RawMessage
	if json.Unmarshal(body, &items) != nil || len(items) == 0 {
		return body
	}
	return items[0]
}

// isConstName reports whether s looks like an enum constant such as INVALID_ARGUMENT (and not
// a phrase such as "Too Many Requests").
func isConstName(s string) bool {
	for i := range len(s) {
		if (s[i] < 'A' || s[i] > 'Z') && s[i] != '_' {
			return false
		}
	}
	return s != ""
}

// unmarshalLoose is json.Unmarshal that tolerates fields of an unexpected type (an "object"
// that is a number, an int innererror.code): they stay empty and the rest is still read, so
// a server's odd error never loses its message.
func unmarshalLoose(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return nil
	}
	return err
}

// detailText renders FastAPI's "detail": a string, or pydantic's list of {loc, msg}.
func detailText(raw json.RawMessage) string {
	if raw[0] != '[' {
		return text(raw)
	}
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return clip(string(raw), maxSnippet)
	}
	parts := make([]string, 0, len(items))
	for _, it := range items {
		loc := make([]string, len(it.Loc))
		for i, l := range it.Loc {
			loc[i] = fmt.Sprint(l)
		}
		parts = append(parts, joinNonEmpty(": ", strings.Join(loc, "."), it.Msg))
	}
	return clip(strings.Join(parts, "; "), 2*maxSnippet)
}

// text turns a JSON scalar into text: strings as they are, numbers as written, null,
// false and LiteLLM's literal "None" as "". Objects and arrays are kept as short JSON.
func text(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "None" {
			return ""
		}
		return strings.TrimSpace(s)
	case 'n', 'f':
		return ""
	case '{', '[':
		return clip(string(raw), maxSnippet)
	}
	return string(raw)
}

// truthy reports whether a JSON value is true in the Python sense (the official SDK raises
// on a truthy "error"): not absent, null, false, 0, "", {} or [].
func truthy(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0:
		return false
	case raw[0] == '{' || raw[0] == '[':
		return len(bytes.TrimSpace(raw[1:len(raw)-1])) > 0
	case raw[0] == '"':
		return len(raw) > 2
	}
	switch string(raw) {
	case "null", "false", "0", "0.0":
		return false
	}
	return true
}

// snippet makes a short, single-line text of a non-JSON body: an HTML page's <title> (or its
// text without tags), or the start of a plain text body.
func snippet(body []byte) string {
	s := string(body)
	if looksHTML(s) {
		lower := strings.ToLower(s)
		if i := strings.Index(lower, "<title>"); i >= 0 {
			if j := strings.Index(lower[i:], "</title>"); j > 0 {
				if t := collapse(s[i+len("<title>") : i+j]); t != "" {
					return clip(t, maxSnippet)
				}
			}
		}
		s = stripTags(s)
	}
	return clip(collapse(s), maxSnippet)
}

func looksHTML(s string) bool {
	head := strings.ToLower(strings.TrimSpace(s[:min(len(s), 512)]))
	return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html") ||
		strings.Contains(head, "<head") || strings.Contains(head, "<body")
}

// stripTags drops <...> tags, and the content of <script> and <style> elements.
func stripTags(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		b.WriteByte(' ')
		s = s[i:]
		lower := strings.ToLower(s[:min(len(s), 8)])
		for _, el := range []string{"<script", "<style"} {
			if strings.HasPrefix(lower, el) {
				end := "</" + el[1:]
				if j := strings.Index(strings.ToLower(s), end); j >= 0 {
					s = s[j+len(end):]
				} else {
					s = ""
				}
			}
		}
		j := strings.IndexByte(s, '>')
		if j < 0 {
			break
		}
		s = s[j+1:]
	}
	return b.String()
}

// dropInputs replaces the values of "input" keys in an error message with "…": pydantic's
// validation errors (vLLM, LiteLLM, FastAPI servers) carry the request's value that failed, which may
// be the whole conversation, and errors are logged above debug level, where message text must not
// go. Python's repr ('input': '...') and JSON ("input": "...") are read, also relayed inside another
// server's message with their quotes escaped. Where a value ends is uncertain: its quotes may seem
// to close early (a relayed error's doubled escapes), and a key that follows values in pydantic's
// errors may be inside the user's text (a pasted JSON log line). So a value is dropped up to the
// later of the two ends, and to the end of the message when no key follows or the value holds
// escapes: the user's text is what must not be left.
func dropInputs(msg string) string {
	var b strings.Builder
	rest := msg
	for {
		k := inputKeyRE.FindStringIndex(rest)
		if k == nil {
			if b.Len() == 0 {
				return msg
			}
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:k[1]])
		b.WriteString("…")
		rest = rest[k[1]:]
		end := skipPyValue(rest) // where its quotes or brackets close
		next := nextKeyRE.FindStringIndex(rest[end:])
		switch {
		case next == nil, strings.Contains(rest[:end], "\\"):
			end = len(rest) // no key follows, or escapes make the close uncertain: drop the rest
		default:
			end += next[0]
		}
		rest = rest[end:]
	}
}

var (
	// inputKeyRE is an "input" key with its colon (its quotes may be escaped: \"input\":), or the
	// input_value= of pydantic's text form ("[type=string_too_long, input_value='...', input_type=str]").
	inputKeyRE = regexp.MustCompile(`\\*['"]input\\*['"]\s*:\s*|\binput_value=`)
	// nextKeyRE is the key after an input value in pydantic's errors, or the next error's first key.
	nextKeyRE = regexp.MustCompile(`,\s*\{?\s*\\*['"](?:ctx|url|type|loc|msg|input)\\*['"]\s*:|,\s*input_type=`)
)

// skipPyValue returns the length of the Python or JSON value s starts with: a quoted string (with
// backslash escapes), a bracketed value (its quoted strings skipped), or anything up to the next
// ',' or closing bracket.
func skipPyValue(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"':
			for i++; i < len(s) && s[i] != c; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return min(i+1, len(s))
			}
		case '[', '{', '(':
			depth++
		case ']', '}', ')':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return len(s)
}

// collapse turns runs of white space (newlines included) into single spaces.
func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip cuts s to at most n bytes on a rune boundary, marking the cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func joinNonEmpty(sep string, a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + sep + b
}

// classify picks the Kind of an HTTP error from its status and the provider's type, code
// and message. status 0 means "not an HTTP status" (an error inside a 2xx body).
func classify(status int, typ, code, msg string) Kind {
	lc := strings.ToLower(code)
	lt := strings.ToLower(typ)
	lm := strings.ToLower(msg)
	switch {
	case lc == "insufficient_quota" || lt == "insufficient_quota" || status == 402:
		return KindQuota
	case lc == "moderation_blocked" || lc == "content_policy_violation" || lc == "content_filter" ||
		lc == "responsibleaipolicyviolation" || lt == "moderation" || lt == "image_generation_user_error":
		return KindContentPolicy
	case lt == "resource_exhausted" || strings.Contains(lm, "resource_exhausted"):
		// Google says "You exceeded your current quota" of per-minute limits too, in its own
		// error or relayed inside a proxy's message (LiteLLM: code "429"). Only its quota ids
		// tell a daily limit, and "limit: 0" a model the plan does not include: no retry helps.
		if strings.Contains(lm, "perday") || strings.Contains(lm, "limit: 0,") {
			return KindQuota
		}
		return KindRateLimit
	case strings.Contains(lm, "insufficient_quota") || strings.Contains(lm, "exceeded your current quota"):
		return KindQuota // LiteLLM relays OpenAI's insufficient_quota as code "429", the upstream text only in the message
	case status == 429 || lc == "rate_limit_exceeded" || lt == "rate_limit_exceeded" || lt == "rate_limit_error":
		return KindRateLimit
	case status == 401 || status == 403 || lc == "invalid_api_key" || lc == "api_key_invalid" ||
		lt == "authentication_error" || lt == "permission_error":
		return KindAuth
	case status == 408:
		return KindTimeout
	case status >= 500 || lc == "server_error" || lt == "server_error":
		return KindServer
	case status >= 400:
		return KindBadRequest
	}
	switch {
	case lc == "context_length_exceeded" || strings.Contains(lm, "context length") || strings.Contains(lm, "context size"):
		return KindBadRequest // an error inside a 2xx body about the request itself
	}
	return KindServer
}

// requestID is the provider's id for the request, for support and logs.
//
// A value longer than maxRequestID is not an id and is dropped, not clipped: a clip could cut a
// secret echoed there in two, and Error.redact would then miss its first bytes.
func requestID(h http.Header) string {
	for _, k := range []string{"X-Request-Id", "X-Generation-Id", "Apim-Request-Id"} {
		if v := h.Get(k); v != "" && len(v) <= maxRequestID {
			return v
		}
	}
	return ""
}

// maxRequestID is the longest request id kept (OpenAI's are about 40 bytes).
const maxRequestID = 128

// retryAfter reads retry-after-ms, then Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// errorFromTransport classifies a failed round trip or body read. The cause of ctx tells
// the caller's cancellation from the client's own time limits.
func errorFromTransport(ctx context.Context, err error) *Error {
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errIdle), errors.Is(cause, errImageTimeout), errors.Is(cause, errImageBodyIdle):
			return &Error{Kind: KindTimeout, Message: cause.Error(), Err: cause}
		case errors.Is(cause, context.DeadlineExceeded):
			return &Error{Kind: KindTimeout, Message: "the caller's deadline passed", Err: cause}
		default:
			return &Error{Kind: KindCanceled, Message: "the request was canceled", Err: cause}
		}
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return &Error{Kind: KindTimeout, Message: unwrapURL(err).Error(), Err: err}
	}
	return &Error{Kind: KindConnection, Message: unwrapURL(err).Error(), Err: err}
}

// unwrapURL drops *url.Error's `Post "https://…":` prefix, which only repeats the endpoint.
func unwrapURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// redactBytes replaces the secrets in a raw body, before any of it is clipped into a message: a
// clip that cut a secret in two would leave its first bytes where Error.redact no longer finds
// it. b is returned as it is when it holds no secret.
func redactBytes(b []byte, secrets []string) []byte {
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			b = bytes.ReplaceAll(b, []byte(s), []byte("[redacted]"))
		}
	}
	return b
}

// redact removes secrets (the API key, secret extra headers) from every text field of e:
// servers sometimes echo them back.
func (e *Error) redact(secrets []string) *Error {
	for _, key := range secrets {
		for _, p := range []*string{&e.Message, &e.Type, &e.Code, &e.Param, &e.RequestID} {
			*p = strings.ReplaceAll(*p, key, "[redacted]")
		}
		if e.Err != nil && strings.Contains(e.Err.Error(), key) {
			e.Err = errors.New(strings.ReplaceAll(e.Err.Error(), key, "[redacted]"))
		}
	}
	return e
}
