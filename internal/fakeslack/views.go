package fakeslack

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Modals (views.open and their view_submission) and permalinks (chat.getPermalink).

// TriggerLife is how long a trigger_id opens a modal: Slack's is 3 seconds.
const TriggerLife = 3 * time.Second

// trigger is a trigger_id handed out with a click: who clicked, and when.
type trigger struct {
	user string
	at   time.Time
}

// View is a modal the app opened (views.open).
type View struct {
	ID              string
	User            string // who it was opened for (the trigger's clicker)
	CallbackID      string
	PrivateMetadata string
	Title           string
	Blocks          json.RawMessage
	Inputs          []ViewInput // its input blocks
}

// ViewInput is an input block of a modal.
type ViewInput struct {
	BlockID, ActionID string
	Optional          bool
	Multiline         bool
}

// triggerLocked hands out a trigger_id for user's interaction now.
func (s *Server) triggerLocked(user string, now time.Time) string {
	id := fmt.Sprintf("%d.%s", now.UnixNano(), s.nextIDLocked("T"))
	s.triggers[id] = trigger{user: user, at: now}
	return id
}

// viewPayload is the part of a view the fake reads.
type viewPayload struct {
	Type            string `json:"type"`
	CallbackID      string `json:"callback_id"`
	PrivateMetadata string `json:"private_metadata"`
	Title           *struct {
		Text string `json:"text"`
	} `json:"title"`
	Blocks []struct {
		Type     string `json:"type"`
		BlockID  string `json:"block_id"`
		Optional bool   `json:"optional"`
		Element  *struct {
			Type      string `json:"type"`
			ActionID  string `json:"action_id"`
			Multiline bool   `json:"multiline"`
		} `json:"element"`
	} `json:"blocks"`
}

// viewsOpen opens a modal for the person whose click handed out trigger_id, within TriggerLife.
func (s *Server) viewsOpen(p params, now time.Time) (map[string]any, apiError) {
	tr, ok := s.triggers[p.Get("trigger_id")]
	switch {
	case !ok:
		return nil, "invalid_trigger_id"
	case now.Sub(tr.at) > TriggerLife:
		return nil, "expired_trigger_id"
	}
	var v viewPayload
	if err := json.Unmarshal([]byte(p.Get("view")), &v); err != nil || v.Type != "modal" || v.Title == nil || v.Title.Text == "" {
		return nil, "invalid_arguments"
	}
	if len(v.PrivateMetadata) > 3000 {
		return nil, "invalid_arguments"
	}
	delete(s.triggers, p.Get("trigger_id")) // a trigger opens one modal
	view := View{ID: s.nextIDLocked("V"), User: tr.user, CallbackID: v.CallbackID, PrivateMetadata: v.PrivateMetadata,
		Title: v.Title.Text, Blocks: json.RawMessage(p.Get("view"))}
	for _, b := range v.Blocks {
		if b.Type == "input" && b.Element != nil {
			view.Inputs = append(view.Inputs, ViewInput{BlockID: b.BlockID, ActionID: b.Element.ActionID,
				Optional: b.Optional, Multiline: b.Element.Multiline})
		}
	}
	s.views = append(s.views, view)
	return map[string]any{"view": map[string]any{"id": view.ID, "callback_id": view.CallbackID}}, ""
}

// Views returns the modals the app opened, in order.
func (s *Server) Views() []View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.views)
}

// SubmitView delivers the view_submission envelope Slack sends when the person the modal id was
// opened for submits it, with values by the action_id of its inputs. It returns the envelope id.
func (s *Server) SubmitView(id string, values map[string]string) (string, error) {
	return s.submitView(0, id, values)
}

// SubmitView is Server.SubmitView, to v's connection.
func (v Via) SubmitView(id string, values map[string]string) (string, error) {
	return v.s.submitView(v.conn, id, values)
}

// submitView is SubmitView, to the connection to (0: the one whose turn it is).
func (s *Server) submitView(to int, id string, values map[string]string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkViaLocked(to); err != nil {
		return "", err
	}
	i := slices.IndexFunc(s.views, func(v View) bool { return v.ID == id })
	if i < 0 {
		return "", fmt.Errorf("fakeslack: no view %s", id)
	}
	v := s.views[i]
	state := map[string]any{}
	for _, in := range v.Inputs {
		if val, ok := values[in.ActionID]; ok {
			state[in.BlockID] = map[string]any{in.ActionID: map[string]any{"type": "plain_text_input", "value": val}}
		}
	}
	u := s.userLocked(v.User)
	return s.interactiveLocked(map[string]any{
		"type":       "view_submission",
		"team":       map[string]any{"id": s.cfg.TeamID, "domain": "fake"},
		"user":       map[string]any{"id": v.User, "username": u.Name, "name": u.Name, "team_id": s.teamOfLocked(v.User)},
		"api_app_id": s.cfg.AppID,
		"token":      "verification-token",
		"trigger_id": s.triggerLocked(v.User, time.Now()),
		"view": map[string]any{
			"id": v.ID, "type": "modal", "callback_id": v.CallbackID, "private_metadata": v.PrivateMetadata,
			"team_id": s.cfg.TeamID, "app_id": s.cfg.AppID, "state": map[string]any{"values": state},
		},
	}, to), nil
}

// chatGetPermalink answers the permalink of a stored message.
func (s *Server) chatGetPermalink(p params, now time.Time) (map[string]any, apiError) {
	c := s.channels[p.Get("channel")]
	if c == nil {
		return nil, "channel_not_found"
	}
	m := c.byTS[p.Get("message_ts")]
	if m == nil {
		return nil, "message_not_found"
	}
	link := fmt.Sprintf("https://%s.slack.com/archives/%s/p%s", strings.ReplaceAll(strings.ToLower(s.cfg.TeamName), " ", "-"), c.id, strings.ReplaceAll(m.TS, ".", ""))
	if m.ThreadTS != "" && m.ThreadTS != m.TS {
		link += "?thread_ts=" + m.ThreadTS + "&cid=" + c.id
	}
	return map[string]any{"channel": c.id, "permalink": link}, ""
}
