package access_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmbot/llmbot/access"
)

func TestLoadOverridesGood(t *testing.T) {
	o, err := access.LoadOverrides(filepath.Join("testdata", "good.yaml"))
	if err != nil {
		t.Fatalf("LoadOverrides(good.yaml) = %v", err)
	}
	if got, want := o.Len(), 5; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
	tests := []struct {
		channel string
		want    access.Override
		found   bool
	}{
		{"C0123ABCD", access.Override{SystemPrompt: "You are {bot_name}, the API team's assistant. Answer with code samples in Go.", Model: "gpt-5.4"}, true},
		{"G0456EFGH", access.Override{Model: "gpt-5.4-mini"}, true},
		{"C0789IJKL", access.Override{SystemPrompt: "Answer in French."}, true},
		{"C0999VISN", access.Override{Vision: "off"}, true},
		{"C0999MNOP", access.Override{ReplyMode: "stream"}, true},
		{"C9999ZZZZ", access.Override{}, false},
		{"", access.Override{}, false},
	}
	for _, tt := range tests {
		got, found := o.Lookup(tt.channel)
		if got != tt.want || found != tt.found {
			t.Errorf("Lookup(%q) = %+v, %v; want %+v, %v", tt.channel, got, found, tt.want, tt.found)
		}
	}
}

// Every problem names where it is: the line for what the decoder sees, the channel for the rest.
func TestLoadOverridesErrors(t *testing.T) {
	tests := []struct {
		file string
		want []string // substrings of the error
	}{
		{"unknown_key.yaml", []string{"unknown_key.yaml", `line 4: unknown key "modle" (allowed: system_prompt, model, reply_mode, vision, tools)`}},
		{"unknown_top.yaml", []string{`line 4: unknown key "channel_defaults" (allowed: channels)`}},
		{"duplicate.yaml", []string{"line 5", `"C0123ABCD" already set`}}, // yaml.v2 names the line of the value
		{"wrong_type.yaml", []string{"line 4", "cannot unmarshal !!seq into string"}},
		{"bad_ids.yaml", []string{`"general" is not a channel ID like C0123ABCD`, `"c0123abcd" is not a channel ID`, `"D0123ABCD" is not a channel ID`}},
		{"empty_override.yaml", []string{"channels.C0123ABCD: sets none of system_prompt, model, reply_mode, vision and tools", "channels.C0456EFGH: sets none"}},
		{"bad_vision.yaml", []string{`channels.C0123ABCD.vision: "sometimes" is not auto, on or off`}},
		{"bad_reply_mode.yaml", []string{`channels.C0123ABCD.reply_mode: "chunks" is not one of auto, edit, stream`}},
		{"bad_model.yaml", []string{`channels.C0123ABCD.model: "gpt 5.4 please" is not a model name`}},
		{"empty.yaml", []string{"no channels key"}},
		{"not_yaml.yaml", []string{"not_yaml.yaml", "line"}},
		{"missing.yaml", []string{"CHANNEL_CONFIG", "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			o, err := access.LoadOverrides(filepath.Join("testdata", tt.file))
			if err == nil {
				t.Fatalf("LoadOverrides(%s) = %+v, nil; want an error", tt.file, o)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestBadIDsListedTogetherValidOnesNotBlamed(t *testing.T) {
	_, err := access.LoadOverrides(filepath.Join("testdata", "bad_ids.yaml"))
	if err == nil || strings.Contains(err.Error(), "C0456EFGH") {
		t.Errorf("error = %v; want the three bad IDs and not the good one", err)
	}
}

func TestEmptyChannelsIsValid(t *testing.T) {
	o, err := access.LoadOverrides(filepath.Join("testdata", "empty_channels.yaml"))
	if err != nil || o.Len() != 0 {
		t.Errorf("LoadOverrides(channels: {}) = %d overrides, %v; want none and no error", o.Len(), err)
	}
}

func TestNoOverrideFile(t *testing.T) {
	o, err := access.LoadOverrides("")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.Lookup("C0123ABCD"); ok || o.Len() != 0 {
		t.Error("no file: want no overrides")
	}
}

func TestOverrideFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	big := "channels:\n  C0123ABCD:\n    system_prompt: \"" + strings.Repeat("x", 1<<20) + "\"\n"
	if err := os.WriteFile(path, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := access.LoadOverrides(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("LoadOverrides(1 MiB file) = %v, want a size error", err)
	}
}

func TestSystemPromptTooLong(t *testing.T) {
	data := "channels:\n  C0123ABCD:\n    system_prompt: \"" + strings.Repeat("é", 20001) + "\"\n"
	if _, err := access.ParseOverrides([]byte(data), "x.yaml"); err == nil || !strings.Contains(err.Error(), "longer than 20000 characters") {
		t.Errorf("ParseOverrides(long prompt) = %v, want a length error", err)
	}
}

// A CHANNEL_CONFIG whose entries are all commented out ("channels:" followed only by comments,
// what an operator gets by commenting out the example) is a file kept for later, like
// "channels: {}". It is refused instead, and the bot will not start, with an error that says
// the file has "no channels key" although it has one.
func TestParseOverridesChannelsKeyWithOnlyComments(t *testing.T) {
	data := []byte("channels:\n  # C0123ABCD:\n  #   model: gpt-5.4\n")
	o, err := access.ParseOverrides(data, "channels.yaml")
	if err != nil {
		t.Fatalf("ParseOverrides = %v; want no overrides, as for channels: {}", err)
	}
	if o.Len() != 0 {
		t.Errorf("Len = %d, want 0", o.Len())
	}
}
