package handlers

import "github.com/llmbot/llmbot/gateway"

// editMessages are the messages an answer written by editing shows, one per part: what the thread
// shows of it. Every write of the answer's text that lands, interim or final, passes through landed.
type editMessages struct {
	ts    []string // one message per part; ts[0] is the placeholder, when one was posted
	shown []string // the text last written to each message ("" for the placeholder)
	btn   []string // the buttons each message shows (buttonKey)
	// replaces maps a part posted anew (its message refused the final edit) to the message it
	// replaces (Mark.Replaces).
	replaces map[int]string
}

// next returns the next write the answer needs: an edit of message i, or a post of part i (post true);
// i < 0 when Slack already shows parts. bs are the buttons of the answer's last message while it is written. A message also needs an edit when its buttons change: only
// the last part carries Stop, so a sealed part loses it.
func (e *editMessages) next(parts []string, bs []gateway.Button) (i int, post bool) {
	for i := 0; i < len(e.ts) && i < len(parts); i++ {
		if parts[i] != "" && (parts[i] != e.shown[i] || e.btn[i] != buttonKey(partButtons(bs, i, len(parts)))) {
			return i, false
		}
	}
	if n := len(e.ts); len(parts) > n && parts[n] != "" {
		return n, true
	}
	return -1, false
}

// firstTS is the ts of the answer's first message (the placeholder), "" before it is posted.
func (e *editMessages) firstTS() string {
	if len(e.ts) == 0 {
		return ""
	}
	return e.ts[0]
}

// landed records that Slack shows msg as message ts, the answer's part i: a post of the next part
// (i == len(e.ts)), an edit of part i, or part i posted anew. Every write of the answer's text that
// lands, interim or final, passes here: the one place that knows what the thread shows of this
// answer.
func (e *editMessages) landed(i int, ts string, msg gateway.Msg) {
	if i == len(e.ts) {
		e.ts, e.shown, e.btn = append(e.ts, ts), append(e.shown, msg.Text), append(e.btn, buttonKey(msg.Buttons))
		return
	}
	e.ts[i], e.shown[i], e.btn[i] = ts, msg.Text, buttonKey(msg.Buttons)
}

func (e *editMessages) shows() showing {
	switch {
	case len(e.ts) == 0:
		return showsNothing
	case len(e.ts) == 1 && e.shown[0] == "":
		return showsPlaceholder
	}
	return showsText
}

func (e *editMessages) placeholderTS() string { return e.firstTS() }
