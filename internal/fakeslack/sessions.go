package fakeslack

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"
)

// Agent sessions (agents.sessions.setStatus) and Slack's Stop on them (agent_session_stopped).

// sessionStatuses are the statuses agents.sessions.setStatus accepts.
var sessionStatuses = []string{"active", "processing", "suspended", "closed"}

// agentsSessionsSetStatus records the status of a thread's agent session (creating it). An app
// that is not an agent (Config.NotAgent) is refused with not_authorized, as Slack refuses it.
func (s *Server) agentsSessionsSetStatus(p params, now time.Time) (map[string]any, apiError) {
	if s.cfg.NotAgent {
		return nil, "not_authorized"
	}
	ch, thread, status := p.Get("channel_id"), p.Get("thread_ts"), p.Get("status")
	if ch == "" || thread == "" || !slices.Contains(sessionStatuses, status) {
		return nil, "invalid_arguments"
	}
	c := s.channels[ch]
	if c == nil {
		return nil, "channel_not_found"
	}
	if c.byTS[thread] == nil {
		return nil, "thread_not_found"
	}
	s.sessions[ch+"/"+thread] = append(s.sessions[ch+"/"+thread], status)
	return map[string]any{"status": status, "agent_status": status}, ""
}

// SessionStatuses returns the statuses the app gave the agent session of a thread, in order.
func (s *Server) SessionStatuses(channelID, threadTS string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sessions[channelID+"/"+threadTS])
}

// StopSession is user pressing Slack's Stop on the agent session of a thread: Slack halts the
// thread's streams (a later chat.appendStream on them answers stopped_by_user; chat.stopStream
// still ends them) and sends agent_session_stopped with their timestamps. Slack shows its Stop
// only while the session is "processing"; the fake sends the event whatever the status, so a
// test may press it late. It returns the envelope id.
func (s *Server) StopSession(channelID, threadTS, user string) string {
	id, _ := s.stopSession(0, channelID, threadTS, user) // to 0 never fails
	return id
}

// StopSession is Server.StopSession, its event to v's connection. It returns the envelope id.
func (v Via) StopSession(channelID, threadTS, user string) (string, error) {
	return v.s.stopSession(v.conn, channelID, threadTS, user)
}

func (s *Server) stopSession(to int, channelID, threadTS, user string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkViaLocked(to); err != nil {
		return "", err
	}
	streaming := []string{}
	if c := s.channels[channelID]; c != nil {
		for _, m := range c.msgs {
			if m.Streaming && m.ThreadTS == threadTS {
				m.StoppedByUser = true
				streaming = append(streaming, m.TS)
			}
		}
	}
	now := time.Now()
	e := s.enqueueEventLocked(map[string]any{
		"type": "agent_session_stopped", "channel": channelID, "thread_ts": threadTS, "user": user,
		"streaming_message_ts": streaming, "event_ts": fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000),
	}, now, to)
	s.notifyLocked()
	return e.ID, nil
}

// Stream chunks' limits (Slack's reference; the Vercel adapter's caps).
const (
	maxTasks       = 50
	taskFieldLimit = 256
)

// applyChunks applies a chat.appendStream's chunks (JSON) to m: task_update chunks update its task
// cards; markdown_text chunks return their text, to append.
func applyChunks(m *Message, raw string) (string, apiError) {
	if raw == "" {
		return "", ""
	}
	var chunks []struct {
		Type, ID, Title, Status, Details, Output, Text string
	}
	if err := json.Unmarshal([]byte(raw), &chunks); err != nil {
		return "", "invalid_chunks"
	}
	var text string
	for _, c := range chunks {
		switch c.Type {
		case "markdown_text":
			text += c.Text
		case "task_update":
			if e := m.updateTask(c.ID, c.Title, c.Status, c.Details, c.Output); e != "" {
				return "", e
			}
		case "plan_update", "blocks":
		default:
			return "", "invalid_chunks"
		}
	}
	return text, ""
}

// updateTask applies one task_update to m's task cards.
func (m *Message) updateTask(id, title, status, details, output string) apiError {
	if id == "" || title == "" || !slices.Contains([]string{"", "pending", "in_progress", "complete", "error"}, status) {
		return "invalid_chunks"
	}
	for _, f := range []string{id, title, details, output} {
		if utf8.RuneCountInString(f) > taskFieldLimit {
			return "invalid_chunks"
		}
	}
	i := slices.IndexFunc(m.Tasks, func(t Task) bool { return t.ID == id })
	if i < 0 {
		if len(m.Tasks) == maxTasks {
			return "too_many_tasks"
		}
		m.Tasks = append(m.Tasks, Task{ID: id})
		i = len(m.Tasks) - 1
	}
	t := &m.Tasks[i]
	t.Title, t.Status, t.Details, t.Output = title, status, details, output
	t.Updates++
	return ""
}
