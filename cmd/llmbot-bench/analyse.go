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
	final  string   // the final Slack text: the answer rendered to mrkdwn by convo
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
	s := &script{tokens: tokens, answer: answer, final: parts[0], views: make(map[uint64]int, 2*len(tokens))}
	inc := convo.NewPager(convo.FormatMrkdwn, convo.MrkdwnLimit)
	var b strings.Builder
	for k, t := range tokens {
		b.WriteString(t)
		md := b.String()
		for _, ps := range [][]string{inc.Update(md, false), convo.NewPager(convo.FormatMrkdwn, convo.MrkdwnLimit).Update(md, false)} {
			if len(ps) == 1 {
				s.views[textHash(ps[0])] = k + 1
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

// follow replays the writes: which token each shows first, and how the reply ends.
func follow(s *script, tokenTimes []time.Time, writes []botWrite) outcome {
	var o outcome
	var reply string
	seen := map[string]bool{}
	for _, w := range writes {
		if w.post && !seen[w.ts] {
			seen[w.ts] = true
			o.messages++
			if reply == "" {
				reply = w.ts
			}
		}
	}
	if reply == "" {
		o.status, o.hidden = lost, len(tokenTimes)
		return o
	}
	shown, last, placeholder := 0, "", ""
	for _, w := range writes {
		if w.ts != reply {
			continue
		}
		if w.post {
			placeholder = w.text
		}
		last = w.text
		k, ok := s.shows(w.text)
		if !ok {
			if !w.post { // the first post is the placeholder
				o.unmatched++
			}
			continue
		}
		if w.text == s.final && !o.hasFinal && len(tokenTimes) > 0 {
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
	case last == placeholder:
		o.status = lost
	default:
		o.status = wrong
	}
	return o
}

// nonNegative clamps d at 0: the fake model records a token's time just after flushing it, so a
// very fast write can carry a time a few microseconds before it.
func nonNegative(d time.Duration) time.Duration { return max(d, 0) }
