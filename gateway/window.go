package gateway

import "github.com/slack-go/slack"

// ThreadWindow is what a thread read keeps as conversations.replies' pages arrive (oldest first),
// so that the bytes held stay bounded however long the thread: its first message (the parent),
// the beginning of its replies within Head bytes (what a summary of the thread's older part can
// use: a long thread's beginning is often what it is about), and its newest replies within Tail
// bytes (what the context can use). The replies in between are dropped as they arrive, and
// counted. Sizes are MessageBytes.
type ThreadWindow struct {
	Head, Tail int // Tail 0: every message is kept

	head      []slack.Message // the parent, then the beginning
	headBytes int             // of head[1:]
	headFull  bool            // a reply did not fit: the rest go to tail
	tail      []slack.Message
	tailBytes int
	leftOut   int
}

// NewThreadWindow is a window of a read whose newest replies take at most tail bytes (0: all
// kept) and whose beginning at most half as much: the summary of the older part, which reads the
// beginning, has the same context budget as the answer.
func NewThreadWindow(tail int) *ThreadWindow {
	return &ThreadWindow{Head: tail / 2, Tail: tail}
}

// Add takes a page, the next messages of the thread, oldest first.
func (w *ThreadWindow) Add(page []slack.Message) {
	for _, m := range page {
		n := MessageBytes(m)
		switch {
		case len(w.head) == 0 || w.Tail <= 0:
			w.head = append(w.head, m)
		case !w.headFull && w.headBytes+n <= w.Head:
			w.head = append(w.head, m)
			w.headBytes += n
		default:
			w.headFull = true
			w.tail = append(w.tail, m)
			w.tailBytes += n
		}
	}
	drop := 0
	for w.Tail > 0 && w.tailBytes > w.Tail && len(w.tail)-drop > 1 {
		w.tailBytes -= MessageBytes(w.tail[drop])
		drop++
	}
	if drop > 0 {
		// A new slice, so that the dropped messages' array is not kept alive under the window.
		w.tail = append([]slack.Message(nil), w.tail[drop:]...)
		w.leftOut += drop
	}
}

// Messages returns what the window kept, oldest first, and how many replies it left out (all
// between the beginning and the newest).
func (w *ThreadWindow) Messages() ([]slack.Message, int) {
	out := make([]slack.Message, 0, len(w.head)+len(w.tail))
	return append(append(out, w.head...), w.tail...), w.leftOut
}

// Held is the bytes the window holds (MessageBytes of every reply kept).
func (w *ThreadWindow) Held() int { return w.headBytes + w.tailBytes }

// MessageBytes estimates what a message holds in memory: its text (twice: its blocks mostly say
// it again), its attachments' text, its files' objects and a fixed part for the rest.
func MessageBytes(m slack.Message) int {
	n := 512 + 2*len(m.Text) + 1024*len(m.Files)
	for _, at := range m.Attachments {
		n += len(at.Text) + len(at.Fallback) + len(at.Pretext) + len(at.Title)
	}
	return n
}
