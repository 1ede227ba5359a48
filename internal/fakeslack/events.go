package fakeslack

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// PostUserMessage stores a message from user (in the thread threadTS, or top level when
// "") and delivers the events Slack would for the configured subscriptions: app_mention
// when the text mentions the bot outside a DM (Slack sends no app_mention in DMs), and a
// `message` event with channel_type channel/group/im/mpim (message.channels, .groups, .im,
// .mpim). A channel mention with message.channels subscribed yields both events for one
// message, as in Slack. It returns the message's ts. See Post for more kinds of message.
func (s *Server) PostUserMessage(channelID, user, threadTS, text string) string {
	return s.Post(UserMessage{Channel: channelID, User: user, ThreadTS: threadTS, Text: text})
}

// UserMessage is a message typed by a person (or posted by another bot) for Post.
type UserMessage struct {
	Channel  string
	User     string
	ThreadTS string
	Text     string
	BotID    string          // set: a message from another bot (bot_id, no client_msg_id)
	Subtype  string          // e.g. "thread_broadcast"; "file_share" is set when Files are given
	Files    []UserFile      // files attached to the message
	Blocks   json.RawMessage // nil: a rich_text block built from Text (as Slack's clients send)
	// Time, when set, is when the message was posted: it is stored with a ts of that time, in its
	// place in the channel's history, and no event is delivered (history from before the test).
	// Zero: now, with its events.
	Time time.Time
}

// UserFile is a file a person attaches to a message. Its bytes are served at the file's
// url_private (Bearer bot token required, as Slack does).
type UserFile struct {
	Name  string
	Bytes []byte
	// Mimetype overrides the type guessed from Name's extension.
	Mimetype string
	// Redirect is how url_private answers (see Redirect).
	Redirect Redirect
	// CheckInfo makes the event and the thread carry only the file's id with
	// "file_access": "check_file_info" (as for a file shared from another workspace): files.info
	// has the rest.
	CheckInfo bool
	// NoAccess: files.info answers file_not_found and url_private 403, as for a file the bot
	// cannot see.
	NoAccess bool
}

// Post stores m and delivers its events as PostUserMessage describes. It returns the ts.
func (s *Server) Post(m UserMessage) string {
	ts, _ := s.post(0, m) // to 0 never fails
	return ts
}

// post is Post, with the events to the connection to (0: the one whose turn it is).
func (s *Server) post(to int, m UserMessage) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkViaLocked(to); err != nil {
		return "", err
	}
	now := time.Now()
	if !m.Time.IsZero() {
		now = m.Time
	}
	c := s.channelLocked(m.Channel)
	s.userLocked(m.User)
	msg := &Message{Channel: c.id, ThreadTS: m.ThreadTS, User: m.User, BotID: m.BotID, Text: m.Text,
		Subtype: m.Subtype, Blocks: m.Blocks}
	if msg.Blocks == nil && m.Text != "" {
		msg.Blocks = richText(m.Text, newEnvelopeID()[:5])
	}
	for _, uf := range m.Files {
		f := &File{ID: s.nextIDLocked("F"), Name: uf.Name, Length: len(uf.Bytes), Bytes: uf.Bytes,
			Uploaded: true, Shared: true, Channel: c.id, ThreadTS: m.ThreadTS, Time: now,
			Mimetype: uf.Mimetype, Redirect: uf.Redirect, CheckInfo: uf.CheckInfo, NoAccess: uf.NoAccess}
		s.files[f.ID] = f
		s.fileOrder = append(s.fileOrder, f.ID)
		msg.Files = append(msg.Files, f.ID)
		if msg.Subtype == "" {
			msg.Subtype = "file_share"
		}
	}
	if m.Time.IsZero() {
		s.addMessageLocked(msg, now)
	} else {
		s.addPastMessageLocked(msg, now)
	}
	for _, id := range msg.Files {
		s.files[id].MessageTS = msg.TS
	}
	if m.Time.IsZero() {
		s.deliverLocked(c, msg, now, to)
	}
	s.notifyLocked()
	return msg.TS, nil
}

// addPastMessageLocked stores m with a ts of the time at (made unique), in its place in the
// channel's history.
func (s *Server) addPastMessageLocked(m *Message, at time.Time) {
	c := s.channelLocked(m.Channel)
	us := at.UnixMicro()
	ts := func() string { return fmt.Sprintf("%d.%06d", us/1e6, us%1e6) }
	for c.byTS[ts()] != nil {
		us++
	}
	m.TS = ts()
	i := slices.IndexFunc(c.msgs, func(o *Message) bool { return tsAfter(o.TS, m.TS) })
	if i < 0 {
		i = len(c.msgs)
	}
	c.msgs = slices.Insert(c.msgs, i, m)
	c.byTS[m.TS] = m
	if m.ThreadTS != "" {
		if parent := c.byTS[m.ThreadTS]; parent != nil && parent.ThreadTS == "" {
			parent.ThreadTS = parent.TS
		}
	}
}

// deliverLocked queues the events Slack sends for a new message, to the connection to (0: the
// one whose turn it is).
func (s *Server) deliverLocked(c *channel, m *Message, now time.Time, to int) {
	if c.typ != ChannelIM && s.mentionsBot(m.Text) && s.subscribed("app_mention") {
		s.enqueueEventLocked(s.eventLocked(c, m, "app_mention"), now, to)
	}
	if s.subscribed("message." + subscriptionOf(c.typ)) {
		s.enqueueEventLocked(s.eventLocked(c, m, "message"), now, to)
	}
}

// EditUserMessage changes the text of a person's message and delivers what Slack sends:
// a message_changed event (message.* subscriptions) and, if the new text mentions the
// bot outside a DM, an app_mention again, carrying `edited`. It reports whether the
// message exists.
func (s *Server) EditUserMessage(channelID, ts, text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	c := s.channels[channelID]
	if c == nil || c.byTS[ts] == nil {
		return false
	}
	m := c.byTS[ts]
	prev := copyMessage(m)
	m.Text, m.Blocks = text, richText(text, newEnvelopeID()[:5])
	m.Edited, m.EditedTS = true, s.newTSLocked(now)
	if c.typ != ChannelIM && s.mentionsBot(text) && s.subscribed("app_mention") {
		ev := s.eventLocked(c, m, "app_mention")
		ev["edited"] = map[string]any{"user": m.User, "ts": m.EditedTS}
		ev["event_ts"] = m.EditedTS
		s.enqueueEventLocked(ev, now, 0)
	}
	if s.subscribed("message." + subscriptionOf(c.typ)) {
		s.enqueueEventLocked(s.changedEventLocked(c, m, &prev, now), now, 0)
	}
	s.notifyLocked()
	return true
}

func (s *Server) changedEventLocked(c *channel, m, prev *Message, now time.Time) map[string]any {
	ts := s.newTSLocked(now)
	return map[string]any{
		"type":             "message",
		"subtype":          "message_changed",
		"hidden":           true,
		"channel":          c.id,
		"channel_type":     c.typ,
		"ts":               ts,
		"event_ts":         ts,
		"message":          s.messageJSON(c, m, false),
		"previous_message": s.messageJSON(c, prev, false),
	}
}

// EventOf builds the inner event Slack would send for a stored message: typ is
// "app_mention" or "message". It returns nil if the message does not exist. Use it with
// SendEvent for deliveries PostUserMessage does not make (an app_mention in a DM).
func (s *Server) EventOf(channelID, ts, typ string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[channelID]
	if c == nil || c.byTS[ts] == nil {
		return nil
	}
	return s.eventLocked(c, c.byTS[ts], typ)
}

// SendEvent wraps an inner event in an events_api envelope (a new event_id) and queues it.
// It returns the envelope id.
func (s *Server) SendEvent(event map[string]any) string {
	id, _ := s.sendEvent(0, event) // to 0 never fails
	return id
}

// sendEvent is SendEvent, to the connection to (0: the one whose turn it is).
func (s *Server) sendEvent(to int, event map[string]any) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkViaLocked(to); err != nil {
		return "", err
	}
	return s.enqueueEventLocked(event, time.Now(), to).ID, nil
}

func (s *Server) mentionsBot(text string) bool {
	return strings.Contains(text, "<@"+s.cfg.BotUserID+">") || strings.Contains(text, "<@"+s.cfg.BotUserID+"|")
}

func (s *Server) subscribed(event string) bool { return slices.Contains(s.cfg.Subscriptions, event) }

func subscriptionOf(typ string) string {
	switch typ {
	case ChannelPrivate:
		return "groups"
	case ChannelIM:
		return "im"
	case ChannelMPIM:
		return "mpim"
	}
	return "channels"
}

func (s *Server) eventLocked(c *channel, m *Message, typ string) map[string]any {
	ev := map[string]any{
		"type":     typ,
		"text":     m.Text,
		"ts":       m.TS,
		"channel":  c.id,
		"event_ts": m.TS,
		"team":     s.cfg.TeamID,
	}
	if m.User != "" {
		ev["user"] = m.User
		if team := s.teamOfLocked(m.User); team != s.cfg.TeamID || s.cfg.UserTeams {
			// Someone of another workspace in a shared channel: their message names their team.
			// Unverified which of these fields Slack sets on every such event (slack-go reads
			// user_team and source_team; Slack's examples of shared-channel messages show them).
			// A member's names it only with Config.UserTeams (see there: Slack differs).
			ev["team"], ev["user_team"], ev["source_team"] = team, team, team
		}
	}
	if m.BotID != "" {
		ev["bot_id"] = m.BotID
		for k, v := range s.botProfile(m.BotID) {
			ev[k] = v
		}
	} else {
		ev["client_msg_id"] = newEnvelopeID()
		if m.User != "" {
			ev["action_token"] = s.issueActionTokenLocked(m.User) // see search.go
		}
	}
	if typ == "message" {
		ev["channel_type"] = c.typ
	}
	if m.Subtype != "" {
		ev["subtype"] = m.Subtype
	}
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		ev["thread_ts"] = m.ThreadTS
		if p := c.byTS[m.ThreadTS]; p != nil {
			ev["parent_user_id"] = p.User
		}
	}
	if len(m.Blocks) > 0 {
		ev["blocks"] = m.Blocks
	}
	if len(m.Files) > 0 {
		var files []map[string]any
		for _, id := range m.Files {
			if f := s.files[id]; f != nil {
				files = append(files, s.fileRef(f))
			}
		}
		ev["files"] = files
	}
	return ev
}

// enqueueEventLocked wraps event in an events_api envelope and queues it for the connection to
// (0: the one whose turn it is).
func (s *Server) enqueueEventLocked(event map[string]any, now time.Time, to int) *envelope {
	s.seq++
	eventID := "Ev" + itoa36(s.seq) + strings.ToUpper(newEnvelopeID()[:6])
	payload, _ := json.Marshal(map[string]any{
		"token":           "verification-token",
		"team_id":         s.cfg.TeamID,
		"context_team_id": s.cfg.TeamID,
		"api_app_id":      s.cfg.AppID,
		"event":           event,
		"type":            "event_callback",
		"event_id":        eventID,
		"event_time":      now.Unix(),
		"authorizations": []map[string]any{{
			"enterprise_id": nil, "team_id": s.cfg.TeamID, "user_id": s.cfg.BotUserID,
			"is_bot": true, "is_enterprise_install": false,
		}},
		"is_ext_shared_channel": false,
		"event_context":         "4-fake-" + eventID,
	})
	typ, _ := event["type"].(string)
	e := &envelope{
		Envelope: Envelope{ID: newEnvelopeID(), Type: "events_api", EventID: eventID, EventType: typ},
		payload:  payload,
		to:       to,
	}
	s.enqueueLocked(e)
	return e
}

// echoLocked delivers the message event Slack sends for the bot's own post (prev nil) or
// edit (prev = the message before), when Config.EchoBotMessages is set.
func (s *Server) echoLocked(c *channel, m *Message, prev *Message, now time.Time) {
	if !s.cfg.EchoBotMessages || !s.subscribed("message."+subscriptionOf(c.typ)) {
		return
	}
	if prev == nil {
		s.enqueueEventLocked(s.eventLocked(c, m, "message"), now, 0)
		return
	}
	s.enqueueEventLocked(s.changedEventLocked(c, m, prev, now), now, 0)
}

// SlashCommand delivers a slash_commands envelope (accepts_response_payload true) as if
// user typed `command text` in channelID, and returns its response_url (on this server).
func (s *Server) SlashCommand(channelID, user, command, text string) string {
	u, _ := s.slashCommand(0, channelID, user, command, text) // to 0 never fails
	return u
}

// slashCommand is SlashCommand, to the connection to (0: the one whose turn it is).
func (s *Server) slashCommand(to int, channelID, user, command, text string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkViaLocked(to); err != nil {
		return "", err
	}
	c := s.channelLocked(channelID)
	u := s.userLocked(user)
	id := s.nextIDLocked("R")
	respURL := s.http.URL + "/response/" + id
	s.responses[id] = &responseURL{url: respURL, channel: c.id, user: user, command: command}
	// team_id is the workspace's even for someone of another organisation: unverified whether
	// Slack sends theirs there (the payload has no other field for the user's team), so the fake
	// sends what tells the bot nothing, and the bot must look them up.
	payload, _ := json.Marshal(map[string]any{
		"token":                 "verification-token",
		"team_id":               s.cfg.TeamID,
		"team_domain":           strings.ReplaceAll(strings.ToLower(s.cfg.TeamName), " ", "-"),
		"channel_id":            c.id,
		"channel_name":          c.name,
		"user_id":               user,
		"user_name":             u.Name,
		"command":               command,
		"text":                  text,
		"api_app_id":            s.cfg.AppID,
		"is_enterprise_install": false,
		"response_url":          respURL,
		"trigger_id":            s.triggerLocked(user, time.Now()),
	})
	s.enqueueLocked(&envelope{
		Envelope: Envelope{ID: newEnvelopeID(), Type: "slash_commands"},
		accepts:  true,
		payload:  payload,
		to:       to,
	})
	return respURL, nil
}

// serveResponseURL takes posts to a slash command's or a click's response_url: JSON
// {text, response_type, replace_original, delete_original, blocks, thread_ts}. Blocks are held to
// the Block Kit limits chat.postMessage's are (400 invalid_blocks); a post with neither text nor
// blocks is refused (400 no_text), unless it deletes.
func (s *Server) serveResponseURL(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/response/")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	var msg responsePost
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Method != http.MethodPost || ct != "application/json" || json.Unmarshal(body, &msg) != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"ok": false, "error": "invalid_payload"})
		return
	}
	if msg.ResponseType == "" {
		msg.ResponseType = "ephemeral"
	}
	if string(msg.Blocks) == "null" {
		msg.Blocks = nil
	}
	status, answer := s.respond(id, r.URL.Path, msg, body)
	writeJSON(w, status, answer)
}

// responsePost is the body of a response_url post.
type responsePost struct {
	Text            string          `json:"text"`
	ResponseType    string          `json:"response_type"`
	ReplaceOriginal bool            `json:"replace_original"`
	DeleteOriginal  bool            `json:"delete_original"`
	ThreadTS        string          `json:"thread_ts"`
	Blocks          json.RawMessage `json:"blocks"`
	UnfurlLinks     *bool           `json:"unfurl_links"`
	UnfurlMedia     *bool           `json:"unfurl_media"`
}

// flag is a JSON flag as a form would carry it: "" when absent.
func flag(b *bool) string {
	if b == nil {
		return ""
	}
	return strconv.FormatBool(*b)
}

// respond applies one response_url post and returns the HTTP answer. An ephemeral post adds a
// message only its person sees (with a ts of its own, so that its buttons can be clicked); one
// that replaces or deletes the original changes the message the response_url came from: the
// clicked message for a click's, the last ephemeral message it added for a slash command's.
func (s *Server) respond(id, path string, msg responsePost, body []byte) (int, map[string]any) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.notifyLocked()
	ru := s.responses[id]
	status, errCode := http.StatusOK, ""
	switch {
	case ru == nil:
		status, errCode = http.StatusNotFound, "invalid_url"
	case ru.uses >= s.cfg.ResponseURLUses:
		status, errCode = http.StatusNotFound, "used_url"
	case len(msg.Blocks) > 0 && (!json.Valid(msg.Blocks) || checkBlocks(msg.Blocks) != ""):
		status, errCode = http.StatusBadRequest, "invalid_blocks"
	case msg.Text == "" && len(msg.Blocks) == 0 && !msg.DeleteOriginal:
		status, errCode = http.StatusBadRequest, "no_text"
	}
	post := ResponseURLPost{Time: now, URL: s.http.URL + path, ResponseType: msg.ResponseType, Text: msg.Text,
		ReplaceOriginal: msg.ReplaceOriginal, DeleteOriginal: msg.DeleteOriginal, Blocks: msg.Blocks, Body: body, Status: status}
	if ru != nil {
		post.Channel, post.User, post.Command = ru.channel, ru.user, ru.command
	}
	if errCode != "" {
		s.respPosts = append(s.respPosts, post)
		return status, map[string]any{"ok": false, "error": errCode}
	}
	ru.uses++
	ts := ""
	switch original := ru.original; {
	case (msg.ReplaceOriginal || msg.DeleteOriginal) && original != "" && !ru.ephemeral:
		// The clicked message is a channel message: it is edited or deleted.
		if c := s.channels[ru.channel]; c != nil && c.byTS[original] != nil {
			if msg.DeleteOriginal {
				s.removeMessageLocked(c, original)
			} else {
				m := c.byTS[original]
				m.Text, m.Blocks = msg.Text, msg.Blocks
				m.Edited, m.EditedTS = true, s.newTSLocked(now)
			}
		}
		post.TS = original
	case (msg.ReplaceOriginal || msg.DeleteOriginal) && original != "":
		post.TS, post.private = original, true
	case msg.ResponseType == "in_channel":
		m := s.addMessageLocked(&Message{Channel: ru.channel, ThreadTS: msg.ThreadTS, User: s.cfg.BotUserID, BotID: s.cfg.BotID,
			Text: msg.Text, Blocks: msg.Blocks}, now)
		ts = m.TS
	default:
		post.TS, post.private = s.newTSLocked(now), true
		if ru.command != "" { // a slash command's later replace_original changes this one
			ru.original, ru.ephemeral = post.TS, true
		}
	}
	s.respPosts = append(s.respPosts, post)
	s.recordWriteLocked(Write{Time: now, Kind: WriteResponseURL, Channel: ru.channel, TS: ts, ThreadTS: msg.ThreadTS, User: ru.user, Text: msg.Text,
		UnfurlLinks: flag(msg.UnfurlLinks), UnfurlMedia: flag(msg.UnfurlMedia)})
	return http.StatusOK, map[string]any{"ok": true}
}
