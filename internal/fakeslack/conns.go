package fakeslack

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// An app may hold several Socket Mode connections at once (one per replica, and a second one
// while a connection is refreshed). Slack sends each envelope to one of them, spread across them
// ("round-robin" in Slack staff's words; its docs say not to assume any pattern), and retries an
// unacked event on any of them. The fake spreads deterministically, so a test knows which
// connection, hence which replica, gets what: envelopes go to the connections that take
// envelopes in the order they opened, in turn, a retry to a connection other than the one that
// did not ack it when there is one. Via and RedeliverTo send an envelope to a chosen connection.

// DefaultMaxConnections is how many Socket Mode connections Slack allows an app at once.
const DefaultMaxConnections = 10

// ErrNoConnection is returned when an envelope is sent to a connection (Via, RedeliverTo) that
// is not open or takes no envelopes (refreshed, see Config.RefreshGrace).
var ErrNoConnection = errors.New("fakeslack: no open connection that takes envelopes")

// ConnInfo describes one Socket Mode connection, open or closed.
type ConnInfo struct {
	// ID numbers the connections in the order they opened, from 1, as Envelope.Conn and Ack.Conn
	// do. A process that opens its connection after the previous one's hello knows its number.
	ID     int
	Open   bool // registered and not yet closed
	Opened time.Time
	Closed time.Time // zero while open
	// Draining: a disconnect other than "warning" was sent to it (Disconnect).
	Draining bool
	// TakesEnvelopes: open, and envelopes may be sent to it now (not draining, or draining
	// within Config.RefreshGrace while the app has no other connection).
	TakesEnvelopes bool
	// Refused: it was opened while the app had MaxConnections already; its only frame was a
	// disconnect with reason too_many_websockets.
	Refused    bool
	Envelopes  int    // envelopes written to it
	Acks       int    // ack frames read on it
	RemoteAddr string // the client's address (host:port)
	UserAgent  string // the client's User-Agent header, which a client may set to name itself
}

// Conns returns every Socket Mode connection so far, in the order they opened.
func (s *Server) Conns() []ConnInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	out := make([]ConnInfo, 0, len(s.connLog))
	for _, c := range s.connLog {
		open := s.conns[c]
		out = append(out, ConnInfo{
			ID: c.id, Open: open, Opened: c.opened, Closed: c.closed, Draining: c.draining,
			TakesEnvelopes: open && s.takesEnvelopesLocked(c, now), Refused: c.refused,
			Envelopes: c.sent, Acks: c.acks, RemoteAddr: c.remote, UserAgent: c.userAgent,
		})
	}
	return out
}

// takingConnLocked returns the open connection id if it takes envelopes at now, else nil.
func (s *Server) takingConnLocked(id int, now time.Time) *wsConn {
	if id < 1 || id > len(s.connLog) {
		return nil
	}
	c := s.connLog[id-1]
	if !s.conns[c] || !s.takesEnvelopesLocked(c, now) {
		return nil
	}
	return c
}

// takeForLocked removes from pending and returns the envelope c is to write now, or nil: the
// first one sent to c (Via, RedeliverTo), or the first of the others when it is c's turn
// (turnLocked). One sent to a connection that has closed or takes no more envelopes is one of
// the others: Slack would have sent it to any connection.
func (s *Server) takeForLocked(c *wsConn, now time.Time) *envelope {
	if !s.takesEnvelopesLocked(c, now) {
		return nil
	}
	firstFree := true
	for i, e := range s.pending {
		if t := s.targetLocked(e, now); t != nil {
			if t != c {
				continue
			}
		} else {
			if !firstFree {
				continue
			}
			firstFree = false
			if s.turnLocked(e, now) != c {
				if s.pinnedPending == 0 {
					return nil // nothing further in the queue is for c alone
				}
				continue
			}
			s.lastConn = c.id
		}
		s.pending = slices.Delete(s.pending, i, i+1)
		if e.to != 0 {
			s.pinnedPending--
		}
		return e
	}
	return nil
}

// targetLocked is the connection e was sent to, while it takes envelopes; nil otherwise.
func (s *Server) targetLocked(e *envelope, now time.Time) *wsConn {
	if e.to == 0 {
		return nil
	}
	return s.takingConnLocked(e.to, now)
}

// turnLocked is the connection whose turn it is to get e: among the connections that take
// envelopes, the first in opening order after the last one that got an envelope (wrapping
// around), leaving out the one e.avoid names when there is another.
func (s *Server) turnLocked(e *envelope, now time.Time) *wsConn {
	var takers []*wsConn
	for c := range s.conns {
		if s.takesEnvelopesLocked(c, now) {
			takers = append(takers, c)
		}
	}
	if len(takers) > 1 && e.avoid != 0 {
		takers = slices.DeleteFunc(takers, func(c *wsConn) bool { return c.id == e.avoid })
	}
	if len(takers) == 0 {
		return nil
	}
	slices.SortFunc(takers, func(a, b *wsConn) int { return a.id - b.id })
	for _, c := range takers {
		if c.id > s.lastConn {
			return c
		}
	}
	return takers[0]
}

// graceEndsLocked is the first time after now at which a refreshed connection stops taking
// envelopes because its Config.RefreshGrace ends (zero: none will).
func (s *Server) graceEndsLocked(now time.Time) time.Time {
	var first time.Time
	for c := range s.conns {
		if !c.draining {
			continue
		}
		if end := c.drainAt.Add(s.cfg.RefreshGrace); end.After(now) && (first.IsZero() || end.Before(first)) {
			first = end
		}
	}
	return first
}

// RedeliverTo sends the envelope again as Redeliver does (a new envelope id, the same payload
// and event_id, retry_attempt+1, retry_reason "timeout"), to the connection conn: for a test in
// which another replica gets an event again. It returns the new envelope id, or "" if
// envelopeID is unknown or conn is not open or takes no envelopes. Should conn close before the
// envelope is written, it goes to another connection.
func (s *Server) RedeliverTo(envelopeID string, conn int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.envelopes[envelopeID]
	if e == nil || s.takingConnLocked(conn, time.Now()) == nil {
		return ""
	}
	return s.retryLocked(e, "timeout", conn).ID
}

// Via sends envelopes to one connection instead of the one whose turn it is: a test's way to
// have a chosen replica get a click, a command or an event. Its methods are those of Server
// with the same names; each fails with ErrNoConnection (and sends nothing) when the connection is
// not open or takes no envelopes when called. Should it close before an envelope is written,
// the envelope goes to another connection, as Slack would send it to any.
type Via struct {
	s    *Server
	conn int
}

// Via returns a Via for the connection conn (a ConnInfo.ID).
func (s *Server) Via(conn int) Via { return Via{s: s, conn: conn} }

// checkViaLocked returns ErrNoConnection, wrapped, when to names a connection that does not
// take envelopes now; to 0 (Slack's choice) is always fine.
func (s *Server) checkViaLocked(to int) error {
	if to != 0 && s.takingConnLocked(to, time.Now()) == nil {
		return fmt.Errorf("fakeslack: connection %d: %w", to, ErrNoConnection)
	}
	return nil
}

// Click is Server.Click, to v's connection.
func (v Via) Click(channelID, ts, user, actionID string) (string, error) {
	return v.s.click(v.conn, channelID, ts, user, actionID)
}

// MessageShortcut is Server.MessageShortcut, to v's connection.
func (v Via) MessageShortcut(channelID, ts, user, callbackID string) (string, error) {
	return v.s.messageShortcut(v.conn, channelID, ts, user, callbackID)
}

// SlashCommand is Server.SlashCommand, to v's connection. It returns the response_url.
func (v Via) SlashCommand(channelID, user, command, text string) (string, error) {
	return v.s.slashCommand(v.conn, channelID, user, command, text)
}

// Post is Server.Post, with every event of the message to v's connection. It returns the ts.
func (v Via) Post(m UserMessage) (string, error) { return v.s.post(v.conn, m) }

// SendEvent is Server.SendEvent, to v's connection. It returns the envelope id.
func (v Via) SendEvent(event map[string]any) (string, error) { return v.s.sendEvent(v.conn, event) }
