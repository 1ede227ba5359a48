package state

import (
	"bytes"
	"strings"
	"testing"
)

// TestDeriveKey: a derived key is the same on every replica (same secret, same purpose), differs
// per purpose and per secret, and does not hold the secret.
func TestDeriveKey(t *testing.T) {
	const token = "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
	inbox := DeriveKey(token, "llmbot replica inbox v1")
	if !bytes.Equal(inbox, DeriveKey(token, "llmbot replica inbox v1")) {
		t.Error("two replicas derive different keys from one token")
	}
	for _, other := range [][]byte{DeriveKey(token, "llmbot thread grants v1"), DeriveKey(token+"x", "llmbot replica inbox v1")} {
		if bytes.Equal(inbox, other) {
			t.Error("another purpose or another token derives the same key")
		}
	}
	if len(inbox) != 32 || strings.Contains(string(inbox), token) {
		t.Errorf("derived key of %d bytes; want 32, without the token", len(inbox))
	}
}
