package convo

import (
	"strconv"
	"strings"

	"github.com/llmbot/llmbot/slackmd"
	"github.com/slack-go/slack"
)

// blocksText is the text of a message that has only Block Kit blocks (monitoring and
// integration apps often post an empty text): headers, sections and their fields, context
// text, Markdown blocks and rich text, one block a line, in Slack's mrkdwn (with <…> tokens and
// escapes) so that plain reads it like a message's text. Images, buttons and the like are left
// out.
func blocksText(bs slack.Blocks) string {
	var lines []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			lines = append(lines, s)
		}
	}
	for _, blk := range bs.BlockSet {
		switch b := blk.(type) {
		case *slack.HeaderBlock:
			add(textObject(b.Text))
		case *slack.SectionBlock:
			add(textObject(b.Text))
			for _, f := range b.Fields {
				add(textObject(f))
			}
		case *slack.ContextBlock:
			var parts []string
			for _, e := range b.ContextElements.Elements {
				if t, ok := e.(*slack.TextBlockObject); ok {
					parts = append(parts, textObject(t))
				}
			}
			add(strings.Join(parts, " "))
		case *slack.MarkdownBlock:
			add(slackmd.EscapeMrkdwn(b.Text)) // Markdown, not mrkdwn: only the escapes are Slack's
		case *slack.RichTextBlock:
			for _, e := range b.Elements {
				add(richText(e))
			}
		}
	}
	return strings.Join(lines, "\n")
}

// textObject is a text object as mrkdwn: plain_text is escaped.
func textObject(t *slack.TextBlockObject) string {
	switch {
	case t == nil:
		return ""
	case t.Type == slack.PlainTextType:
		return slackmd.EscapeMrkdwn(t.Text) // for plain to undo
	}
	return t.Text
}

// richText is one rich text element (a section, list, quote or preformatted block) as mrkdwn.
func richText(e slack.RichTextElement) string {
	switch e := e.(type) {
	case *slack.RichTextSection:
		return richSection(e.Elements)
	case *slack.RichTextQuote:
		return "> " + strings.ReplaceAll(richSection(e.Elements), "\n", "\n> ")
	case *slack.RichTextPreformatted:
		return "```\n" + richSection(e.Elements) + "\n```"
	case *slack.RichTextList:
		indent := strings.Repeat("  ", e.Indent)
		var items []string
		for i, it := range e.Elements {
			mark := "• "
			if e.Style == slack.RTEListOrdered {
				mark = strconv.Itoa(e.Offset+i+1) + ". "
			}
			items = append(items, indent+mark+richText(it))
		}
		return strings.Join(items, "\n")
	}
	return ""
}

func richSection(es []slack.RichTextSectionElement) string {
	var sb strings.Builder
	for _, e := range es {
		switch e := e.(type) {
		case *slack.RichTextSectionTextElement:
			if e.Style != nil && e.Style.Code {
				sb.WriteString("`" + slackmd.EscapeMrkdwn(e.Text) + "`")
			} else {
				sb.WriteString(slackmd.EscapeMrkdwn(e.Text))
			}
		case *slack.RichTextSectionLinkElement:
			if e.Text != "" {
				sb.WriteString("<" + e.URL + "|" + slackmd.EscapeMrkdwn(e.Text) + ">")
			} else {
				sb.WriteString("<" + e.URL + ">")
			}
		case *slack.RichTextSectionUserElement:
			sb.WriteString("<@" + e.UserID + ">")
		case *slack.RichTextSectionChannelElement:
			sb.WriteString("<#" + e.ChannelID + ">")
		case *slack.RichTextSectionUserGroupElement:
			sb.WriteString("<!subteam^" + e.UsergroupID + ">")
		case *slack.RichTextSectionEmojiElement:
			sb.WriteString(":" + e.Name + ":")
		case *slack.RichTextSectionBroadcastElement:
			sb.WriteString("<!" + e.Range + ">")
		case *slack.RichTextSectionDateElement:
			fallback := ""
			if e.Fallback != nil {
				fallback = *e.Fallback
			}
			sb.WriteString("<!date^" + strconv.FormatInt(int64(e.Timestamp), 10) + "^" + e.Format + "|" + slackmd.EscapeMrkdwn(fallback) + ">")
		}
	}
	return sb.String()
}
