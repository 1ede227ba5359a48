package fakeslack

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Block Kit limits the fake enforces on chat.postMessage and chat.update (Slack answers
// invalid_blocks).
const (
	MaxBlocks         = 50
	SectionTextLimit  = 3000 // characters of a section block's text
	ButtonValueLimit  = 2000 // characters of a button's value
	ButtonTextLimit   = 75   // characters of a button's label
	ActionIDLimit     = 255
	maxActionElements = 25
)

// Button is a button element of a stored message's blocks.
type Button struct {
	BlockID  string
	ActionID string
	Text     string // the label
	Value    string
	Style    string
}

// blockText is a block's text: a text object (a section's), or a plain string (a markdown
// block's).
type blockText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func (t *blockText) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		t.Type = "markdown"
		return json.Unmarshal(b, &t.Text)
	}
	type object blockText // without this method
	return json.Unmarshal(b, (*object)(t))
}

// block is the part of a Block Kit block the fake reads.
type block struct {
	Type     string     `json:"type"`
	BlockID  string     `json:"block_id"`
	Text     *blockText `json:"text"`
	Elements []struct {
		Type     string `json:"type"`
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
		Style    string `json:"style"`
		Text     *struct {
			Text string `json:"text"`
		} `json:"text"`
		PositiveButton *feedbackButton `json:"positive_button"`
		NegativeButton *feedbackButton `json:"negative_button"`
	} `json:"elements"`
}

func parseBlocks(raw json.RawMessage) ([]block, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var bs []block
	if err := json.Unmarshal(raw, &bs); err != nil {
		return nil, err
	}
	return bs, nil
}

// checkBlocks applies the Block Kit limits the fake knows (see the constants above).
func checkBlocks(raw json.RawMessage) apiError {
	bs, err := parseBlocks(raw)
	if err != nil || len(bs) > MaxBlocks {
		return "invalid_blocks"
	}
	for _, b := range bs {
		if e := checkBlock(b); e != "" {
			return e
		}
	}
	return ""
}

// checkBlock applies the limits of one block.
func checkBlock(b block) apiError {
	textWithin := func(limit int) bool {
		return b.Text != nil && b.Text.Text != "" && utf8.RuneCountInString(b.Text.Text) <= limit
	}
	switch {
	case b.Type == "section" && !textWithin(SectionTextLimit), b.Type == "markdown" && !textWithin(MarkdownTextLimit):
		return "invalid_blocks"
	case b.Type == "context_actions":
		return checkContextActions(b)
	case b.Type == "actions":
		return checkActions(b)
	}
	return ""
}

// checkActions applies the limits of an actions block and its buttons.
func checkActions(b block) apiError {
	if len(b.Elements) == 0 || len(b.Elements) > maxActionElements {
		return "invalid_blocks"
	}
	for _, e := range b.Elements {
		if e.Type != "button" {
			continue
		}
		if e.Text == nil || e.Text.Text == "" || utf8.RuneCountInString(e.Text.Text) > ButtonTextLimit ||
			utf8.RuneCountInString(e.Value) > ButtonValueLimit || len(e.ActionID) > ActionIDLimit {
			return "invalid_blocks"
		}
	}
	return ""
}

// Buttons returns the buttons of the message's blocks, in order.
func (m Message) Buttons() []Button {
	bs, _ := parseBlocks(m.Blocks)
	var out []Button
	for _, b := range bs {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type != "button" {
				continue
			}
			btn := Button{BlockID: b.BlockID, ActionID: e.ActionID, Value: e.Value, Style: e.Style}
			if e.Text != nil {
				btn.Text = e.Text.Text
			}
			out = append(out, btn)
		}
	}
	return out
}

// SectionText returns the text of the message's section blocks, joined: what Slack shows
// instead of Text when the message has blocks.
func (m Message) SectionText() string {
	bs, _ := parseBlocks(m.Blocks)
	var out string
	for _, b := range bs {
		if b.Type == "section" && b.Text != nil {
			out += b.Text.Text
		}
	}
	return out
}

// ErrNoButton is returned by Click when the message does not show the button.
var ErrNoButton = errors.New("fakeslack: no such button on the message")

// Click delivers the interactive envelope (type "interactive", a block_actions payload) Slack
// sends when user presses the button with actionID on the message ts in channelID, as Slack
// would: only a button the message shows now can be pressed (else ErrNoButton). The message may
// be an ephemeral one user sees (chat.postEphemeral, or a response_url post): the container then
// says is_ephemeral and the payload carries no message, as Slack's does. The payload carries the
// user, team, channel, container, the message, a response_url on this server (ephemeral
// answers, like a slash command's; replace_original and delete_original change the clicked
// message) and the action with the button's value. It returns the envelope id.
func (s *Server) Click(channelID, ts, user, actionID string) (string, error) {
	return s.click(0, channelID, ts, user, actionID)
}

// click is Click, to the connection to (0: the one whose turn it is).
func (s *Server) click(to int, channelID, ts, user, actionID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkViaLocked(to); err != nil {
		return "", err
	}
	c := s.channels[channelID]
	if c == nil {
		return "", fmt.Errorf("fakeslack: click on %s/%s: %w", channelID, ts, ErrNoButton)
	}
	m, ephemeral := c.byTS[ts], false
	if m == nil {
		pm, ok := s.privateLocked(channelID, ts, user)
		if !ok {
			return "", fmt.Errorf("fakeslack: click on %s/%s: %w", channelID, ts, ErrNoButton)
		}
		m, ephemeral = &pm, true
	}
	var btn *Button
	for _, b := range m.Buttons() {
		if b.ActionID == actionID {
			btn = &b
			break
		}
	}
	if btn == nil {
		return "", fmt.Errorf("fakeslack: click %s on %s/%s: %w", actionID, channelID, ts, ErrNoButton)
	}
	action := map[string]any{
		"action_id": btn.ActionID,
		"block_id":  btn.BlockID,
		"text":      map[string]any{"type": "plain_text", "text": btn.Text, "emoji": true},
		"value":     btn.Value,
		"type":      "button",
	}
	if btn.Style != "" {
		action["style"] = btn.Style
	}
	return s.blockActionsLocked(to, c, m, ephemeral, user, action), nil
}

// ClickFeedback delivers the block_actions envelope Slack sends when user presses 👍 (positive)
// or 👎 on the feedback buttons of the message ts in channelID (ErrNoButton when it shows none):
// an action of type feedback_buttons with the pressed button's value.
func (s *Server) ClickFeedback(channelID, ts, user string, positive bool) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[channelID]
	var fb Feedback
	ok := false
	if c != nil && c.byTS[ts] != nil {
		fb, ok = c.byTS[ts].Feedback()
	}
	if !ok {
		return "", fmt.Errorf("fakeslack: feedback on %s/%s: %w", channelID, ts, ErrNoButton)
	}
	value := fb.NegativeValue
	if positive {
		value = fb.PositiveValue
	}
	action := map[string]any{"action_id": fb.ActionID, "block_id": fb.BlockID, "type": "feedback_buttons", "value": value}
	return s.blockActionsLocked(0, c, c.byTS[ts], false, user, action), nil
}

// blockActionsLocked queues the block_actions envelope of user's action on the message m of c.
func (s *Server) blockActionsLocked(to int, c *channel, m *Message, ephemeral bool, user string, action map[string]any) string {
	u := s.userLocked(user)
	now := time.Now()
	action["action_ts"] = fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
	respURL := s.responseURLLocked(c, user, "")
	respURL.original, respURL.ephemeral = m.TS, ephemeral
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": c.id, "is_ephemeral": ephemeral}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	payload := map[string]any{
		"type":                  "block_actions",
		"user":                  map[string]any{"id": user, "username": u.Name, "name": u.Name, "team_id": s.teamOfLocked(user)},
		"api_app_id":            s.cfg.AppID,
		"token":                 "verification-token",
		"container":             container,
		"trigger_id":            s.triggerLocked(user, now),
		"team":                  map[string]any{"id": s.cfg.TeamID, "domain": "fake"},
		"enterprise":            nil,
		"is_enterprise_install": false,
		"channel":               map[string]any{"id": c.id, "name": c.name},
		"state":                 map[string]any{"values": map[string]any{}},
		"response_url":          respURL.url,
		"actions":               []any{action},
	}
	if !ephemeral {
		payload["message"] = s.messageJSON(c, m, false)
	}
	return s.interactiveLocked(payload, to)
}

// ErrNoMessage is returned by MessageShortcut when there is no such message.
var ErrNoMessage = errors.New("fakeslack: no such message")

// MessageShortcut delivers the interactive envelope (type "interactive", a message_action
// payload) Slack sends when user picks the message shortcut callbackID in the menu of the message
// ts in channelID (ErrNoMessage when there is none). The payload carries the callback_id, the
// user, team and channel, the message and its message_ts, a trigger_id and a response_url on this
// server. It returns the envelope id.
func (s *Server) MessageShortcut(channelID, ts, user, callbackID string) (string, error) {
	return s.messageShortcut(0, channelID, ts, user, callbackID)
}

// messageShortcut is MessageShortcut, to the connection to (0: the one whose turn it is).
func (s *Server) messageShortcut(to int, channelID, ts, user, callbackID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkViaLocked(to); err != nil {
		return "", err
	}
	c := s.channels[channelID]
	if c == nil || c.byTS[ts] == nil {
		return "", fmt.Errorf("fakeslack: shortcut on %s/%s: %w", channelID, ts, ErrNoMessage)
	}
	m := c.byTS[ts]
	u := s.userLocked(user)
	now := time.Now()
	respURL := s.responseURLLocked(c, user, "")
	respURL.original = m.TS
	return s.interactiveLocked(map[string]any{
		"type":                  "message_action",
		"token":                 "verification-token",
		"action_ts":             fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000),
		"team":                  map[string]any{"id": s.cfg.TeamID, "domain": "fake"},
		"user":                  map[string]any{"id": user, "username": u.Name, "name": u.Name, "team_id": s.teamOfLocked(user)},
		"channel":               map[string]any{"id": c.id, "name": c.name},
		"is_enterprise_install": false,
		"enterprise":            nil,
		"callback_id":           callbackID,
		"trigger_id":            s.triggerLocked(user, now),
		"response_url":          respURL.url,
		"message_ts":            m.TS,
		"message":               s.messageJSON(c, m, false),
	}, to), nil
}

// responseURLLocked makes a response_url on this server for user in c (command: the slash
// command's, "" for an interaction's).
func (s *Server) responseURLLocked(c *channel, user, command string) *responseURL {
	id := s.nextIDLocked("R")
	ru := &responseURL{url: s.http.URL + "/response/" + id, channel: c.id, user: user, command: command}
	s.responses[id] = ru
	return ru
}

// interactiveLocked queues an interactive envelope with payload for the connection to (0: the
// one whose turn it is) and returns its id.
func (s *Server) interactiveLocked(payload map[string]any, to int) string {
	raw, _ := json.Marshal(payload)
	e := &envelope{
		Envelope: Envelope{ID: newEnvelopeID(), Type: "interactive"},
		payload:  raw,
		to:       to,
	}
	s.enqueueLocked(e)
	return e.ID
}

// Private returns what user sees now of the ephemeral message ts in channelID (posted with
// chat.postEphemeral or through a response_url, as later response_url posts replaced it); false
// when there is none, or it was deleted.
func (s *Server) Private(channelID, ts, user string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.privateLocked(channelID, ts, user)
}

func (s *Server) privateLocked(channel, ts, user string) (m Message, ok bool) {
	for _, e := range s.ephemeral {
		if e.Channel == channel && e.TS == ts && e.User == user {
			m, ok = Message{Channel: channel, TS: ts, ThreadTS: e.ThreadTS, User: s.cfg.BotUserID, BotID: s.cfg.BotID,
				Text: e.Text, Blocks: e.Blocks}, true
		}
	}
	for _, p := range s.respPosts {
		if !p.private || p.Channel != channel || p.User != user || p.TS != ts {
			continue
		}
		if p.DeleteOriginal {
			m, ok = Message{}, false
			continue
		}
		m, ok = Message{Channel: channel, TS: ts, User: s.cfg.BotUserID, BotID: s.cfg.BotID, Text: p.Text, Blocks: p.Blocks}, true
	}
	return m, ok
}

// feedbackButton is one side of a feedback_buttons element.
type feedbackButton struct {
	Text *struct {
		Text string `json:"text"`
	} `json:"text"`
	Value string `json:"value"`
}

func (b *feedbackButton) valid() bool {
	return b != nil && b.Text != nil && b.Text.Text != "" && utf8.RuneCountInString(b.Text.Text) <= ButtonTextLimit &&
		b.Value != "" && utf8.RuneCountInString(b.Value) <= ButtonValueLimit
}

// maxContextActions is how many elements a context_actions block holds.
const maxContextActions = 5

// checkContextActions applies the limits of a context_actions block: feedback_buttons (both
// buttons, each with its text and value) and icon_button elements, at most five.
func checkContextActions(b block) apiError {
	if len(b.Elements) == 0 || len(b.Elements) > maxContextActions {
		return "invalid_blocks"
	}
	for _, e := range b.Elements {
		switch e.Type {
		case "feedback_buttons":
			if !e.PositiveButton.valid() || !e.NegativeButton.valid() || len(e.ActionID) > ActionIDLimit {
				return "invalid_blocks"
			}
		case "icon_button":
		default:
			return "invalid_blocks"
		}
	}
	return ""
}

// Feedback is a feedback_buttons element (👍/👎) of a stored message's context_actions blocks.
type Feedback struct {
	BlockID, ActionID            string
	PositiveText, NegativeText   string
	PositiveValue, NegativeValue string
}

// Feedback returns the message's feedback buttons; false when it shows none.
func (m Message) Feedback() (Feedback, bool) {
	bs, _ := parseBlocks(m.Blocks)
	for _, b := range bs {
		if b.Type != "context_actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type == "feedback_buttons" && e.PositiveButton.valid() && e.NegativeButton.valid() {
				return Feedback{BlockID: b.BlockID, ActionID: e.ActionID,
					PositiveText: e.PositiveButton.Text.Text, NegativeText: e.NegativeButton.Text.Text,
					PositiveValue: e.PositiveButton.Value, NegativeValue: e.NegativeButton.Value}, true
			}
		}
	}
	return Feedback{}, false
}
