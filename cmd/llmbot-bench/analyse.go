package main

import (
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/slackmd"
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
	// stream is what a natively streamed answer shows at the end: slackmd.MarkdownStream's output for
	// the whole answer (Feed, then Flush). A streamed message only ever grows, so while the answer
	// streams it shows a prefix of stream.
	stream string
	// streamEnds[j] is how much of stream must be shown for tokens[j] to be visible: the length of
	// the common prefix of stream and what MarkdownStream shows of the answer up to tokens[j] were it
	// to end there (made non-decreasing). For answers the stream passes through unchanged, as the
	// benchmark's are, that is where tokens[j] ends in the answer; where the stream rewrites text
	// (a table it holds back and aligns), a token counts as shown once the rendering up to it is.
	streamEnds []int
}

// newScript renders every prefix of tokens as the bot does while streaming: with one Pager fed
// every prefix in turn (as the bot's writer feeds its snapshots), and with a fresh Pager per
// prefix (as a writer that skipped snapshots may see it); both renderings count. It also renders
// the answer as native streaming writes it (MarkdownStream, standard Markdown).
func newScript(tokens []string) (*script, error) {
	answer := strings.Join(tokens, "")
	parts := slackmd.Split(answer, slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)
	if len(parts) != 1 {
		return nil, errTooLong
	}
	s := &script{tokens: tokens, answer: answer, final: norm(parts[0]), views: make(map[uint64]int, 2*len(tokens))}
	inc := slackmd.NewPager(slackmd.FormatMrkdwn, slackmd.MrkdwnLimit)
	var b strings.Builder
	for k, t := range tokens {
		b.WriteString(t)
		md := b.String()
		for _, ps := range [][]string{inc.Update(md, false), slackmd.NewPager(slackmd.FormatMrkdwn, slackmd.MrkdwnLimit).Update(md, false)} {
			if len(ps) == 1 {
				s.views[textHash(norm(ps[0]))] = k + 1
			}
		}
	}
	s.views[textHash(s.final)] = len(tokens)

	ms := slackmd.NewMarkdownStream()
	var out strings.Builder
	for _, t := range tokens {
		out.WriteString(ms.Feed(t))
	}
	out.WriteString(ms.Flush())
	s.stream = out.String()
	s.streamEnds = make([]int, len(tokens))
	b.Reset()
	end := 0
	for j, t := range tokens {
		b.WriteString(t)
		f := slackmd.NewMarkdownStream()
		end = max(end, commonPrefix(s.stream, f.Feed(b.String())+f.Flush()))
		s.streamEnds[j] = end
	}
	return s, nil
}

// shows returns how many tokens a thread's view shows, and false when it is no rendering of a
// prefix of the answer.
func (s *script) shows(v view) (int, bool) {
	if !v.stream {
		k, ok := s.views[textHash(v.text)]
		return k, ok
	}
	if !strings.HasPrefix(s.stream, v.text) {
		return 0, false
	}
	if v.text == s.stream {
		return len(s.tokens), true
	}
	k := 0
	for k < len(s.streamEnds) && s.streamEnds[k] <= len(v.text) {
		k++
	}
	return k, true
}

// isFinal reports whether v shows the whole answer as the bot writes it at the end: the mrkdwn
// rendering for an answer written by posting and editing, MarkdownStream's whole output for one
// streamed natively.
func (s *script) isFinal(v view) bool {
	if v.stream {
		return v.text == s.stream
	}
	return v.text == s.final
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// norm is text with every run of white space one space: an answer the bot continued in a second
// message (its end posted below what the first showed) reads the same as in one.
func norm(text string) string { return strings.Join(strings.Fields(text), " ") }

// view is what a conversation's thread shows its asker.
type view struct {
	// text: the bot's messages' texts joined; when every message shown was streamed natively, as
	// written (Markdown, compared byte for byte with MarkdownStream's output), else normalised (norm).
	text   string
	stream bool
}

// message is one bot message in a thread, as the writes left it.
type message struct {
	text   string
	stream bool // started with chat.startStream and not rewritten by chat.update since: Markdown
}

// reply is what a conversation's thread shows: the bot's messages in the order they were posted,
// the first one's placeholder (a first post that is no rendering of the answer) left out.
type reply struct {
	order       []string
	msgs        map[string]*message
	placeholder string
	streamed    bool // a message was started with chat.startStream
	posted      bool // a message was posted with chat.postMessage
}

// add applies a write (a write to a message not posted yet is ignored) and returns what the
// thread shows now, and whether the write was a new message.
func (r *reply) add(s *script, w botWrite) (shown view, created bool) {
	if r.msgs == nil {
		r.msgs = map[string]*message{}
	}
	m := r.msgs[w.ts]
	switch {
	case m == nil && (w.kind == fakeslack.WritePost || w.kind == fakeslack.WriteStart):
		m = &message{text: w.text, stream: w.kind == fakeslack.WriteStart}
		r.msgs[w.ts] = m
		r.order = append(r.order, w.ts)
		created = true
		if w.kind == fakeslack.WriteStart {
			r.streamed = true
		} else {
			r.posted = true
			if _, ok := s.shows(view{text: norm(w.text)}); len(r.order) == 1 && !ok {
				r.placeholder = w.text
			}
		}
	case m == nil:
	case w.kind == fakeslack.WritePost || w.kind == fakeslack.WriteUpdate:
		m.text, m.stream = w.text, false
	case w.kind == fakeslack.WriteAppend || w.kind == fakeslack.WriteStop:
		m.text += w.text
	case w.kind == fakeslack.WriteDelete:
		delete(r.msgs, w.ts)
		r.order = slices.DeleteFunc(r.order, func(ts string) bool { return ts == w.ts })
	}
	return r.view(), created
}

// view is what the thread shows: every message but the placeholder and empty ones.
func (r *reply) view() view {
	var texts []string
	stream := true
	for _, ts := range r.order {
		m := r.msgs[ts]
		if m.text == "" || !m.stream && m.text == r.placeholder {
			continue
		}
		texts = append(texts, m.text)
		stream = stream && m.stream
	}
	if len(texts) == 0 {
		return view{}
	}
	if stream { // a long streamed answer continues in a new message at a line end: joined as written
		return view{text: strings.Join(texts, ""), stream: true}
	}
	return view{text: norm(strings.Join(texts, " "))}
}

func textHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// botWrite is one applied write to a bot message in a conversation's thread.
type botWrite struct {
	at   time.Time
	kind fakeslack.WriteKind // post, update, start, append, stop or delete
	ts   string              // the message written
	// text: for a post or an update the message's whole text after it; for chat.startStream,
	// appendStream and stopStream the Markdown the call added (the streamed message is rebuilt from
	// them).
	text string
}

// botWriteOf is w as the analysis reads it, and false for a write that changes no bot message in
// a thread (ephemeral messages, files).
func botWriteOf(w fakeslack.Write) (botWrite, bool) {
	b := botWrite{at: w.Time, kind: w.Kind, ts: w.TS, text: w.Text}
	switch w.Kind {
	case fakeslack.WritePost, fakeslack.WriteUpdate, fakeslack.WriteDelete:
	case fakeslack.WriteStart, fakeslack.WriteAppend, fakeslack.WriteStop:
		b.text = w.Delta
	default:
		return botWrite{}, false
	}
	return b, true
}

// status is how a conversation ended, as its asker sees it.
type status int

const (
	complete status = iota // the reply shows the whole answer, byte for byte
	wrong                  // the reply shows something else (a partial answer, an error or a note)
	lost                   // no reply, or only the placeholder (or an empty streamed message)
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
	messages  int // bot messages in the thread at the end (1 expected: the answer fits one message)
	unmatched int // writes whose text is no rendering of a prefix of the answer (notes, errors)
	// streamed: a message was started with chat.startStream; posted: one was posted with
	// chat.postMessage (the bot answers by editing when the stream budget is used up; both when a
	// stream that could not be finished was replaced by posted messages).
	streamed, posted bool
}

// analyse measures one conversation from the model's token send times and the writes in its
// thread, in the order applied. The reply is the first message the bot posted or started streaming
// in the thread; a first post that is no rendering of the answer is the placeholder.
func analyse(s *script, tokenTimes []time.Time, writes []botWrite) outcome {
	return follow(s, tokenTimes, writes)
}

// follow replays the writes: which token each shows first, and how the reply ends. What the
// thread shows is the bot's messages together (see reply).
func follow(s *script, tokenTimes []time.Time, writes []botWrite) outcome {
	var o outcome
	var r reply
	shown := 0
	var last view
	for _, w := range writes {
		v, created := r.add(s, w)
		last = v
		k, ok := s.shows(v)
		if !ok {
			if v.text != "" && !created { // a post that is no rendering is a placeholder, or a note below
				o.unmatched++
			}
			continue
		}
		if s.isFinal(v) && !o.hasFinal && len(tokenTimes) > 0 {
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
	o.messages, o.streamed, o.posted = len(r.order), r.streamed, r.posted
	switch {
	case s.isFinal(last):
		o.status = complete
	case last.text == "":
		o.status = lost
	default:
		o.status = wrong
	}
	return o
}

// nonNegative clamps d at 0: the fake model records a token's time just after flushing it, so a
// very fast write can carry a time a few microseconds before it.
func nonNegative(d time.Duration) time.Duration { return max(d, 0) }
