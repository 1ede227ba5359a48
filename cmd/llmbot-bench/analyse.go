package main

import (
	"hash/fnv"
	"strings"
	"time"

	"github.com/llmbot/llmbot/convo"
)

// script is what one conversation's model answers, and what Slack must show for it.
type script struct {
	tokens []string // the content deltas the fake model streams, one per chunk
	answer string   // the whole answer (Markdown)
	final  string   // the final Slack text: the answer rendered to mrkdwn by convo (normalised: norm)
	// views maps the hash of every text the bot may write while the answer streams (the rendering of
	// each token prefix) to the number of tokens it shows (the largest prefix with that rendering: a
	// token that changes nothing visible, such as a trailing space, counts as shown with it).
	views map[uint64]int
}

// newScript renders every prefix of tokens as the bot does while streaming: with one Pager fed
// every prefix in turn (as the bot's writer feeds its snapshots), and with a fresh Pager per
// prefix (as a writer that skipped snapshots may see it); both renderings count.
func newScript(tokens []string) (*script, error) {
	answer := strings.Join(tokens, "")
	parts := convo.Split(answer, convo.FormatMrkdwn, convo.MrkdwnLimit)
	if len(parts) != 1 {
		return nil, errTooLong
	}
	s := &script{tokens: tokens, answer: answer, final: norm(parts[0]), views: make(map[uint64]int, 2*len(tokens))}
	inc := convo.NewPager(convo.FormatMrkdwn, convo.MrkdwnLimit)
	var b strings.Builder
	for k, t := range tokens {
		b.WriteString(t)
		md := b.String()
		for _, ps := range [][]string{inc.Update(md, false), convo.NewPager(convo.FormatMrkdwn, convo.MrkdwnLimit).Update(md, false)} {
			if len(ps) == 1 {
				s.views[textHash(norm(ps[0]))] = k + 1
			}
		}
	}
	s.views[textHash(s.final)] = len(tokens)
	return s, nil
}

// shows returns how many tokens text shows, and false when text is no rendering of a prefix.
func (s *script) shows(text string) (int, bool) {
	k, ok := s.views[textHash(text)]
	return k, ok
}

// norm is text with every run of white space one space: an answer the bot continued in a second
// message (its end posted below what the first showed) reads the same as in one.
func norm(text string) string { return strings.Join(strings.Fields(text), " ") }

// reply is what a conversation's thread shows: the bot's messages in the order they were posted,
// the first one's placeholder (a first post that is no rendering of the answer) left out.
type reply struct {
	order       []string
	text        map[string]string
	placeholder string
}

// add applies a write (an edit of a message not posted yet is ignored) and returns what the thread
// shows now, normalised (norm), and whether the write was a new message.
func (r *reply) add(s *script, w botWrite) (shown string, posted bool) {
	if r.text == nil {
		r.text = map[string]string{}
	}
	if _, ok := r.text[w.ts]; !ok && w.post {
		r.order = append(r.order, w.ts)
		if _, view := s.shows(norm(w.text)); len(r.order) == 1 && !view {
			r.placeholder = w.text
		}
		posted = true
	}
	if _, ok := r.text[w.ts]; ok || posted {
		r.text[w.ts] = w.text
	}
	var texts []string
	for _, ts := range r.order {
		if t := r.text[ts]; t != r.placeholder {
			texts = append(texts, t)
		}
	}
	return norm(strings.Join(texts, " ")), posted
}

func textHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// botWrite is one applied write to a bot message in a conversation's thread.
type botWrite struct {
	at   time.Time
	ts   string // the message written
	post bool   // chat.postMessage (the placeholder or a new message); else an edit
	text string // the message's whole text after the write
}

// status is how a conversation ended, as its asker sees it.
type status int

const (
	complete status = iota // the reply shows the whole answer, byte for byte
	wrong                  // the reply shows something else (a partial answer, an error or a note)
	lost                   // no reply, or only the placeholder
)

// outcome is what one conversation looked like to its asker.
type outcome struct {
	status    status
	lags      []time.Duration // per token shown: from the model sending it to the first write showing it
	hidden    int             // tokens the model sent that no write ever showed
	firstText time.Duration   // model's first token -> first write showing text
	hasFirst  bool
	finalLag  time.Duration // model's last token -> the final text shown
	hasFinal  bool
	messages  int // bot messages in the thread (1 expected: the answer fits one message)
	unmatched int // edits whose text is no rendering of a prefix of the answer (notes, errors)
}

// analyse measures one conversation from the model's token send times and the writes in its
// thread, in the order applied. The reply is the first message the bot posted in the thread; its
// first post is the placeholder.
func analyse(s *script, tokenTimes []time.Time, writes []botWrite) outcome {
	return follow(s, tokenTimes, writes)
}

// follow replays the writes: which token each shows first, and how the reply ends. What the
// thread shows is the bot's messages together (see reply).
func follow(s *script, tokenTimes []time.Time, writes []botWrite) outcome {
	var o outcome
	var r reply
	shown, last := 0, ""
	for _, w := range writes {
		text, posted := r.add(s, w)
		if posted {
			o.messages++
		}
		last = text
		k, ok := s.shows(text)
		if !ok {
			if text != "" && !posted { // a post that is no rendering is a placeholder, or a note below
				o.unmatched++
			}
			continue
		}
		if text == s.final && !o.hasFinal && len(tokenTimes) > 0 {
			o.finalLag, o.hasFinal = nonNegative(w.at.Sub(tokenTimes[len(tokenTimes)-1])), true
		}
		for j := shown; j < k && j < len(tokenTimes); j++ {
			if j == 0 {
				o.firstText, o.hasFirst = nonNegative(w.at.Sub(tokenTimes[0])), true
			}
			o.lags = append(o.lags, nonNegative(w.at.Sub(tokenTimes[j])))
		}
		shown = max(shown, k)
	}
	o.hidden = max(len(tokenTimes)-shown, 0)
	switch {
	case last == s.final:
		o.status = complete
	case last == "":
		o.status = lost
	default:
		o.status = wrong
	}
	return o
}

// nonNegative clamps d at 0: the fake model records a token's time just after flushing it, so a
// very fast write can carry a time a few microseconds before it.
func nonNegative(d time.Duration) time.Duration { return max(d, 0) }
