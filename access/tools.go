package access

import (
	"fmt"
	"regexp"
	"slices"
)

// toolRef is one entry of a channel's tools: a server's name, or server/tool.
var toolRef = regexp.MustCompile(`^[a-zA-Z0-9-]{1,24}(/[a-zA-Z0-9_-]{1,64})?$`)

// checkTools returns what is wrong with a channel's tools, or "".
func checkTools(id string, refs []string) string {
	for _, r := range refs {
		if !toolRef.MatchString(r) {
			return fmt.Sprintf("channels.%s.tools: %q is not a server or server/tool", id, r)
		}
	}
	return ""
}

// ToolAllowed reports whether channel may use the tool of server: its CHANNEL_CONFIG entry names
// the server or the tool. A channel without one may use none, so installing the bot gives tools to
// nobody.
func (o *Overrides) ToolAllowed(channel, server, tool string) bool {
	if o == nil {
		return false
	}
	refs := o.tools[channel]
	return slices.Contains(refs, server) || slices.Contains(refs, server+"/"+tool)
}
