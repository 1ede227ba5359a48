package fakeslack

import (
	"encoding/json"
	"regexp"
	"strings"
)

var tokenRE = regexp.MustCompile(`<([^<>]*)>`)

// richText builds the rich_text block Slack's clients attach to a typed message: text
// runs, and user, channel, broadcast and link elements for the <…> tokens of text.
func richText(text, blockID string) json.RawMessage {
	var elems []map[string]any
	addText := func(s string) {
		if s == "" {
			return
		}
		s = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
		elems = append(elems, map[string]any{"type": "text", "text": s})
	}
	last := 0
	for _, m := range tokenRE.FindAllStringSubmatchIndex(text, -1) {
		addText(text[last:m[0]])
		last = m[1]
		tok := text[m[2]:m[3]]
		target, label, _ := strings.Cut(tok, "|")
		switch {
		case strings.HasPrefix(target, "@U"), strings.HasPrefix(target, "@W"):
			elems = append(elems, map[string]any{"type": "user", "user_id": target[1:]})
		case strings.HasPrefix(target, "#C"), strings.HasPrefix(target, "#G"):
			elems = append(elems, map[string]any{"type": "channel", "channel_id": target[1:]})
		case target == "!here", target == "!channel", target == "!everyone":
			elems = append(elems, map[string]any{"type": "broadcast", "range": target[1:]})
		case strings.HasPrefix(target, "!subteam^"):
			elems = append(elems, map[string]any{"type": "usergroup", "usergroup_id": strings.TrimPrefix(target, "!subteam^")})
		case strings.HasPrefix(target, "!"):
			addText(text[m[0]:m[1]])
		default:
			link := map[string]any{"type": "link", "url": target}
			if label != "" {
				link["text"] = label
			}
			elems = append(elems, link)
		}
	}
	addText(text[last:])
	if elems == nil {
		elems = []map[string]any{}
	}
	b, _ := json.Marshal([]map[string]any{{
		"type":     "rich_text",
		"block_id": blockID,
		"elements": []map[string]any{{"type": "rich_text_section", "elements": elems}},
	}})
	return b
}
