package access

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v2"
)

// Override is what one channel changes: its system prompt, its chat model, how answers are
// written there, whether pictures are sent to the model, or any of them. Empty fields keep the
// bot's settings (SYSTEM_PROMPT, CHAT_MODEL, REPLY_MODE, VISION).
type Override struct {
	SystemPrompt string `yaml:"system_prompt"` // may contain {bot_name} and {date}, as SYSTEM_PROMPT
	Model        string `yaml:"model"`
	ReplyMode    string `yaml:"reply_mode"` // one of ReplyModes, as REPLY_MODE
	Vision       string `yaml:"vision"`     // auto, on or off, as VISION
}

// ReplyModes are the values of an override's reply_mode (REPLY_MODE's).
var ReplyModes = []string{"auto", "edit", "stream"}

// overridesFile is the shape of the YAML file:
//
//	channels:
//	  C0123ABCD:
//	    system_prompt: "You answer questions about our API."
//	    model: gpt-5.4
//	    reply_mode: stream
type overridesFile struct {
	Channels map[string]*channelEntry `yaml:"channels"`
}

// channelEntry is one channel of the file: its Override and its tools (tools.go).
type channelEntry struct {
	Override `yaml:",inline"`
	Tools    []string `yaml:"tools"`
}

// Limits of an override file.
const (
	maxOverrideFile   = 1 << 20 // bytes
	maxSystemPrompt   = 20000   // characters
	maxModelName      = 200
	maxOverrideErrors = 20
)

// Overrides are per-channel system prompt, model and reply mode overrides. The zero value and nil have
// none. Immutable once loaded and safe for concurrent use.
type Overrides struct {
	channels map[string]Override
	tools    map[string][]string // the tools each channel may use (tools.go)
}

// LoadOverrides reads the override file at path (CHANNEL_CONFIG). An empty path means no
// overrides (nil, nil).
func LoadOverrides(path string) (*Overrides, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("CHANNEL_CONFIG: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxOverrideFile+1))
	if err != nil {
		return nil, fmt.Errorf("CHANNEL_CONFIG %s: %w", path, err)
	}
	if len(data) > maxOverrideFile {
		return nil, fmt.Errorf("CHANNEL_CONFIG %s: larger than %d bytes", path, maxOverrideFile)
	}
	return ParseOverrides(data, path)
}

// ParseOverrides decodes an override file strictly: unknown keys, duplicate channels and
// values of the wrong type are errors that name the line; channel IDs, prompts and model
// names are checked. name is the file's name, for the errors.
func ParseOverrides(data []byte, name string) (*Overrides, error) {
	var file overridesFile
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return nil, fmt.Errorf("CHANNEL_CONFIG %s: %s", name, yamlProblem(err))
	}
	if file.Channels == nil {
		// "channels: {}", or "channels:" with every entry commented out, is fine: a file kept for
		// later, with no overrides yet. Only a file without the key is a mistake.
		var keys map[string]any
		if err := yaml.Unmarshal(data, &keys); err != nil || !hasKey(keys, "channels") {
			return nil, fmt.Errorf("CHANNEL_CONFIG %s: no channels key (expected a top-level \"channels:\" map of channel IDs)", name)
		}
	}
	var problems []string
	out := make(map[string]Override, len(file.Channels))
	tools := map[string][]string{}
	for _, id := range slices.Sorted(maps.Keys(file.Channels)) {
		e := file.Channels[id]
		if e == nil {
			e = &channelEntry{}
		}
		o := &e.Override
		if p := cmp.Or(checkTools(id, e.Tools), checkOverride(id, o, len(e.Tools) > 0)); p != "" {
			problems = append(problems, p)
			continue
		}
		if len(e.Tools) > 0 {
			tools[id] = e.Tools
		}
		if *o != (Override{}) {
			out[id] = Override{SystemPrompt: strings.TrimSpace(o.SystemPrompt), Model: strings.TrimSpace(o.Model),
				ReplyMode: strings.TrimSpace(o.ReplyMode), Vision: strings.TrimSpace(o.Vision)}
		}
	}
	if len(problems) > maxOverrideErrors {
		problems = append(problems[:maxOverrideErrors], fmt.Sprintf("and %d more", len(problems)-maxOverrideErrors))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("CHANNEL_CONFIG %s: %s", name, strings.Join(problems, "; "))
	}
	return &Overrides{channels: out, tools: tools}, nil
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// checkOverride returns what is wrong with one channel's entry, or "".
func checkOverride(id string, o *Override, tools bool) string {
	switch {
	case !ValidChannelID(id) || IsDM(id):
		return fmt.Sprintf("channels: %q is not a channel ID like C0123ABCD (channel details > About, at the bottom)", id)
	case strings.TrimSpace(o.SystemPrompt) == "" && strings.TrimSpace(o.Model) == "" &&
		strings.TrimSpace(o.ReplyMode) == "" && strings.TrimSpace(o.Vision) == "" && !tools:
		return fmt.Sprintf("channels.%s: sets none of system_prompt, model, reply_mode, vision and tools", id)
	case strings.TrimSpace(o.ReplyMode) != "" && !slices.Contains(ReplyModes, strings.TrimSpace(o.ReplyMode)):
		return fmt.Sprintf("channels.%s.reply_mode: %q is not one of %s", id, o.ReplyMode, strings.Join(ReplyModes, ", "))
	case !slices.Contains([]string{"", "auto", "on", "off"}, strings.TrimSpace(o.Vision)):
		return fmt.Sprintf("channels.%s.vision: %q is not auto, on or off", id, o.Vision)
	case utf8.RuneCountInString(o.SystemPrompt) > maxSystemPrompt:
		return fmt.Sprintf("channels.%s.system_prompt: longer than %d characters", id, maxSystemPrompt)
	case len(o.Model) > maxModelName || strings.ContainsFunc(strings.TrimSpace(o.Model), unicode.IsSpace):
		return fmt.Sprintf("channels.%s.model: %q is not a model name", id, o.Model)
	}
	return ""
}

// unknownField matches yaml.v2's unknown-key error: line, key, Go type.
var unknownField = regexp.MustCompile(`^line (\d+): field (.+) not found in type (\S+)$`)

// allowedKeys are the keys each Go type of the file accepts, for error messages.
var allowedKeys = map[string]string{
	"access.overridesFile": "channels",
	"access.channelEntry":  "system_prompt, model, reply_mode, vision, tools",
}

// yamlProblem shortens yaml.v2's errors ("yaml: unmarshal errors:\n  line 3: field modle not
// found in type access.Override") to one line that names the line and what to fix.
func yamlProblem(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, 0, len(te.Errors))
		for _, e := range te.Errors {
			if m := unknownField.FindStringSubmatch(e); m != nil {
				e = fmt.Sprintf("line %s: unknown key %q (allowed: %s)", m[1], m[2], allowedKeys[m[3]])
			}
			msgs = append(msgs, e)
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

// Lookup returns the override of channel, if it has one.
func (o *Overrides) Lookup(channel string) (Override, bool) {
	if o == nil {
		return Override{}, false
	}
	v, ok := o.channels[channel]
	return v, ok
}

// Models returns the models the overrides name, each with its channels (sorted).
func (o *Overrides) Models() map[string][]string {
	if o == nil {
		return nil
	}
	out := make(map[string][]string)
	for _, id := range slices.Sorted(maps.Keys(o.channels)) {
		if m := o.channels[id].Model; m != "" {
			out[m] = append(out[m], id)
		}
	}
	return out
}

// Len returns the number of channels with an override.
func (o *Overrides) Len() int {
	if o == nil {
		return 0
	}
	return len(o.channels)
}
