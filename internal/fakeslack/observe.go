package fakeslack

import (
	"net/url"
	"slices"
	"time"
)

// Messages returns every message of a channel (top level and replies), oldest first.
func (s *Server) Messages(channelID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireStreamsLocked(time.Now())
	c := s.channels[channelID]
	if c == nil {
		return nil
	}
	out := make([]Message, 0, len(c.msgs))
	for _, m := range c.msgs {
		out = append(out, copyMessage(m))
	}
	return out
}

// Thread returns the parent message ts and its replies, oldest first.
func (s *Server) Thread(channelID, ts string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireStreamsLocked(time.Now())
	c := s.channels[channelID]
	if c == nil {
		return nil
	}
	var out []Message
	for _, m := range c.msgs {
		if m.TS == ts || m.ThreadTS == ts {
			out = append(out, copyMessage(m))
		}
	}
	return out
}

// Message returns one stored message.
func (s *Server) Message(channelID, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireStreamsLocked(time.Now())
	c := s.channels[channelID]
	if c == nil || c.byTS[ts] == nil {
		return Message{}, false
	}
	return copyMessage(c.byTS[ts]), true
}

// BotReplies returns the bot's messages in a thread (after the parent), oldest first.
func (s *Server) BotReplies(channelID, threadTS string) []Message {
	var out []Message
	for _, m := range s.Thread(channelID, threadTS) {
		if m.BotID != "" && m.TS != threadTS {
			out = append(out, m)
		}
	}
	return out
}

// Calls returns every Web API call so far, in the order they were answered.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.calls)
	for i := range out {
		out[i].Params = cloneValues(out[i].Params)
	}
	return out
}

// CallsTo returns the calls of one method.
func (s *Server) CallsTo(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// Writes returns every applied message write, in order.
func (s *Server) Writes() []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.writes)
}

// Acks returns every ack frame read, in order.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acks)
}

// Envelopes returns every envelope queued so far, in order.
func (s *Server) Envelopes() []Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := make([]Envelope, 0, len(s.envOrder))
	for _, id := range s.envOrder {
		e := s.envelopes[id]
		env := e.Envelope
		env.Failed = failedLocked(e, now)
		out = append(out, env)
	}
	return out
}

// Files returns every file announced with files.getUploadURLExternal, in order.
func (s *Server) Files() []File {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]File, 0, len(s.fileOrder))
	for _, id := range s.fileOrder {
		f := *s.files[id]
		f.Bytes = slices.Clone(f.Bytes)
		out = append(out, f)
	}
	return out
}

// Ephemerals returns every chat.postEphemeral message, in order.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ephemeral)
}

// ResponseURLPosts returns every post to a response_url, in order.
func (s *Server) ResponseURLPosts() []ResponseURLPost {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.respPosts)
}

// Count429 returns how many calls of method were answered with HTTP 429.
func (s *Server) Count429(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count429[method]
}

// Connections counts Socket Mode connections: open now, and ever opened.
func (s *Server) Connections() ConnStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	gapTime := s.gapTime
	if !s.gapSince.IsZero() {
		gapTime += time.Since(s.gapSince)
	}
	refused := 0
	for _, c := range s.connLog {
		if c.refused {
			refused++
		}
	}
	return ConnStats{Current: len(s.conns), Total: s.connTotal, Refused: refused, Pongs: s.pongs, Gaps: s.gaps, GapTime: gapTime}
}

// Status returns the assistant thread status set with assistant.threads.setStatus
// ("" when cleared, or after a reply was posted in the thread).
func (s *Server) Status(channelID, threadTS string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses[channelID+"/"+threadTS]
}

// WritesSince returns the writes after the first n (for incremental polling of long runs).
func (s *Server) WritesSince(n int) []Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= len(s.writes) {
		return nil
	}
	return slices.Clone(s.writes[max(n, 0):])
}

// AcksSince returns the acks after the first n.
func (s *Server) AcksSince(n int) []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= len(s.acks) {
		return nil
	}
	return slices.Clone(s.acks[max(n, 0):])
}

// CallCount returns how many calls of method were made ("" counts all methods).
func (s *Server) CallCount(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if method == "" {
		return len(s.calls)
	}
	n := 0
	for _, c := range s.calls {
		if c.Method == method {
			n++
		}
	}
	return n
}

// Stats counts what the fake has recorded, without copying anything: for waits in long
// runs (WaitFor wakes on every change, so its condition should be cheap).
type Stats struct {
	Calls     int // Web API calls
	Writes    int // applied message writes
	Acks      int // ack frames read
	Envelopes int // envelopes queued (delivered or not)
	Pending   int // envelopes not yet written to a connection
	Unacked   int // envelopes written but not acked
}

// Stats returns the current counts.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Calls: len(s.calls), Writes: len(s.writes), Acks: len(s.acks), Envelopes: len(s.envOrder), Pending: len(s.pending)}
	for _, id := range s.envOrder {
		if e := s.envelopes[id]; !e.Sent.IsZero() && e.Acked.IsZero() {
			st.Unacked++
		}
	}
	return st
}
