package bot

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/llmbot/llmbot/approvals"
	"github.com/llmbot/llmbot/ask"
	"github.com/llmbot/llmbot/route"
	"github.com/llmbot/llmbot/state"
)

// The replica inbox is a list in Redis that anyone able to write to Redis can push onto. Redis is
// therefore no trust root: what one replica hands another is signed with a key derived from the
// bot token (which every replica has and Redis never sees), names the replica it is for, is refused
// once older than handoverMaxAge (and, by the receiver's claim, when a copy came before), and
// carries only the ids a hand-over needs. The receiver rebuilds the request from those ids; it
// never dispatches anything it was not built to hand over.

// InboxKey is the key the replicas of one bot sign their hand-overs with, derived from its bot
// token: the token itself never leaves the process, and a key derived for this one use says
// nothing about it.
func InboxKey(botToken string) []byte {
	return state.DeriveKey(botToken, "llmbot replica inbox v1")
}

// handoverMaxAge is how old a hand-over may be (by the time inside it) and still be dispatched; it
// also bounds how far ahead of the receiver's clock the sender's may be. A click handed over
// arrives within milliseconds; one minute leaves room for clocks that differ a little and for a
// receiver that was busy, and keeps a copy read out of Redis from being replayed later.
const handoverMaxAge = time.Minute

// macLen is the length of a hand-over's signature, hex-encoded, in front of its payload.
const macLen = 2 * sha256.Size

// handover is what a replica hands another: a click on an answer the receiver writes (Stop, a tool
// approval's buttons, an answer to an ask_user question) or Slack's Stop on an agent session. It
// carries ids only, never a command or a response_url, and no text but what the asker typed as the
// answer to a question (Answer, bounded): the receiver rebuilds the request from them.
type handover struct {
	Action    string `json:"action"` // route.ActionStop, an approval's action id, ask's, route.EventSessionStopped
	Team      string `json:"team,omitempty"`
	Channel   string `json:"channel"`
	User      string `json:"user"` // who clicked
	ThreadTS  string `json:"thread_ts,omitempty"`
	MessageTS string `json:"message_ts,omitempty"` // the message clicked on
	// RefThreadTS and RefTS are the button's reference to its answer (route.ReplyRef, ApprovalRef).
	RefThreadTS string `json:"ref_thread_ts,omitempty"`
	RefTS       string `json:"ref_ts,omitempty"`
	Call        string `json:"call,omitempty"`      // an approval's id (approvals.ApprovalRef.ID), a question's (ask.Ref.ID)
	Asker       string `json:"asker,omitempty"`     // who may decide an approval or answer a question
	Approvers   bool   `json:"approvers,omitempty"` // or an approval's approvers (approvals.ApprovalRef.Approvers)
	// Answer is what the asker typed in a question's modal (ask.View), cut to ask.MaxAnswer
	// characters: it reaches the model as their answer, fenced as data like every tool result.
	Answer string `json:"answer,omitempty"`
	From   string `json:"from"`
	To     string `json:"to"`   // the receiver: a hand-over pushed onto another inbox is refused there
	Sent   int64  `json:"sent"` // Unix milliseconds, by the sender's clock
}

// errNotHandedOver is a request or an inbox message that is none of the hand-overs.
var errNotHandedOver = errors.New("not a hand-over between replicas")

var (
	slackID = regexp.MustCompile(`^[A-Z0-9]{1,24}$`)
	slackTS = regexp.MustCompile(`^[0-9]{1,12}\.[0-9]{1,8}$`)
	callID  = regexp.MustCompile(`^[0-9a-f]{1,32}$`)
)

// handoverOf is req as a hand-over from replica from to replica to at now: only the kinds handed
// over, with the ids their handlers read (the button's reference parsed again from its value).
func handoverOf(req *route.Request, from, to string, now time.Time) (handover, error) {
	h := handover{Action: req.Name, Team: req.Team, Channel: req.Channel, User: req.User, ThreadTS: req.ThreadTS,
		MessageTS: req.MessageTS, From: from, To: to, Sent: now.UnixMilli()}
	switch {
	case req.Kind == route.Action && req.Name == route.ActionStop:
		ref, err := route.ParseReplyRef(req.Text)
		if err != nil {
			return handover{}, err
		}
		h.RefThreadTS, h.RefTS = ref.ThreadTS, ref.TS
	case req.Kind == route.Action && approvals.VerdictOf(req.Name) != "":
		ref, err := approvals.ParseApprovalRef(req.Text)
		if err != nil {
			return handover{}, err
		}
		h.RefThreadTS, h.RefTS, h.Call, h.Asker, h.Approvers = ref.ThreadTS, ref.TS, ref.ID, ref.Asker, ref.Approvers
	case ask.Answers(req.Name) && (req.Kind == route.View) == (req.Name == ask.View):
		ref, err := ask.ParseRef(req.Text)
		if err != nil {
			return handover{}, err
		}
		h.RefThreadTS, h.RefTS, h.Call, h.Asker = ref.ThreadTS, ref.TS, ref.ID, ref.Asker
		h.Answer = clipRunes(req.Values[ask.AnswerInput], ask.MaxAnswer)
	case req.Kind == route.Event && req.Name == route.EventSessionStopped:
	default:
		return handover{}, fmt.Errorf("%s: %w", req.Kind, errNotHandedOver)
	}
	return h, h.valid()
}

// valid reports whether h is one of the hand-overs, each id in the form Slack (or the bot) gives it.
// Its error names the field, not the value.
func (h handover) valid() error {
	type field struct {
		name, v  string
		re       *regexp.Regexp
		optional bool
	}
	fields := []field{{"channel", h.Channel, slackID, false}, {"user", h.User, slackID, false},
		{"team", h.Team, slackID, true}, {"thread_ts", h.ThreadTS, slackTS, true},
		{"message_ts", h.MessageTS, slackTS, true}, {"ref_thread_ts", h.RefThreadTS, slackTS, true}}
	switch {
	case h.Action == route.ActionStop:
		fields = append(fields, field{"ref_ts", h.RefTS, slackTS, false})
	case approvals.VerdictOf(h.Action) != "" || ask.Answers(h.Action):
		fields = append(fields, field{"ref_ts", h.RefTS, slackTS, false}, field{"call", h.Call, callID, false},
			field{"asker", h.Asker, slackID, false})
	case h.Action == route.EventSessionStopped:
		fields = append(fields, field{"thread_ts", h.ThreadTS, slackTS, false})
	default:
		return fmt.Errorf("action: %w", errNotHandedOver)
	}
	if h.Action != ask.View && h.Answer != "" || utf8.RuneCountInString(h.Answer) > ask.MaxAnswer {
		return fmt.Errorf("answer: %w", errNotHandedOver)
	}
	for _, f := range fields {
		if (f.v != "" || !f.optional) && !f.re.MatchString(f.v) {
			return fmt.Errorf("%s: %w", f.name, errNotHandedOver)
		}
	}
	return nil
}

// request is h as the loop dispatches it, as Slack would have sent the click or the event.
func (h handover) request() *route.Request {
	req := &route.Request{Kind: route.Action, Name: h.Action, Channel: h.Channel, User: h.User, Team: h.Team,
		ThreadTS: h.ThreadTS, MessageTS: h.MessageTS, From: h.From}
	switch {
	case h.Action == route.ActionStop:
		req.Text = route.ReplyRef{ThreadTS: h.RefThreadTS, TS: h.RefTS}.Value()
	case h.Action == route.EventSessionStopped:
		req.Kind = route.Event
	case ask.Answers(h.Action):
		req.Text = ask.Ref{ThreadTS: h.RefThreadTS, TS: h.RefTS, ID: h.Call, Asker: h.Asker}.Value()
		if h.Action == ask.View {
			req.Kind, req.Values = route.View, map[string]string{ask.AnswerInput: h.Answer}
		}
	default:
		req.Text = approvals.ApprovalRef{ThreadTS: h.RefThreadTS, TS: h.RefTS, ID: h.Call, Asker: h.Asker, Approvers: h.Approvers}.Value()
	}
	return req
}

// seal is h signed with key: the signature, hex, then the payload it signs. Without a key nothing is
// handed over: an unkeyed signature is one anybody can make.
func seal(key []byte, h handover) ([]byte, error) {
	if len(key) == 0 {
		return nil, errors.New("seal hand-over: no inbox key")
	}
	payload, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("seal hand-over: %w", err)
	}
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	out := make([]byte, 0, macLen+len(payload))
	out = hex.AppendEncode(out, m.Sum(nil))
	return append(out, payload...), nil
}

// unseal is the hand-over in msg if key signed it, it is for replica self, it is no older than
// handoverMaxAge at now (nor that far ahead), and it is one of the hand-overs. The error says why
// not, without the message's contents.
func unseal(key []byte, msg []byte, self string, now time.Time) (handover, error) {
	if len(key) == 0 {
		return handover{}, errors.New("no inbox key")
	}
	if len(msg) < macLen {
		return handover{}, errors.New("unsigned")
	}
	got := make([]byte, sha256.Size)
	if _, err := hex.Decode(got, msg[:macLen]); err != nil {
		return handover{}, errors.New("unsigned")
	}
	payload := msg[macLen:]
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	if !hmac.Equal(got, m.Sum(nil)) {
		return handover{}, errors.New("bad signature")
	}
	var h handover
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return handover{}, errors.New("signed but not a hand-over")
	}
	if h.To != self {
		return handover{}, errors.New("for another replica")
	}
	if age := now.Sub(time.UnixMilli(h.Sent)); age > handoverMaxAge || age < -handoverMaxAge {
		return handover{}, fmt.Errorf("stale: sent %v ago", age.Round(time.Second))
	}
	if err := h.valid(); err != nil {
		return handover{}, err
	}
	return h, nil
}

// clipRunes cuts s to at most n characters.
func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
