package fakeslack

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Text limits Slack enforces (slack-platform.md §5).
const (
	UpdateTextLimit   = 4000  // chat.update text -> msg_too_long
	PostTextLimit     = 40000 // chat.postMessage text -> msg_too_long (Slack truncates; the fake refuses)
	MarkdownTextLimit = 12000 // markdown_text per call -> msg_too_long
)

type fault struct {
	err        string
	retryAfter time.Duration
}

// FailNext makes the next call of method answer {"ok":false,"error":slackError}.
// Calls queue up: FailNext twice fails the next two calls.
func (s *Server) FailNext(method, slackError string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], fault{err: slackError})
}

// RateLimitNext makes the next call of method answer HTTP 429 with Retry-After (whole
// seconds, rounded up, at least 1), whatever the buckets say.
func (s *Server) RateLimitNext(method string, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[method] = append(s.faults[method], fault{retryAfter: max(retryAfter, time.Nanosecond)})
}

// SetStreaming refuses native streaming when slackError is not empty: chat.startStream
// answers {"ok":false,"error":slackError} (e.g. "not_allowed", "unknown_method",
// "feature_not_enabled"). "" allows it again (the default).
func (s *Server) SetStreaming(slackError string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamingErr = slackError
}

// ExpireStream ends the native stream of the message ts in channelID as Slack ends one that
// its app abandoned (a bot that crashed mid-answer): the message keeps the text streamed so far
// and no metadata (chat.stopStream never set it), chat.appendStream and chat.stopStream answer
// message_not_in_streaming_state, and chat.update may finish it. It reports whether the message
// was streaming.
func (s *Server) ExpireStream(channelID, ts string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[channelID]
	if c == nil || c.byTS[ts] == nil || !c.byTS[ts].Streaming {
		return false
	}
	s.endStreamLocked(c.byTS[ts])
	s.notifyLocked()
	return true
}

// endStreamLocked ends m's stream without chat.stopStream.
func (s *Server) endStreamLocked(m *Message) {
	m.Streaming, m.StreamExpired = false, true
	delete(s.streams, m)
	delete(s.lastWrite, m)
}

// expireStreamsLocked ends the streams older than Config.StreamExpiry, or idle for
// Config.StreamIdleExpiry. It runs whenever the fake is asked about messages, so the end need
// not be announced.
func (s *Server) expireStreamsLocked(now time.Time) {
	for m, start := range s.streams {
		old := s.cfg.StreamExpiry > 0 && now.Sub(start) >= s.cfg.StreamExpiry
		idle := s.cfg.StreamIdleExpiry > 0 && now.Sub(s.lastWrite[m]) >= s.cfg.StreamIdleExpiry
		if old || idle {
			s.endStreamLocked(m)
		}
	}
}

// PressStop simulates the user pressing stop on a streaming message: the next
// chat.appendStream on it fails with stopped_by_user.
func (s *Server) PressStop(channelID, ts string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[channelID]
	if c == nil || c.byTS[ts] == nil {
		return false
	}
	c.byTS[ts].StoppedByUser = true
	s.notifyLocked()
	return true
}

// apiError is a Slack `ok:false` error.
type apiError string

type params struct {
	url.Values
}

// unfurl returns w with the unfurl flags p carries.
func (p params) unfurl(w Write) Write {
	w.UnfurlLinks, w.UnfurlMedia = p.Get("unfurl_links"), p.Get("unfurl_media")
	return w
}

func (p params) bool(key string) bool {
	v := p.Get(key)
	return v == "1" || v == "true"
}

type handler func(s *Server, p params, now time.Time) (map[string]any, apiError)

var methods = map[string]handler{
	"auth.test":                             (*Server).authTest,
	"apps.connections.open":                 (*Server).connectionsOpen,
	"users.info":                            (*Server).usersInfo,
	"usergroups.users.list":                 (*Server).userGroupsUsersList,
	"users.list":                            (*Server).usersList,
	"files.info":                            (*Server).filesInfo,
	"conversations.info":                    (*Server).conversationsInfo,
	"conversations.open":                    (*Server).conversationsOpen,
	"conversations.join":                    (*Server).conversationsJoin,
	"assistant.threads.setTitle":            (*Server).assistantNoop,
	"assistant.threads.setSuggestedPrompts": (*Server).setSuggestedPrompts,
	"conversations.replies":                 (*Server).conversationsReplies,
	"conversations.history":                 (*Server).conversationsHistory,
	"chat.postMessage":                      (*Server).chatPostMessage,
	"chat.update":                           (*Server).chatUpdate,
	"chat.postEphemeral":                    (*Server).chatPostEphemeral,
	"chat.delete":                           (*Server).chatDelete,
	"chat.startStream":                      (*Server).chatStartStream,
	"chat.appendStream":                     (*Server).chatAppendStream,
	"chat.stopStream":                       (*Server).chatStopStream,
	"reactions.add":                         (*Server).reactionsAdd,
	"reactions.remove":                      (*Server).reactionsRemove,
	"assistant.threads.setStatus":           (*Server).setStatus,
	"agents.sessions.setStatus":             (*Server).agentsSessionsSetStatus,
	"views.open":                            (*Server).viewsOpen,
	"chat.getPermalink":                     (*Server).chatGetPermalink,
	"files.getUploadURLExternal":            (*Server).getUploadURL,
	"files.completeUploadExternal":          (*Server).completeUpload,
	"assistant.search.context":              (*Server).assistantSearchContext,
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	vals, bearer, perr := readParams(r)
	token := vals.Get("token")
	if token == "" {
		token = bearer
	}
	if method == "apps.connections.open" {
		token = bearer // the app token is only accepted as Bearer
	}

	status, body, header := http.StatusOK, map[string]any(nil), http.Header{}
	var errCode apiError

	s.mu.Lock()
	now := time.Now()
	h, known := methods[method]
	switch {
	case perr != nil:
		errCode = "invalid_form_data"
	case len(s.faults[method]) > 0:
		f := s.faults[method][0]
		s.faults[method] = s.faults[method][1:]
		if f.retryAfter > 0 {
			status, errCode = http.StatusTooManyRequests, "ratelimited"
			header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(f.retryAfter)))
		} else {
			errCode = apiError(f.err)
		}
	case !known:
		errCode = "unknown_method"
	default:
		errCode = s.authLocked(method, token)
		if errCode != "" {
			break
		}
		if wait := s.limitLocked(method, vals.Get("channel"), now); wait > 0 {
			status, errCode = http.StatusTooManyRequests, "ratelimited"
			header.Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
			break
		}
		if method == "chat.startStream" && s.streamingErr != "" {
			errCode = apiError(s.streamingErr)
			break
		}
		s.expireStreamsLocked(now)
		body, errCode = h(s, params{vals}, now)
	}
	if status == http.StatusTooManyRequests {
		s.count429[method]++
	}
	if errCode != "" {
		body = map[string]any{"ok": false, "error": string(errCode)}
	} else {
		if body == nil {
			body = map[string]any{}
		}
		body["ok"] = true
	}
	if method == "auth.test" && errCode == "" {
		header.Set("X-OAuth-Scopes", strings.Join(s.cfg.Scopes, ","))
	}
	s.calls = append(s.calls, Call{
		Time: start, Method: method, Params: vals, Token: token, Status: status,
		OK: errCode == "", Error: string(errCode), Duration: time.Since(start),
	})
	s.notifyLocked()
	s.mu.Unlock()

	for k, v := range header {
		w.Header()[k] = v
	}
	writeJSON(w, status, body)
}

// readParams reads a form-encoded or JSON body (and the query) into url.Values, and the
// Bearer token if any.
func readParams(r *http.Request) (url.Values, string, error) {
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/json" {
		if err := r.ParseForm(); err != nil {
			return url.Values{}, bearer, err
		}
		return r.Form, bearer, nil
	}
	vals := r.URL.Query()
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		return vals, bearer, err
	}
	if len(strings.TrimSpace(string(body))) == 0 || string(body) == "null" {
		return vals, bearer, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return vals, bearer, err
	}
	for k, raw := range m {
		var str string
		if json.Unmarshal(raw, &str) == nil {
			vals.Set(k, str)
		} else {
			vals.Set(k, string(raw))
		}
	}
	return vals, bearer, nil
}

func (s *Server) authLocked(method, token string) apiError {
	want := s.cfg.BotToken
	if method == "apps.connections.open" {
		want = s.cfg.AppToken
	}
	switch token {
	case want:
		return ""
	case "":
		return "not_authed"
	case s.cfg.AppToken, s.cfg.BotToken:
		return "not_allowed_token_type"
	}
	return "invalid_auth"
}

func (s *Server) authTest(p params, now time.Time) (map[string]any, apiError) {
	out := map[string]any{
		"url":                   s.http.URL + "/",
		"team":                  s.cfg.TeamName,
		"user":                  s.cfg.BotName,
		"team_id":               s.cfg.TeamID,
		"user_id":               s.cfg.BotUserID,
		"bot_id":                s.cfg.BotID,
		"is_enterprise_install": false,
	}
	if s.cfg.EnterpriseID != "" {
		out["enterprise_id"] = s.cfg.EnterpriseID
	}
	return out, ""
}

func (s *Server) connectionsOpen(p params, now time.Time) (map[string]any, apiError) {
	s.seq++
	ticket := fmt.Sprintf("t%d", s.seq)
	s.tickets[ticket] = true
	u := "ws" + strings.TrimPrefix(s.http.URL, "http") + "/socket?ticket=" + ticket + "&app_id=" + s.cfg.AppID
	return map[string]any{"url": u}, ""
}

func (s *Server) usersInfo(p params, now time.Time) (map[string]any, apiError) {
	id := p.Get("user")
	if id == "" {
		return nil, "user_not_found"
	}
	return map[string]any{"user": s.userJSON(s.userLocked(id))}, ""
}

// usersList lists the workspace's people added with AddUser, sorted by id, limit a page ("cursor":
// the id the next page starts at). People of another team (User.Team) are left out: whether Slack
// lists the people of other organisations it shares channels with is not verified.
func (s *Server) usersList(p params, now time.Time) (map[string]any, apiError) {
	var ids []string
	for id, u := range s.users {
		if u.Team == "" || u.Team == s.cfg.TeamID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	limit, _ := strconv.Atoi(p.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	from, _ := slices.BinarySearch(ids, p.Get("cursor"))
	ids = ids[from:]
	next := ""
	if len(ids) > limit {
		next, ids = ids[limit], ids[:limit]
	}
	members := []map[string]any{}
	for _, id := range ids {
		members = append(members, s.userJSON(s.userLocked(id)))
	}
	return map[string]any{"members": members, "cache_ts": now.Unix(), "response_metadata": map[string]any{"next_cursor": next}}, ""
}

// userJSON is u as users.info and users.list show it.
func (s *Server) userJSON(u *User) map[string]any {
	id := u.ID
	user := map[string]any{
		"id": u.ID, "team_id": s.teamOfLocked(id), "name": u.Name, "real_name": u.RealName,
		"tz": u.TZ, "is_bot": u.IsBot, "deleted": false,
		"is_restricted": u.Guest || u.UltraGuest, "is_ultra_restricted": u.UltraGuest,
		"profile": map[string]any{"real_name": u.RealName, "display_name": u.DisplayName, "bot_id": u.BotID},
	}
	if u.Stranger {
		user["is_stranger"] = true
	}
	if u.Enterprise != "" {
		// The user object's enterprise_user, for a workspace of an Enterprise Grid org.
		user["enterprise_user"] = map[string]any{"id": u.ID, "enterprise_id": u.Enterprise, "teams": []string{s.teamOfLocked(id)}}
	}
	return user
}

// userGroupsUsersList is usergroups.users.list: the members of a group SetUserGroup made.
func (s *Server) userGroupsUsersList(p params, now time.Time) (map[string]any, apiError) {
	ms, ok := s.userGroups[p.Get("usergroup")]
	if !ok {
		return nil, "no_such_subteam"
	}
	return map[string]any{"users": ms}, ""
}

func (s *Server) conversationsInfo(p params, now time.Time) (map[string]any, apiError) {
	c, ok := s.channels[p.Get("channel")]
	if !ok {
		return nil, "channel_not_found"
	}
	return map[string]any{"channel": channelJSON(c)}, ""
}

func channelJSON(c *channel) map[string]any {
	return map[string]any{
		"id": c.id, "name": c.name, "is_channel": c.typ == ChannelPublic, "is_group": c.typ == ChannelPrivate,
		"is_im": c.typ == ChannelIM, "is_mpim": c.typ == ChannelMPIM, "is_private": c.typ != ChannelPublic,
		"is_member": c.member,
	}
}

// conversationsOpen opens the bot's DM with one user: channel id "D" + the user id.
func (s *Server) conversationsOpen(p params, now time.Time) (map[string]any, apiError) {
	users := p.Get("users")
	if users == "" || strings.Contains(users, ",") {
		return nil, "invalid_arguments" // one user: a DM; MPIMs are not modelled
	}
	s.userLocked(users)
	id := "D" + users
	_, existed := s.channels[id]
	c := s.channelLocked(id)
	c.typ = ChannelIM
	out := channelJSON(c)
	out["user"] = users
	return map[string]any{"channel": out, "already_open": existed, "no_op": existed}, ""
}

// conversationsJoin makes the bot a member of a public channel (method_not_supported_for_channel_type otherwise).
func (s *Server) conversationsJoin(p params, now time.Time) (map[string]any, apiError) {
	c, ok := s.channels[p.Get("channel")]
	if !ok {
		return nil, "channel_not_found"
	}
	if c.typ != ChannelPublic {
		return nil, "method_not_supported_for_channel_type"
	}
	c.member = true
	return map[string]any{"channel": channelJSON(c)}, ""
}

func (s *Server) assistantNoop(p params, now time.Time) (map[string]any, apiError) {
	if p.Get("channel_id") == "" || p.Get("thread_ts") == "" {
		return nil, "invalid_arguments"
	}
	return nil, ""
}

// maxSuggestedPrompts is how many suggested prompts Slack shows.
const maxSuggestedPrompts = 4

// setSuggestedPrompts checks the prompts (at most four, each with a title and a message). The
// thread is optional: in the agent pane (agent_view) the prompts sit at the top of the
// conversation.
func (s *Server) setSuggestedPrompts(p params, now time.Time) (map[string]any, apiError) {
	if p.Get("channel_id") == "" {
		return nil, "invalid_arguments"
	}
	var prompts []struct{ Title, Message string }
	if err := json.Unmarshal([]byte(p.Get("prompts")), &prompts); err != nil || len(prompts) == 0 || len(prompts) > maxSuggestedPrompts {
		return nil, "invalid_arguments"
	}
	for _, pr := range prompts {
		if pr.Title == "" || pr.Message == "" {
			return nil, "invalid_arguments"
		}
	}
	return nil, ""
}

// page cuts list at the cursor (an opaque offset) to at most the requested limit.
func (s *Server) page(list []map[string]any, p params, defLimit int) (map[string]any, apiError) {
	limit := defLimit
	if v := p.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, "invalid_limit"
		}
		if n > 0 {
			limit = n
		}
	}
	limit = min(limit, s.cfg.PageLimit)
	off := 0
	if cur := p.Get("cursor"); cur != "" {
		raw, err := base64.StdEncoding.DecodeString(cur)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(raw), "off:"))
		if err != nil || err2 != nil || n < 0 || n > len(list) {
			return nil, "invalid_cursor"
		}
		off = n
	}
	end := min(off+limit, len(list))
	out := map[string]any{"messages": list[off:end], "has_more": end < len(list)}
	next := ""
	if end < len(list) {
		next = base64.StdEncoding.EncodeToString([]byte("off:" + strconv.Itoa(end)))
	}
	out["response_metadata"] = map[string]any{"next_cursor": next}
	return out, ""
}

func (s *Server) conversationsReplies(p params, now time.Time) (map[string]any, apiError) {
	c, ok := s.channels[p.Get("channel")]
	if !ok {
		return nil, "channel_not_found"
	}
	ts := p.Get("ts")
	parent := c.byTS[ts]
	if parent == nil {
		return nil, "thread_not_found"
	}
	if parent.ThreadTS != "" && parent.ThreadTS != parent.TS { // ts of a reply: Slack answers with its thread
		ts = parent.ThreadTS
		if parent = c.byTS[ts]; parent == nil {
			return nil, "thread_not_found"
		}
	}
	meta := p.bool("include_all_metadata")
	list := []map[string]any{s.messageJSON(c, parent, meta)}
	for _, m := range c.msgs {
		if m.ThreadTS == ts && m.TS != ts {
			list = append(list, s.messageJSON(c, m, meta))
		}
	}
	return s.page(list, p, 1000)
}

func (s *Server) conversationsHistory(p params, now time.Time) (map[string]any, apiError) {
	c, ok := s.channels[p.Get("channel")]
	if !ok {
		return nil, "channel_not_found"
	}
	meta := p.bool("include_all_metadata")
	latest, oldest, inclusive := p.Get("latest"), p.Get("oldest"), p.bool("inclusive")
	var list []map[string]any
	for _, m := range slices.Backward(c.msgs) { // newest first
		if m.ThreadTS != "" && m.ThreadTS != m.TS && m.Subtype != "thread_broadcast" {
			continue
		}
		if latest != "" && (tsAfter(m.TS, latest) || (!inclusive && m.TS == latest)) {
			continue
		}
		if oldest != "" && (tsAfter(oldest, m.TS) || (!inclusive && m.TS == oldest)) {
			continue
		}
		list = append(list, s.messageJSON(c, m, meta))
	}
	return s.page(list, p, 100)
}

// tsAfter reports a > b for Slack timestamps.
func tsAfter(a, b string) bool {
	fa, _ := strconv.ParseFloat(a, 64)
	fb, _ := strconv.ParseFloat(b, 64)
	return fa > fb
}

// bodyOf reads the message content params of a post or update.
func bodyOf(p params) (text string, markdown bool, blocks json.RawMessage, err apiError) {
	md, hasMD := p.Values["markdown_text"]
	_, hasText := p.Values["text"]
	if hasMD {
		if hasText || p.Get("blocks") != "" {
			return "", false, nil, "markdown_text_conflict"
		}
		if utf8.RuneCountInString(md[0]) > MarkdownTextLimit {
			return "", false, nil, "msg_too_long"
		}
		return md[0], true, nil, ""
	}
	if b := p.Get("blocks"); b != "" {
		if !json.Valid([]byte(b)) {
			return "", false, nil, "invalid_blocks"
		}
		if e := checkBlocks(json.RawMessage(b)); e != "" {
			return "", false, nil, e
		}
		blocks = json.RawMessage(b)
	}
	return p.Get("text"), false, blocks, ""
}

func metadataOf(p params) (json.RawMessage, apiError) {
	m := p.Get("metadata")
	if m == "" {
		return nil, ""
	}
	if !json.Valid([]byte(m)) {
		return nil, "invalid_metadata_format"
	}
	return json.RawMessage(m), ""
}

func (s *Server) writableChannelLocked(id string) (*channel, apiError) {
	if id == "" {
		return nil, "channel_not_found"
	}
	c := s.channelLocked(id)
	if !c.member {
		return nil, "not_in_channel"
	}
	return c, ""
}

func (s *Server) chatPostMessage(p params, now time.Time) (map[string]any, apiError) {
	c, e := s.writableChannelLocked(p.Get("channel"))
	if e != "" {
		return nil, e
	}
	text, md, blocks, e := bodyOf(p)
	if e == "" {
		e = s.checkTablesLocked(blocks)
	}
	if e != "" {
		return nil, e
	}
	if text == "" && blocks == nil && p.Get("attachments") == "" {
		return nil, "no_text"
	}
	if utf8.RuneCountInString(text) > PostTextLimit {
		return nil, "msg_too_long"
	}
	meta, e := metadataOf(p)
	if e != "" {
		return nil, e
	}
	threadTS := p.Get("thread_ts")
	if threadTS != "" && c.byTS[threadTS] == nil {
		return nil, "thread_not_found"
	}
	subtype := ""
	if threadTS != "" && p.bool("reply_broadcast") {
		subtype = "thread_broadcast"
	}
	m := s.addMessageLocked(&Message{
		Channel: c.id, ThreadTS: threadTS, User: s.cfg.BotUserID, BotID: s.cfg.BotID, Subtype: subtype,
		Text: text, Markdown: md, Blocks: blocks, Metadata: meta,
	}, now)
	s.recordWriteLocked(p.unfurl(Write{Time: now, Kind: WritePost, Channel: c.id, TS: m.TS, ThreadTS: threadTS, Text: text}))
	s.echoLocked(c, m, nil, now)
	return map[string]any{"channel": c.id, "ts": m.TS, "message": s.messageJSON(c, m, true)}, ""
}

func (s *Server) chatUpdate(p params, now time.Time) (map[string]any, apiError) {
	c, m, e := s.ownMessageLocked(p, "cant_update_message")
	if e != "" {
		return nil, e
	}
	if m.Streaming {
		return nil, "streaming_state_conflict"
	}
	text, md, blocks, e := bodyOf(p)
	if e == "" {
		e = s.checkTablesLocked(blocks)
	}
	if e != "" {
		return nil, e
	}
	_, hasText := p.Values["text"]
	meta, e := metadataOf(p)
	if e != "" {
		return nil, e
	}
	if !hasText && !md && blocks == nil && meta == nil && p.Get("attachments") == "" {
		return nil, "no_text"
	}
	if !md && utf8.RuneCountInString(text) > UpdateTextLimit {
		return nil, "msg_too_long"
	}
	prev := copyMessage(m)
	if hasText || md || blocks != nil {
		m.Text, m.Markdown = text, md
	}
	if blocks != nil || md {
		m.Blocks = blocks
		if string(blocks) == "[]" {
			m.Blocks = nil
		}
	}
	if meta != nil {
		m.Metadata = meta
	}
	m.Edited, m.EditedTS = true, s.newTSLocked(now)
	s.recordWriteLocked(p.unfurl(Write{Time: now, Kind: WriteUpdate, Channel: c.id, TS: m.TS, ThreadTS: threadOf(m), Text: m.Text}))
	s.echoLocked(c, m, &prev, now)
	return map[string]any{"channel": c.id, "ts": m.TS, "text": m.Text, "message": s.messageJSON(c, m, true)}, ""
}

// threadOf is the thread a message belongs to ("" for a top-level message).
func threadOf(m *Message) string {
	if m.ThreadTS == m.TS {
		return ""
	}
	return m.ThreadTS
}

func (s *Server) chatPostEphemeral(p params, now time.Time) (map[string]any, apiError) {
	c, e := s.writableChannelLocked(p.Get("channel"))
	if e != "" {
		return nil, e
	}
	user := p.Get("user")
	if user == "" {
		return nil, "user_not_in_channel"
	}
	text, _, blocks, e := bodyOf(p)
	if e != "" {
		return nil, e
	}
	if text == "" && blocks == nil {
		return nil, "no_text"
	}
	ts := s.newTSLocked(now)
	s.ephemeral = append(s.ephemeral, Ephemeral{Time: now, Channel: c.id, User: user, ThreadTS: p.Get("thread_ts"), Text: text, Blocks: blocks, TS: ts})
	s.recordWriteLocked(p.unfurl(Write{Time: now, Kind: WriteEphemeral, Channel: c.id, TS: ts, ThreadTS: p.Get("thread_ts"), User: user, Text: text}))
	return map[string]any{"message_ts": ts}, ""
}

func (s *Server) chatDelete(p params, now time.Time) (map[string]any, apiError) {
	c, m, e := s.ownMessageLocked(p, "cant_delete_message")
	if e != "" {
		return nil, e
	}
	s.removeMessageLocked(c, m.TS)
	s.recordWriteLocked(Write{Time: now, Kind: WriteDelete, Channel: c.id, TS: m.TS, ThreadTS: threadOf(m)})
	return map[string]any{"channel": c.id, "ts": m.TS}, ""
}

func (s *Server) chatStartStream(p params, now time.Time) (map[string]any, apiError) {
	c, e := s.writableChannelLocked(p.Get("channel"))
	if e != "" {
		return nil, e
	}
	threadTS := p.Get("thread_ts")
	if threadTS == "" {
		return nil, "invalid_arguments" // streamed messages are always replies to a user request
	}
	if c.byTS[threadTS] == nil {
		return nil, "thread_not_found"
	}
	if c.typ != ChannelIM {
		if p.Get("recipient_user_id") == "" {
			return nil, "missing_recipient_user_id"
		}
		if p.Get("recipient_team_id") == "" {
			return nil, "missing_recipient_team_id"
		}
	}
	md := p.Get("markdown_text")
	if utf8.RuneCountInString(md) > MarkdownTextLimit {
		return nil, "msg_too_long"
	}
	m := s.addMessageLocked(&Message{
		Channel: c.id, ThreadTS: threadTS, User: s.cfg.BotUserID, BotID: s.cfg.BotID,
		Text: md, Markdown: true, Streaming: true,
	}, now)
	s.streams[m], s.lastWrite[m] = now, now
	s.recordWriteLocked(p.unfurl(Write{Time: now, Kind: WriteStart, Channel: c.id, TS: m.TS, ThreadTS: threadTS, Text: m.Text, Delta: md}))
	s.echoLocked(c, m, nil, now)
	return map[string]any{"channel": c.id, "ts": m.TS}, ""
}

// ownMessageLocked finds the message named by the channel and ts params and checks that the bot
// posted it; notOwn is the method's own error for someone else's message.
func (s *Server) ownMessageLocked(p params, notOwn apiError) (*channel, *Message, apiError) {
	c, ok := s.channels[p.Get("channel")]
	if !ok {
		return nil, nil, "channel_not_found"
	}
	m := c.byTS[p.Get("ts")]
	if m == nil {
		return nil, nil, "message_not_found"
	}
	if m.BotID != s.cfg.BotID {
		return nil, nil, notOwn
	}
	return c, m, ""
}

func (s *Server) streamingMessageLocked(p params) (*channel, *Message, apiError) {
	c, m, e := s.ownMessageLocked(p, "message_not_owned_by_app")
	if e != "" {
		return nil, nil, e
	}
	if !m.Streaming {
		return nil, nil, "message_not_in_streaming_state"
	}
	return c, m, ""
}

func (s *Server) chatAppendStream(p params, now time.Time) (map[string]any, apiError) {
	c, m, e := s.streamingMessageLocked(p)
	if e != "" {
		return nil, e
	}
	if m.StoppedByUser {
		return nil, "stopped_by_user"
	}
	md := p.Get("markdown_text")
	if md == "" && p.Get("chunks") == "" {
		return nil, "invalid_arguments"
	}
	if utf8.RuneCountInString(md) > MarkdownTextLimit {
		return nil, "msg_too_long"
	}
	text, e := applyChunks(m, p.Get("chunks"))
	if e != "" {
		return nil, e
	}
	md += text
	m.Text += md
	s.lastWrite[m] = now
	s.recordWriteLocked(p.unfurl(Write{Time: now, Kind: WriteAppend, Channel: c.id, TS: m.TS, ThreadTS: threadOf(m), Text: m.Text, Delta: md}))
	return map[string]any{"channel": c.id, "ts": m.TS}, ""
}

func (s *Server) chatStopStream(p params, now time.Time) (map[string]any, apiError) {
	c, m, e := s.streamingMessageLocked(p)
	if e != "" {
		return nil, e
	}
	md := p.Get("markdown_text")
	if utf8.RuneCountInString(md) > MarkdownTextLimit {
		return nil, "msg_too_long"
	}
	meta, e := metadataOf(p)
	if e != "" {
		return nil, e
	}
	if b := p.Get("blocks"); b != "" {
		if !json.Valid([]byte(b)) {
			return nil, "invalid_blocks"
		}
		m.Blocks = json.RawMessage(b)
	}
	m.Text += md
	m.Streaming = false
	delete(s.streams, m)
	delete(s.lastWrite, m)
	if meta != nil {
		m.Metadata = meta
	}
	s.recordWriteLocked(p.unfurl(Write{Time: now, Kind: WriteStop, Channel: c.id, TS: m.TS, ThreadTS: threadOf(m), Text: m.Text, Delta: md}))
	return map[string]any{"channel": c.id, "ts": m.TS, "message": s.messageJSON(c, m, true)}, ""
}

func (s *Server) reactionTargetLocked(p params) (*Message, apiError) {
	c, ok := s.channels[p.Get("channel")]
	if !ok {
		return nil, "channel_not_found"
	}
	m := c.byTS[p.Get("timestamp")]
	if m == nil {
		return nil, "message_not_found"
	}
	if p.Get("name") == "" {
		return nil, "invalid_name"
	}
	return m, ""
}

func (s *Server) reactionsAdd(p params, now time.Time) (map[string]any, apiError) {
	m, e := s.reactionTargetLocked(p)
	if e != "" {
		return nil, e
	}
	if slices.Contains(m.Reactions, p.Get("name")) {
		return nil, "already_reacted"
	}
	m.Reactions = append(m.Reactions, p.Get("name"))
	return nil, ""
}

func (s *Server) reactionsRemove(p params, now time.Time) (map[string]any, apiError) {
	m, e := s.reactionTargetLocked(p)
	if e != "" {
		return nil, e
	}
	i := slices.Index(m.Reactions, p.Get("name"))
	if i < 0 {
		return nil, "no_reaction"
	}
	m.Reactions = slices.Delete(m.Reactions, i, i+1)
	return nil, ""
}

func (s *Server) setStatus(p params, now time.Time) (map[string]any, apiError) {
	ch, thread := p.Get("channel_id"), p.Get("thread_ts")
	if ch == "" || thread == "" {
		return nil, "invalid_arguments"
	}
	if _, ok := p.Values["status"]; !ok {
		return nil, "invalid_arguments"
	}
	if p.Get("status") == "" {
		delete(s.statuses, ch+"/"+thread)
	} else {
		s.statuses[ch+"/"+thread] = p.Get("status")
	}
	return nil, ""
}

func (s *Server) getUploadURL(p params, now time.Time) (map[string]any, apiError) {
	name := p.Get("filename")
	length, err := strconv.Atoi(p.Get("length"))
	if name == "" || err != nil || length <= 0 {
		return nil, "invalid_arguments"
	}
	f := &File{ID: s.nextIDLocked("F"), Name: name, AltText: p.Get("alt_txt"), Length: length, Time: now}
	s.files[f.ID] = f
	s.fileOrder = append(s.fileOrder, f.ID)
	return map[string]any{"upload_url": s.http.URL + "/upload/" + f.ID, "file_id": f.ID}, ""
}

func (s *Server) completeUpload(p params, now time.Time) (map[string]any, apiError) {
	var list []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(p.Get("files")), &list); err != nil || len(list) == 0 {
		return nil, "invalid_arguments"
	}
	for _, it := range list {
		if f := s.files[it.ID]; f == nil || !f.Uploaded {
			return nil, "file_not_found"
		}
	}
	chID := p.Get("channel_id")
	if chID == "" {
		chID, _, _ = strings.Cut(p.Get("channels"), ",")
	}
	var out []map[string]any
	for _, it := range list {
		out = append(out, map[string]any{"id": it.ID, "title": it.Title})
	}
	if chID == "" { // private to the uploader
		for _, it := range list {
			s.files[it.ID].Title = it.Title
		}
		return map[string]any{"files": out}, ""
	}
	c, e := s.writableChannelLocked(chID)
	if e != "" {
		return nil, e
	}
	threadTS := p.Get("thread_ts")
	if threadTS != "" && c.byTS[threadTS] == nil {
		return nil, "thread_not_found"
	}
	m := &Message{Channel: c.id, ThreadTS: threadTS, User: s.cfg.BotUserID, BotID: s.cfg.BotID,
		Text: p.Get("initial_comment"), Subtype: ""}
	if b := p.Get("blocks"); b != "" && json.Valid([]byte(b)) {
		m.Blocks = json.RawMessage(b)
	}
	for _, it := range list {
		m.Files = append(m.Files, it.ID)
	}
	s.addMessageLocked(m, now)
	for _, it := range list {
		f := s.files[it.ID]
		f.Title, f.Shared, f.Channel, f.ThreadTS = it.Title, true, c.id, threadTS
		f.InitialComment, f.MessageTS = m.Text, m.TS
	}
	s.recordWriteLocked(Write{Time: now, Kind: WriteFile, Channel: c.id, TS: m.TS, ThreadTS: threadTS, Text: m.Text})
	return map[string]any{"files": out}, ""
}

// serveUpload is the upload_url: it takes the bytes as multipart field "file" or as the
// raw body, like files.slack.com.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/upload/")
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var data []byte
	var err error
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		data, err = readMultipartFile(r)
	} else {
		data, err = io.ReadAll(io.LimitReader(r.Body, 100<<20))
	}
	if err != nil {
		http.Error(w, "bad upload: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	f := s.files[id]
	if f != nil {
		f.Bytes, f.Uploaded = data, true
		s.notifyLocked()
	}
	s.mu.Unlock()
	if f == nil {
		http.Error(w, "unknown upload", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "OK - "+strconv.Itoa(len(data)))
}

// readMultipartFile returns the content of the form field "file".
func readMultipartFile(r *http.Request) ([]byte, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, err
	}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil, fmt.Errorf("no file field")
		}
		if err != nil {
			return nil, err
		}
		if part.FormName() == "file" {
			return io.ReadAll(io.LimitReader(part, 100<<20))
		}
	}
}

// serveFileDownload serves a file's bytes at its url_private, for the bot token only.
func (s *Server) serveFileDownload(w http.ResponseWriter, r *http.Request) {
	id, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/files-pri/"), "/")
	bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	f := s.files[id]
	var data []byte
	if f != nil && f.Uploaded {
		data = f.Bytes
	}
	ok := bearer == s.cfg.BotToken && (f == nil || !f.NoAccess)
	s.mu.Unlock()
	switch {
	case ok && data != nil && s.redirectFile(w, r, f):
	case !ok:
		// Slack redirects to a sign-in page; slack-go reports that. A 403 is as clear here.
		http.Error(w, "not authorized", http.StatusForbidden)
	case data == nil:
		http.NotFound(w, r)
	default:
		w.Header().Set("Content-Type", f.mimeType())
		_, _ = w.Write(data)
	}
}
