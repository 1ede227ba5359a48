package fakeslack

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Channel types, as in a message event's channel_type.
const (
	ChannelPublic  = "channel"
	ChannelPrivate = "group"
	ChannelIM      = "im"
	ChannelMPIM    = "mpim"
)

// Message is a stored message, as the fake's users and the bot see it.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // the parent's ts for a reply, its own ts for a parent with replies, else ""
	User     string
	BotID    string // set on the bot's own messages
	Subtype  string
	Text     string // `text`, or `markdown_text` for Markdown and streamed messages
	Markdown bool   // Text came from markdown_text
	Blocks   json.RawMessage
	Metadata json.RawMessage // {"event_type":…,"event_payload":…} as posted
	Files    []string        // file ids shared with the message
	Edited   bool
	EditedTS string
	// Streaming is true between chat.startStream and chat.stopStream (or the stream's end,
	// StreamExpired). Text is then the markdown streamed so far, and the fake's Web API returns
	// it as the message's text (what Slack returns for a message mid-stream is not published).
	Streaming bool
	// StreamExpired: the stream ended without chat.stopStream (ExpireStream,
	// Config.StreamExpiry), as Slack ends one its app abandoned. Slack shows such a message as
	// stuck until chat.update replaces it.
	StreamExpired bool
	// StoppedByUser is set by PressStop: the next appendStream fails with stopped_by_user.
	StoppedByUser bool
	Reactions     []string
	// Tasks are the task cards of a streamed message (task_update chunks), in the order they
	// first came, each as its last update left it.
	Tasks []Task
}

// Task is a task card of a streamed message (a task_update chunk).
type Task struct {
	ID, Title, Status, Details, Output string
	Updates                            int // task_update chunks received for it
}

// User is a workspace member known to users.info.
type User struct {
	ID          string
	Name        string
	RealName    string
	DisplayName string
	TZ          string
	IsBot       bool
	BotID       string
	// Team is the user's own workspace: "" for the fake's (Config.TeamID); another team's ID for
	// someone of another organisation in a Slack Connect channel, whose messages then carry it
	// as user_team (and team, source_team), and whose clicks carry it as user.team_id.
	Team string
	// Enterprise is the Enterprise Grid org of the user's workspace (users.info's
	// enterprise_user.enterprise_id); "": none (the object is left out).
	Enterprise string
	// Guest, UltraGuest: a multi-channel guest (is_restricted) or a single-channel guest
	// (is_ultra_restricted) of the workspace.
	Guest, UltraGuest bool
	// Stranger is users.info's is_stranger. Unverified what Slack means by it exactly: the
	// library's field is documented as a user of a workspace other than the token's that shares
	// no channel with it; the fake sets it only when a test asks.
	Stranger bool
}

// WriteKind says which call applied a Write.
type WriteKind string

// The kinds of applied message writes.
const (
	WritePost        WriteKind = "post"         // chat.postMessage
	WriteUpdate      WriteKind = "update"       // chat.update
	WriteStart       WriteKind = "start"        // chat.startStream
	WriteAppend      WriteKind = "append"       // chat.appendStream
	WriteStop        WriteKind = "stop"         // chat.stopStream
	WriteDelete      WriteKind = "delete"       // chat.delete
	WriteEphemeral   WriteKind = "ephemeral"    // chat.postEphemeral
	WriteResponseURL WriteKind = "response_url" // a post to a slash command's response_url
	WriteFile        WriteKind = "file"         // files.completeUploadExternal shared a file
)

// Write is one applied change of what users see, with the message's full text after it.
// The load benchmark measures visible lag from these.
type Write struct {
	Time     time.Time
	Kind     WriteKind
	Channel  string
	TS       string // the message written ("" for response_url posts)
	ThreadTS string
	User     string // ephemeral and response_url: the user who sees it
	Text     string // the full text after the write
	Delta    string // append/stop: the markdown appended by this call
	// The unfurl_links and unfurl_media flags the call sent, as sent ("false", "true"; "" when
	// absent): Slack previews the links of a message unless both are false.
	UnfurlLinks, UnfurlMedia string
}

// Ephemeral is a chat.postEphemeral message.
type Ephemeral struct {
	Time     time.Time
	Channel  string
	User     string
	ThreadTS string
	Text     string
	Blocks   json.RawMessage
	TS       string
}

// File is an uploaded file (files v2 flow).
type File struct {
	ID             string
	Name           string // filename from files.getUploadURLExternal
	Title          string // from files.completeUploadExternal
	AltText        string
	Length         int // the announced length
	Bytes          []byte
	Uploaded       bool // bytes received at the upload URL
	Shared         bool // completed into a channel
	Channel        string
	ThreadTS       string
	InitialComment string
	MessageTS      string // the message the file was shared with
	Time           time.Time
	// A person's file (UserFile): its type, how url_private answers, whether the bot must ask
	// files.info for it, whether it may see it at all.
	Mimetype  string
	Redirect  Redirect
	CheckInfo bool
	NoAccess  bool
}

// ResponseURLPost is one post to a slash command's or a click's response_url.
type ResponseURLPost struct {
	Time            time.Time
	URL             string
	Channel         string
	User            string
	Command         string
	ResponseType    string // "ephemeral" (the default) or "in_channel"
	Text            string
	Blocks          json.RawMessage
	ReplaceOriginal bool
	DeleteOriginal  bool
	// TS is the message the post added (an ephemeral one: only User sees it, and may click its
	// buttons) or replaced or deleted; "" for an in_channel post (see Writes) or a refused one.
	TS     string
	Body   json.RawMessage
	Status int // the HTTP status answered

	private bool // TS is an ephemeral message's
}

// Buttons returns the buttons of the post's blocks, in order.
func (p ResponseURLPost) Buttons() []Button { return Message{Blocks: p.Blocks}.Buttons() }

// Call is one Web API request.
type Call struct {
	Time     time.Time
	Method   string
	Params   url.Values // form values, or the JSON body's fields (non-strings as JSON)
	Token    string     // the token used (form value or Bearer)
	Status   int        // HTTP status answered
	OK       bool
	Error    string // Slack error ("ratelimited" for a 429)
	Duration time.Duration
}

type channel struct {
	id     string
	typ    string
	name   string
	member bool
	msgs   []*Message // by ts
	byTS   map[string]*Message
}

type responseURL struct {
	url, channel, user, command string
	uses                        int
	// original is the message replace_original and delete_original change: the clicked message
	// (ephemeral: one only user sees), or the last ephemeral message a slash command's added.
	original  string
	ephemeral bool
}

// AddChannel registers a channel. typ is ChannelPublic, ChannelPrivate, ChannelIM or
// ChannelMPIM. Channels are also created on first use, typed by their id's first letter
// (C public, G private, D im). The bot is a member unless SetMember says otherwise.
func (s *Server) AddChannel(id, typ, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channelLocked(id)
	c.typ = typ
	if name != "" {
		c.name = name
	}
}

// SetMember sets whether the bot is a member of channel (default: every channel).
// Posting and sharing files where it is not fail with not_in_channel.
func (s *Server) SetMember(channelID string, member bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channelLocked(channelID).member = member
}

// AddUser registers a user for users.info. Users are also created on first use.
func (s *Server) AddUser(u User) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.ID] = &u
}

// SetUserGroup makes the user group id (S…) with members, for usergroups.users.list.
func (s *Server) SetUserGroup(id string, members ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.userGroups == nil {
		s.userGroups = map[string][]string{}
	}
	s.userGroups[id] = members
}

// teamOfLocked is the workspace user belongs to (User.Team, else the fake's).
func (s *Server) teamOfLocked(user string) string {
	if u, ok := s.users[user]; ok && u.Team != "" {
		return u.Team
	}
	return s.cfg.TeamID
}

func (s *Server) channelLocked(id string) *channel {
	if c, ok := s.channels[id]; ok {
		return c
	}
	typ := ChannelPublic
	switch {
	case strings.HasPrefix(id, "D"):
		typ = ChannelIM
	case strings.HasPrefix(id, "G"):
		typ = ChannelPrivate
	}
	c := &channel{id: id, typ: typ, name: strings.ToLower(id), member: true, byTS: map[string]*Message{}}
	s.channels[id] = c
	return c
}

func (s *Server) userLocked(id string) *User {
	if u, ok := s.users[id]; ok {
		return u
	}
	u := &User{ID: id, Name: "user_" + strings.ToLower(id), RealName: "User " + id, DisplayName: "user_" + strings.ToLower(id), TZ: "Europe/Berlin"}
	s.users[id] = u
	return u
}

// newTSLocked returns a unique, increasing message ts based on the wall clock.
func (s *Server) newTSLocked(now time.Time) string {
	us := now.UnixMicro()
	if us <= s.lastTS {
		us = s.lastTS + 1
	}
	s.lastTS = us
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

// addMessageLocked stores m (with a new ts) in its channel.
func (s *Server) addMessageLocked(m *Message, now time.Time) *Message {
	c := s.channelLocked(m.Channel)
	m.TS = s.newTSLocked(now)
	c.msgs = append(c.msgs, m)
	c.byTS[m.TS] = m
	if m.ThreadTS != "" {
		if parent := c.byTS[m.ThreadTS]; parent != nil && parent.ThreadTS == "" {
			parent.ThreadTS = parent.TS
		}
		delete(s.statuses, m.Channel+"/"+m.ThreadTS) // a reply clears the assistant status
	}
	return m
}

func (s *Server) removeMessageLocked(c *channel, ts string) {
	delete(s.streams, c.byTS[ts])
	delete(s.lastWrite, c.byTS[ts])
	delete(c.byTS, ts)
	c.msgs = slices.DeleteFunc(c.msgs, func(m *Message) bool { return m.TS == ts })
}

func (s *Server) recordWriteLocked(w Write) {
	s.writes = append(s.writes, w)
}

// messageJSON renders m as the Web API does.
func (s *Server) messageJSON(c *channel, m *Message, withMetadata bool) map[string]any {
	out := map[string]any{
		"type": "message",
		"ts":   m.TS,
		"text": m.Text,
	}
	if m.User != "" {
		out["user"] = m.User
	}
	if m.BotID != "" {
		out["bot_id"] = m.BotID
		for k, v := range s.botProfile(m.BotID) {
			out[k] = v
		}
	}
	out["team"] = s.cfg.TeamID
	if m.User != "" {
		if team := s.teamOfLocked(m.User); team != s.cfg.TeamID || s.cfg.UserTeams {
			out["team"], out["user_team"], out["source_team"] = team, team, team // as in its event
		}
	}
	if m.Subtype != "" {
		out["subtype"] = m.Subtype
	}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
		if m.ThreadTS == m.TS {
			var n int
			var users []string
			latest := m.TS
			for _, r := range c.msgs {
				if r.ThreadTS == m.TS && r.TS != m.TS {
					n++
					latest = r.TS
					if !slices.Contains(users, r.User) {
						users = append(users, r.User)
					}
				}
			}
			out["reply_count"] = n
			out["reply_users_count"] = len(users)
			out["reply_users"] = users
			out["latest_reply"] = latest
		} else {
			out["parent_user_id"] = c.byTS[m.ThreadTS].userOrEmpty()
		}
	}
	if len(m.Blocks) > 0 {
		out["blocks"] = m.Blocks
	}
	if withMetadata && len(m.Metadata) > 0 {
		out["metadata"] = m.Metadata
	}
	if m.Edited {
		out["edited"] = map[string]any{"user": m.User, "ts": m.EditedTS}
	}
	if len(m.Files) > 0 {
		files := make([]map[string]any, 0, len(m.Files))
		for _, id := range m.Files {
			if f := s.files[id]; f != nil {
				files = append(files, s.fileRef(f))
			}
		}
		out["files"] = files
		out["upload"] = false
	}
	if len(m.Reactions) > 0 {
		var rs []map[string]any
		for _, name := range m.Reactions {
			rs = append(rs, map[string]any{"name": name, "users": []string{s.cfg.BotUserID}, "count": 1})
		}
		out["reactions"] = rs
	}
	return out
}

func (m *Message) userOrEmpty() string {
	if m == nil {
		return ""
	}
	return m.User
}

// botProfile is the app_id and bot_profile of a bot's message: this app's for its bot,
// a stand-in app's for other bots.
func (s *Server) botProfile(botID string) map[string]any {
	appID, name := "A0OTHER", "otherbot"
	if botID == s.cfg.BotID {
		appID, name = s.cfg.AppID, s.cfg.BotName
	}
	return map[string]any{
		"app_id":      appID,
		"bot_profile": map[string]any{"id": botID, "app_id": appID, "name": name, "team_id": s.cfg.TeamID, "deleted": false},
	}
}

func (s *Server) fileJSON(f *File) map[string]any {
	u := s.http.URL + "/files-pri/" + f.ID + "/" + url.PathEscape(f.Name)
	return map[string]any{
		"url_private":          u,
		"url_private_download": u + "?download=1",
		"id":                   f.ID,
		"name":                 f.Name,
		"title":                f.Title,
		"mimetype":             f.mimeType(),
		"filetype":             strings.TrimPrefix(extension(f.Name), "."),
		"size":                 len(f.Bytes),
		"alt_txt":              f.AltText,
	}
}

func extension(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return strings.ToLower(name[i:])
	}
	return ""
}

func mimeType(name string) string {
	switch extension(name) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".webp":
		return "image/webp"
	case ".gif":
		return "image/gif"
	case ".txt", ".log", ".md", ".go", ".py", ".js", ".ts", ".sh":
		return "text/plain"
	case ".csv":
		return "text/csv"
	case ".json":
		return "application/json"
	case ".yaml", ".yml":
		return "application/x-yaml"
	case ".pdf":
		return "application/pdf"
	}
	return "application/octet-stream"
}

func copyMessage(m *Message) Message {
	c := *m
	c.Files = slices.Clone(m.Files)
	c.Reactions = slices.Clone(m.Reactions)
	c.Tasks = slices.Clone(m.Tasks)
	return c
}
