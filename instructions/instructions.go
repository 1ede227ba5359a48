// Package instructions is the use case of a channel's standing instructions, set from Slack with
// "/llmbot instructions": kept in the shared state, bounded in length, changed only by the people the
// operator names (or, when none are named, by anyone who may use the bot in the channel), every change
// announced in the channel with who made it. The answers in the channel read them (Text) and add them
// to their system prompt after the operator's, as the channel's text, not the operator's (convo).
package instructions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmbot/llmbot/convo"
	"github.com/llmbot/llmbot/gateway"
	"github.com/llmbot/llmbot/slackmd"
	"github.com/llmbot/llmbot/state"
)

// coll is the shared state's collection of the channels' instructions, by channel id.
const coll = "instructions"

// Records is the part of the shared state that keeps documents until deleted (state's Records).
type Records interface {
	Put(ctx context.Context, coll, id string, val []byte) error
	Get(ctx context.Context, coll, id string) ([]byte, bool, error)
	Delete(ctx context.Context, coll, id string) error
}

// Poster posts a message in a channel (the gateway's Messenger.Post).
type Poster interface {
	Post(ctx context.Context, channel, threadTS string, m gateway.Msg) (ts string, err error)
}

// Options configure Instructions.
type Options struct {
	// MaxLength bounds the instructions, in characters.
	MaxLength int
	// Editors are the people who may change a channel's instructions; none: anyone who may use the
	// bot there.
	Editors []string
}

// Set is a channel's instructions as kept.
type Set struct {
	Text  string    `json:"text"`
	By    string    `json:"by"` // who set them
	SetAt time.Time `json:"at"`
}

// Instructions are the channels' standing instructions.
type Instructions struct {
	rec  Records
	key  []byte
	post Poster
	opt  Options
}

// New returns the instructions kept in rec, sealed under key (state.Seal; the wiring derives it from the
// bot token, so instructions anyone with write access to Redis made up never reach a prompt), whose
// changes are announced through post.
func New(rec Records, key []byte, post Poster, opt Options) *Instructions {
	return &Instructions{rec: rec, key: key, post: post, opt: opt}
}

// Refusal is an error whose text is meant for the person who asked.
type Refusal struct{ Text string }

func (r *Refusal) Error() string { return r.Text }

// Get returns channel's instructions; false when it has none.
func (in *Instructions) Get(ctx context.Context, channel string) (Set, bool, error) {
	sealed, ok, err := in.rec.Get(ctx, coll, channel)
	if err != nil || !ok {
		return Set{}, false, err
	}
	b, ok := state.Unseal(in.key, coll, channel, sealed)
	var s Set
	// What Redis holds is read as hostile: a record that is not ours, or longer than allowed, is none.
	if !ok || json.Unmarshal(b, &s) != nil || strings.TrimSpace(s.Text) == "" || utf8.RuneCountInString(s.Text) > in.opt.MaxLength {
		return Set{}, false, nil
	}
	return s, true, nil
}

// Text returns channel's instructions for an answer's system prompt ("" when none, or when they cannot
// be read now: an answer goes on without them).
func (in *Instructions) Text(ctx context.Context, channel string) string {
	s, ok, err := in.Get(ctx, channel)
	if err != nil || !ok {
		return ""
	}
	return s.Text
}

// MayEdit reports whether user may change channel instructions.
func (in *Instructions) MayEdit(user string) bool {
	return len(in.opt.Editors) == 0 || slices.Contains(in.opt.Editors, user)
}

// Change sets channel's instructions to text for user ("" clears them), and announces the change in
// the channel.
func (in *Instructions) Change(ctx context.Context, channel, user, text string, now time.Time) error {
	text = strings.TrimSpace(slackmd.StripControls(text))
	switch n := utf8.RuneCountInString(text); {
	case !in.MayEdit(user):
		return &Refusal{Text: "Only the people the operator named may change this channel's instructions."}
	case n > in.opt.MaxLength:
		return &Refusal{Text: fmt.Sprintf("Those instructions have %d characters; a channel's instructions have at most %d.", n, in.opt.MaxLength)}
	}
	var err error
	if text == "" {
		err = in.rec.Delete(ctx, coll, channel)
	} else {
		b, _ := json.Marshal(Set{Text: text, By: user, SetAt: now.UTC().Truncate(time.Second)}) // strings and a time: cannot fail
		err = in.rec.Put(ctx, coll, channel, state.Seal(in.key, coll, channel, b))
	}
	if err != nil {
		return fmt.Errorf("change instructions: %w", err)
	}
	if _, err := in.post.Post(ctx, channel, "", gateway.Msg{Text: Announcement(user, text), Mark: convo.Mark{Kind: convo.MarkNotice}}); err != nil {
		return fmt.Errorf("announce instructions: %w", err)
	}
	return nil
}

// Announcement is what the channel is told of a change by user to text ("": cleared).
func Announcement(user, text string) string {
	if text == "" {
		return fmt.Sprintf("<@%s> cleared this channel's instructions for me.", user)
	}
	return fmt.Sprintf("<@%s> set this channel's instructions for me:\n%s", user, Quote(text))
}

// Quote is text as a Slack quote, its mentions neutralised and its markup escaped: the channel sees
// the instructions as written, and they can ping nobody.
func Quote(text string) string {
	lines := strings.Split(slackmd.EscapeMrkdwn(slackmd.Neutralise(text)), "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}
