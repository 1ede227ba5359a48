package convo

import (
	"strings"

	"github.com/slack-go/slack"
)

// plain converts a Slack message's text (mrkdwn with <…> tokens and &amp; &lt; &gt;
// escapes) to plain text for the model. The bot's mention at the start of the text (with
// a following ",", ";" or ":") or at its very end is removed; elsewhere it reads "@BotName".
func (b *builder) plain(m slack.Message) string {
	text := m.Text
	if strings.TrimSpace(text) == "" {
		text = attachmentsText(m.Attachments)
	}
	if strings.TrimSpace(text) == "" {
		text = blocksText(m.Blocks)
	}
	var sb strings.Builder
	sb.Grow(len(text))
	s := text
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			unescapeTo(&sb, s)
			break
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			unescapeTo(&sb, s)
			break
		}
		unescapeTo(&sb, s[:i])
		tok := s[i+1 : i+j]
		s = s[i+j+1:]
		if b.isBotMention(tok) {
			atEdge := strings.TrimSpace(sb.String()) == "" || strings.TrimSpace(s) == ""
			name := b.botSelfName()
			if atEdge || name == "" {
				s = removeMention(&sb, s)
				continue
			}
			sb.WriteString("@" + name)
			continue
		}
		b.token(&sb, tok)
	}
	return strings.TrimSpace(sb.String())
}

// removeMention closes the gap a removed mention leaves between the text written so far
// (sb) and the rest (s), and returns the new rest: a "," or ";" right after the mention,
// or a ":" followed by a space ("<@BOT>: hi", but not "<@BOT>:wave:"), goes with it, and
// the spaces on both sides become one (none at a line's start or end). Spaces anywhere
// else, such as in pasted code, are kept.
func removeMention(sb *strings.Builder, s string) string {
	if s != "" && (s[0] == ',' || s[0] == ';' || s[0] == ':' && (len(s) == 1 || s[1] == ' ' || s[1] == '\t' || s[1] == '\n')) {
		s = s[1:]
	}
	s = strings.TrimLeft(s, " \t")
	before := sb.String()
	if t := strings.TrimRight(before, " \t"); len(t) != len(before) {
		sb.Reset()
		sb.WriteString(t)
		before = t
	}
	if before != "" && !strings.HasSuffix(before, "\n") && s != "" && s[0] != '\n' {
		sb.WriteByte(' ')
	}
	return s
}

// botSelfName is the bot's name: Options.BotName, else what names says for its user id.
func (b *builder) botSelfName() string {
	if b.opt.BotName != "" || b.names == nil {
		return b.opt.BotName
	}
	n, _ := b.names.Name(b.opt.BotUserID)
	return n
}

func (b *builder) isBotMention(tok string) bool {
	if b.opt.BotUserID == "" || !strings.HasPrefix(tok, "@") {
		return false
	}
	id, _, _ := strings.Cut(tok[1:], "|")
	return id == b.opt.BotUserID
}

// token writes the plain form of one Slack token (the text between < and >).
func (b *builder) token(sb *strings.Builder, tok string) {
	body, label, _ := strings.Cut(tok, "|")
	switch {
	case strings.HasPrefix(body, "@"): // <@U123> or <@U123|name>
		b.userMention(sb, body[1:], label)
	case strings.HasPrefix(body, "#"): // <#C123|general> or <#C123>
		sb.WriteString("#")
		writeLabelOr(sb, label, body[1:])
	case strings.HasPrefix(body, "!subteam^"): // <!subteam^S123|@team>
		writeAtName(sb, label, strings.TrimPrefix(body, "!subteam^"))
	case body == "!here" || body == "!channel" || body == "!everyone":
		sb.WriteString("@" + body[1:])
	case strings.HasPrefix(body, "!date^"): // <!date^1392734382^{date_short}|Feb 18, 2014>
		writeLabelOr(sb, label, "(a date)")
	case strings.HasPrefix(body, "!"): // other special commands
		writeLabelOr(sb, label, body[1:])
	default:
		sb.WriteString(linkText(unescape(body), unescape(label)))
	}
}

// userMention writes a mentioned user as "@name": the name names knows, else as Slack wrote it.
func (b *builder) userMention(sb *strings.Builder, id, label string) {
	if b.names != nil {
		if n, ok := b.names.Name(id); ok && n != "" {
			sb.WriteString("@" + n)
			return
		}
	}
	writeAtName(sb, label, id)
}

// writeAtName writes a user or group as "@" and the name Slack gave it in the token (with or
// without its own "@"), else its id.
func writeAtName(sb *strings.Builder, label, id string) {
	sb.WriteString("@")
	if label == "" {
		sb.WriteString(id)
		return
	}
	unescapeTo(sb, strings.TrimPrefix(label, "@"))
}

// writeLabelOr writes a token's label, else fallback.
func writeLabelOr(sb *strings.Builder, label, fallback string) {
	if label == "" {
		sb.WriteString(fallback)
		return
	}
	unescapeTo(sb, label)
}

// linkText is a link's plain form: its text, and the address in brackets unless the text is the
// address already (give or take its scheme). A link without text is its address.
func linkText(url, text string) string {
	bare := strings.TrimPrefix(url, "mailto:")
	switch {
	case text == "" || text == url:
		return bare
	case text == bare || "http://"+text == url || "https://"+text == url:
		return text
	}
	return text + " (" + bare + ")"
}

// attachmentsText is the text of a message's attachments (bots often post only those),
// without forwarded messages, which sharedNote notes.
func attachmentsText(as []slack.Attachment) string {
	var parts []string
	for _, a := range as {
		if isShared(a) {
			continue
		}
		var t string
		switch {
		case a.Text != "" || a.Pretext != "" || a.Title != "":
			t = strings.TrimSpace(strings.Join(nonEmpty(a.Pretext, a.Title, a.Text), "\n"))
		default:
			t = a.Fallback
		}
		if t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

func nonEmpty(ss ...string) []string {
	out := ss[:0:0]
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// unescapeTo writes s with Slack's three escapes (&amp; &lt; &gt;) undone.
func unescapeTo(sb *strings.Builder, s string) {
	for {
		i := strings.IndexByte(s, '&')
		if i < 0 {
			sb.WriteString(s)
			return
		}
		sb.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "&amp;"):
			sb.WriteByte('&')
			s = s[5:]
		case strings.HasPrefix(s, "&lt;"):
			sb.WriteByte('<')
			s = s[4:]
		case strings.HasPrefix(s, "&gt;"):
			sb.WriteByte('>')
			s = s[4:]
		default:
			sb.WriteByte('&')
			s = s[1:]
		}
	}
}

func unescape(s string) string {
	if !strings.Contains(s, "&") {
		return s
	}
	var sb strings.Builder
	unescapeTo(&sb, s)
	return sb.String()
}

// isShared reports the attachment Slack adds for a message forwarded (shared) into another.
func isShared(a slack.Attachment) bool { return a.IsShare || a.IsMsgUnfurl }

// sharedNote notes the messages forwarded into m, with their author, text and files. fenced
// (the asker's message): each is fenced as data from its author; else (inside the fence of
// someone else's message) noted as "[shared a message from "Bob": deploy failed]".
func (b *builder) sharedNote(m slack.Message, fenced bool) string {
	var notes []string
	for _, a := range m.Attachments {
		if !isShared(a) {
			continue
		}
		text := a.Text
		if strings.TrimSpace(text) == "" {
			text = a.Fallback
		}
		t := strings.TrimSpace(b.plain(slack.Message{Msg: slack.Msg{Text: text}}))
		files := filesNote(a.Files)
		from := ""
		if a.AuthorName != "" {
			from = " from " + quote(a.AuthorName)
		}
		switch {
		case fenced && (t != "" || files != ""):
			src := "a forwarded message"
			if a.AuthorName != "" {
				src += " by " + quote(a.AuthorName)
			}
			notes = append(notes, b.fence.Wrap(src, joinNonEmpty(t, files)))
		case t != "":
			notes = append(notes, joinNonEmpty("[shared a message"+from+": "+t+"]", files))
		default:
			notes = append(notes, joinNonEmpty("[shared a message"+from+"]", files))
		}
	}
	return strings.Join(notes, "\n")
}

// filesNote notes shared files by name and type: `[shared a file: "report.pdf" (PDF)]`.
func filesNote(files []slack.File) string {
	var notes []string
	for _, f := range files {
		name := f.Name
		if name == "" {
			name = f.Title
		}
		kind := f.PrettyType
		if kind == "" {
			kind = strings.ToUpper(f.Filetype)
		}
		what := "a file"
		if strings.HasPrefix(f.Mimetype, "image/") {
			what = "an image"
		}
		// The name is whoever made the file's choice: quoted, on one line.
		switch {
		case f.Mode == "tombstone" || (name == "" && kind == ""):
			notes = append(notes, "[shared "+what+" that is no longer available]")
		case kind == "" || strings.EqualFold(kind, name):
			notes = append(notes, "[shared "+what+": "+quote(name)+"]")
		case name == "":
			notes = append(notes, "[shared "+what+" ("+kind+")]")
		default:
			notes = append(notes, "[shared "+what+": "+quote(name)+" ("+kind+")]")
		}
	}
	return strings.Join(notes, "\n")
}
