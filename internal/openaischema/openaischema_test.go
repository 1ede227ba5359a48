package openaischema

import "testing"

// TestValidate: a chat request with string content and one with an image part are valid for
// OpenAI; one with an unknown role or no messages is not.
func TestValidate(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc == nil {
		t.Skipf("OpenAI's OpenAPI document is not beside the checkout (CI has it; %s=1 makes this a failure)", Require)
	}
	for _, tc := range []struct {
		name, body string
		valid      bool
	}{
		{"text", `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}],"stream":true}`, true},
		{"image part", `{"model":"gpt-x","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`, true},
		{"unknown role", `{"model":"gpt-x","messages":[{"role":"robot","content":"hi"}]}`, false},
		{"no messages", `{"model":"gpt-x"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := doc.Validate("CreateChatCompletionRequest", []byte(tc.body)); (err == nil) != tc.valid {
				t.Errorf("Validate = %v; want valid %v", err, tc.valid)
			}
		})
	}
}
